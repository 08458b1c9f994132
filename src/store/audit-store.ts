/** The audit trail (migrations/016_users_audit.sql): rows are only added. All SQL for it lives here. */
import type { JSONValue, Sql } from "postgres";
import type { AuditEntry } from "../protocol/teams.js";
import { storableText } from "./text.js";
import type { Queryable } from "./thread-store.js";

export type NewAuditEntry = Omit<AuditEntry, "id" | "atMs"> & { atMs?: number };

export interface AuditQuery {
  /** By name: a user's rows (and the command line's rows of an OS user of that name). */
  userName?: string | null;
  threadId?: string | null;
  sinceMs?: number | null;
  /** Rows with a larger id (paging). */
  afterId?: number | null;
  limit: number;
}

export class AuditStore {
  constructor(private readonly sql: Sql) {}

  /** `q`: where to write it (a transaction it rides, side-writes.ts), the pool when absent. */
  async add(e: NewAuditEntry, q: Queryable = this.sql): Promise<void> {
    await q`
      insert into audit_log (at_ms, user_id, user_name, admin, action, thread_id, connection, remote, client, detail)
      values (${e.atMs ?? Date.now()}, ${e.userId}, ${e.userName}, ${e.admin}, ${e.action}, ${e.threadId}, ${e.connection}, ${e.remote}, ${e.client},
        ${q.json(storableText(e.detail) as JSONValue)})`;
  }

  /** Oldest first, filtered. */
  list(q: AuditQuery): Promise<AuditEntry[]> {
    const sql = this.sql;
    return sql<AuditEntry[]>`
      select id, at_ms, user_id, user_name, admin, action, thread_id, connection, remote, client, detail from audit_log
      where true
        ${q.userName != null ? sql`and user_name = ${q.userName}` : sql``}
        ${q.threadId != null ? sql`and thread_id = ${q.threadId}` : sql``}
        ${q.sinceMs != null ? sql`and at_ms >= ${q.sinceMs}` : sql``}
        ${q.afterId != null ? sql`and id > ${q.afterId}` : sql``}
      order by id
      limit ${q.limit}`;
  }
}
