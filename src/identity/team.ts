/**
 * The team side of a server, built once by src/server.ts: its users (directory.ts), the request
 * guard every connection's requests pass (request-guard.ts), quotas, the audit trail, and the
 * connections to close when their user is revoked or their JWT expires.
 */
import os from "node:os";
import type { Sql } from "postgres";
import type { Usage } from "../agent/messages.js";
import type { Logger } from "../log.js";
import type { Connection } from "../rpc/connection.js";
import { AuditStore } from "../store/audit-store.js";
import { QuotaStore } from "../store/quota-store.js";
import type { SideWrites } from "../store/side-writes.js";
import { UserStore } from "../store/user-store.js";
import { Admission } from "./admission.js";
import { AuditLog } from "./audit-log.js";
import { DEFAULT_USERS_REFRESH_MS, UserDirectory } from "./directory.js";
import { JwtVerifier, type JwtSettings } from "./jwt.js";
import { LOCAL_USER_ID, localPrincipal, userPrincipal, type Principal } from "./principal.js";
import { Quotas, type QuotaLimits } from "./quotas.js";
import { TeamRequestGuard, type GuardDeps } from "./request-guard.js";
import { userOfCommandExecScope } from "./workspace.js";

export interface TeamSettings {
  quotas?: QuotaLimits;
  jwt?: JwtSettings | null;
  /** stdio: act as this named user instead of the local one (APP_SERVER_USER). */
  stdioUser?: string | null;
  usersRefreshMs?: number;
}

/** The OS user running the server: what the local user is called. */
export function osUserName(): string {
  try {
    return os.userInfo().username || "local";
  } catch {
    return "local";
  }
}

export interface TeamDeps {
  sql: Sql;
  /** Audit rows and token counts go with the next recording transaction (store/side-writes.ts). */
  writes: SideWrites;
  log: Logger;
  settings: TeamSettings;
  processId: () => string;
  defaultCwd: string;
  activeTurn: GuardDeps["activeTurn"];
  loadedOwner: GuardDeps["loadedOwner"];
  /** Per-user token counters for /metrics. */
  onTokens?(userName: string, usage: Usage): void;
  /** Stops a connection following a thread (its share was taken back). */
  unsubscribe(threadId: string, conn: Connection): void;
}

export class Team {
  readonly users: UserStore;
  readonly directory: UserDirectory;
  readonly quotas: Quotas;
  readonly auditStore: AuditStore;
  readonly audit: AuditLog;
  readonly quotaStore: QuotaStore;
  readonly guard: TeamRequestGuard;
  /** Open connections and how to close each one's transport. */
  private readonly connections = new Map<Connection, ((code: number, reason: string) => void) | undefined>();
  private readonly expiries = new Map<Connection, NodeJS.Timeout>();
  private readonly log: Logger;

  private constructor(private readonly deps: TeamDeps) {
    const log = deps.log.child({ component: "team" });
    this.log = log;
    this.users = new UserStore(deps.sql);
    this.directory = new UserDirectory(this.users, deps.settings.jwt ? new JwtVerifier(deps.settings.jwt) : null, log, deps.settings.usersRefreshMs ?? DEFAULT_USERS_REFRESH_MS);
    this.quotaStore = new QuotaStore(deps.sql);
    this.quotas = new Quotas({
      store: this.quotaStore,
      writes: deps.writes,
      limits: deps.settings.quotas ?? {},
      processId: deps.processId,
      nameOf: (id) => this.directory.nameOf(id) ?? id,
      ...(deps.onTokens ? { onTokens: deps.onTokens } : {}),
      log,
    });
    this.auditStore = new AuditStore(deps.sql);
    this.audit = new AuditLog(this.auditStore, deps.writes, log);
    this.guard = new TeamRequestGuard({
      users: this.users,
      directory: this.directory,
      quotas: this.quotas,
      audit: this.audit,
      defaultCwd: deps.defaultCwd,
      processLabel: () => deps.processId().slice(0, 8),
      activeTurn: deps.activeTurn,
      loadedOwner: deps.loadedOwner,
    });
    // A revoked user's connections end within one refresh of the users.
    this.directory.onRevoked((userId) => {
      for (const c of this.connections.keys()) if (c.principal.id === userId) this.end(c, "user revoked");
    });
    this.directory.onRefreshed(() => this.recheckShares().catch((err) => log.warn({ err }, "could not re-check the connections' shares")));
  }

