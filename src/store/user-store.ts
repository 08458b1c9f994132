/**
 * Users, thread ownership and sharing (migrations/016_users_audit.sql). All SQL for them lives here.
 */
import type { Sql } from "postgres";
import { uuidv7 } from "../ids.js";
import type { SandboxMode, SandboxPolicy } from "../protocol/common.js";

export interface UserRecord {
  id: string;
  name: string;
  admin: boolean;
  roots: string[];
  dangerFullAccess: boolean;
  tokenId: string | null;
  tokenHash: string | null;
  createdAtMs: number;
  updatedAtMs: number;
  revokedAtMs: number | null;
}

export type ShareAccess = "read" | "write";

/** A thread's owner, what one user may do with it (a share), and where it works. */
export interface ThreadAccessRow {
  ownerId: string;
  shared: ShareAccess | null;
  cwd: string;
  sandbox: SandboxMode;
  sandboxPolicy: SandboxPolicy | null;
}

export class UserExistsError extends Error {}

export class UserStore {
  constructor(readonly sql: Sql) {}

  async add(u: { name: string; admin: boolean; roots: string[]; dangerFullAccess: boolean; tokenId: string | null; tokenHash: string | null }): Promise<UserRecord> {
    const now = Date.now();
    try {
      const [row] = await this.sql<UserRecord[]>`
        insert into users (id, name, admin, roots, danger_full_access, token_id, token_hash, created_at_ms, updated_at_ms)
        values (${uuidv7(now)}, ${u.name}, ${u.admin}, ${this.sql.array(u.roots)}, ${u.dangerFullAccess}, ${u.tokenId}, ${u.tokenHash}, ${now}, ${now})
        returning *`;
      return row!;
    } catch (err) {
      if ((err as { code?: string }).code === "23505") throw new UserExistsError(`a user named ${u.name} exists already`);
      throw err;
    }
  }

  /** Every user, revoked ones included (oldest first). */
  list(): Promise<UserRecord[]> {
    return this.sql<UserRecord[]>`select * from users order by created_at_ms, id`;
  }

  /** Users changed since `sinceMs` (updated_at_ms), for the directory's refresh. */
  changedSince(sinceMs: number): Promise<UserRecord[]> {
    return this.sql<UserRecord[]>`select * from users where updated_at_ms >= ${sinceMs} order by updated_at_ms`;
  }

  async byTokenId(tokenId: string): Promise<UserRecord | null> {
    const [row] = await this.sql<UserRecord[]>`select * from users where token_id = ${tokenId}`;
    return row ?? null;
  }

  async byId(id: string): Promise<UserRecord | null> {
    const [row] = await this.sql<UserRecord[]>`select * from users where id = ${id}`;
    return row ?? null;
  }

  /** The active user of that name. */
  async byName(name: string): Promise<UserRecord | null> {
    const [row] = await this.sql<UserRecord[]>`select * from users where name = ${name} and revoked_at_ms is null`;
    return row ?? null;
  }

  /** Revokes the active user of that name (its token stops working); null when there is none. */
  async revoke(name: string): Promise<UserRecord | null> {
    const now = Date.now();
    const [row] = await this.sql<UserRecord[]>`
      update users set revoked_at_ms = ${now}, updated_at_ms = ${now}, token_hash = null
      where name = ${name} and revoked_at_ms is null returning *`;
    return row ?? null;
  }

  /** Names of the given user ids (revoked ones too), for showing owners. */
  async namesOf(ids: readonly string[]): Promise<Map<string, string>> {
    if (ids.length === 0) return new Map();
    const rows = await this.sql<{ id: string; name: string }[]>`select id, name from users where id in ${this.sql([...ids])}`;
    return new Map(rows.map((r) => [r.id, r.name]));
  }

  // ---- threads ---------------------------------------------------------------------------

  /** Who owns the thread and how it is shared with `userId`; null when there is no such thread. */
  async threadAccess(threadId: string, userId: string): Promise<ThreadAccessRow | null> {
    const [row] = await this.sql<Array<{ userId: string; access: ShareAccess | null } & Pick<ThreadAccessRow, "cwd" | "sandbox" | "sandboxPolicy">>>`
      select t.user_id, s.access, t.cwd, t.sandbox, t.sandbox_policy from threads t
      left join thread_shares s on s.thread_id = t.id and s.user_id = ${userId}
      where t.id = ${threadId}`;
    return row ? { ownerId: row.userId, shared: row.access, cwd: row.cwd, sandbox: row.sandbox, sandboxPolicy: row.sandboxPolicy } : null;
  }

  /** The same for several threads at once (thread/loaded/list, re-checking subscriptions). */
  async threadsAccess(threadIds: readonly string[], userId: string): Promise<Map<string, { ownerId: string; shared: ShareAccess | null }>> {
    if (threadIds.length === 0) return new Map();
    const rows = await this.sql<{ id: string; userId: string; access: ShareAccess | null }[]>`
      select t.id, t.user_id, s.access from threads t
      left join thread_shares s on s.thread_id = t.id and s.user_id = ${userId}
      where t.id in ${this.sql([...threadIds])}`;
    return new Map(rows.map((r) => [r.id, { ownerId: r.userId, shared: r.access }]));
  }

  /** Shares or unshares (`access` null) a thread with a user. */
  async share(threadId: string, userId: string, access: ShareAccess | null): Promise<void> {
    if (access === null) {
      await this.sql`delete from thread_shares where thread_id = ${threadId} and user_id = ${userId}`;
      return;
    }
    await this.sql`
      insert into thread_shares (thread_id, user_id, access, created_at_ms) values (${threadId}, ${userId}, ${access}, ${Date.now()})
      on conflict (thread_id, user_id) do update set access = excluded.access`;
  }

  /** Who a thread is shared with (names included), by name. */
  sharesOf(threadId: string): Promise<Array<{ userId: string; name: string; access: ShareAccess }>> {
    return this.sql<Array<{ userId: string; name: string; access: ShareAccess }>>`
      select s.user_id, coalesce(u.name, s.user_id) as name, s.access from thread_shares s
      left join users u on u.id = s.user_id
      where s.thread_id = ${threadId} order by name`;
  }
}