  /**
   * Shares changed on any process (thread/share there, or here): within one users refresh every
   * connection that holds a thread through a share gets its current level — no longer asked to
   * approve after a write share became read, no longer following the thread once the share is gone.
   */
  private async recheckShares(): Promise<void> {
    for (const conn of this.connections.keys()) {
      const ids = this.guard.shared(conn);
      if (ids.length === 0) continue;
      const now = await this.users.threadsAccess(ids, conn.principal.id);
      for (const id of ids) {
        const row = now.get(id);
        const level = row === undefined ? null : row.ownerId === conn.principal.id ? "owner" : (row.shared ?? (conn.principal.admin ? "admin" : null));
        if (level !== null) this.guard.regrant(conn, id, level);
        else {
          this.guard.revoke(conn, id);
          this.deps.unsubscribe(id, conn);
        }
      }
    }
  }

  static async start(deps: TeamDeps): Promise<Team> {
    const team = new Team(deps);
    await team.directory.start();
    return team;
  }

  /** How WebSocket clients are admitted (the server's token, users' tokens, JWTs). */
  admission(serverToken: string | null, peerUid: number | undefined): Admission {
    return new Admission({ serverToken, ...(peerUid === undefined ? {} : { peerUid }), directory: this.directory, localName: osUserName(), log: this.deps.log });
  }

  /** The principal of a stdio connection: the spawning user, or the user APP_SERVER_USER names. */
  stdioPrincipal(): Principal {
    const name = this.deps.settings.stdioUser;
    if (!name) return localPrincipal("stdio", osUserName());
    const user = this.directory.byName(name);
    if (!user) throw new Error(`APP_SERVER_USER names no user of this server: ${name} (add it with app-server users add ${name})`);
    return userPrincipal(user, "stdio");
  }

  /** Tracks a connection: closed when its user is revoked or its credential expires. */
  track(conn: Connection, closeSocket: ((code: number, reason: string) => void) | undefined): void {
    this.connections.set(conn, closeSocket);
    const expires = conn.principal.expiresAtMs;
    if (expires !== undefined) {
      const timer = setTimeout(() => this.end(conn, "sign-in expired"), Math.max(0, Math.min(expires - Date.now(), 2 ** 31 - 1)));
      timer.unref();
      this.expiries.set(conn, timer);
    }
    conn.onClose(() => {
      this.connections.delete(conn);
      const timer = this.expiries.get(conn);
      if (timer) clearTimeout(timer);
      this.expiries.delete(conn);
    });
  }

  private end(conn: Connection, reason: string): void {
    const close = this.connections.get(conn);
    // 1008: policy violation — the credential is no longer valid; the client should not just retry.
    if (close) close(1008, reason);
    conn.close();
  }

  /**
   * What a sandbox scope of a confined user's must not see (TrustBoundary.setScopeHidden): the
   * roots of every other confined user, revoked ones included (their files are still there), but
   * none of the owner's own. The scope is a thread id or `command-exec:<user id>`; the local user,
   * admins and scopes of no known user see what they saw before.
   */
  hiddenFrom(scope: string): string[] {
    const owner = userOfCommandExecScope(scope) ?? this.deps.loadedOwner(scope);
    if (owner === null || owner === LOCAL_USER_ID) return [];
    const me = this.directory.active(owner);
    if (!me || me.admin) return [];
    const mine = new Set(me.roots);
    return this.directory
      .all()
      .filter((u) => u.id !== owner && !u.admin)
      .flatMap((u) => u.roots)
      .filter((r) => !mine.has(r));
  }

  /** The connections of this process acting for a user (to unsubscribe them when a share is taken back). */
  connectionsOf(userId: string): Connection[] {
    return [...this.connections.keys()].filter((c) => c.principal.id === userId);
  }

  async close(): Promise<void> {
    this.directory.stop();
    for (const t of this.expiries.values()) clearTimeout(t);
    await this.quotas.flush();
    // Not fatal (takeSlot frees the slots of a process whose heartbeat expired), but until then they count against their users.
    await this.quotaStore
      .releaseAll(this.deps.processId())
      .catch((err) => this.log.warn({ err }, "could not release this process's turn slots: they count until its heartbeat expires"));
  }
}
