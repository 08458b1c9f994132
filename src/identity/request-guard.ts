/**
 * The one place every request goes through before its handler (Connection.handle calls `admit`):
 * the caller's request rate, the method's rule (method-rules.ts) — admins only, the thread it acts
 * on and what the caller may do there, the workspace it would work in, the quotas of a turn it
 * starts — and afterwards its audit row. Handlers never check any of this themselves.
 *
 * A thread the caller may not see is answered exactly as an unknown thread id is (-32600 "thread
 * not found: <id>"), so thread ids say nothing about other users' threads. The levels a
 * connection was granted per thread also decide which server requests it is sent: approvals and
 * other questions go to the owner's connections and those of users the thread is shared with for
 * writing — not to readers, not to admins following another user's thread.
 */
import type { ClientRequestMethod } from "../protocol/methods.js";
import { ErrorCode, type ClientReply } from "../protocol/jsonrpc.js";
import type { AdmittedRequest, Connection, RequestGuard } from "../rpc/connection.js";
import { invalidRequest, RpcError, threadNotFound } from "../rpc/errors.js";
import type { UserStore, ThreadAccessRow } from "../store/user-store.js";
import type { AuditLog, AuditSource } from "./audit-log.js";
import type { UserDirectory } from "./directory.js";
import { ruleOf, type AuditFacts, type ThreadFacts, type ThreadNeed } from "./method-rules.js";
import { localPrincipal, LOCAL_USER_ID, userPrincipal, type Principal } from "./principal.js";
import { QuotaExceededError, type Quotas, type TurnSlot } from "./quotas.js";
import { checkWorkspace, workspaceBase, WorkspaceRefusedError, type WorkspaceUse } from "./workspace.js";

/** What a connection may do with a thread. */
export type ThreadLevel = "owner" | "write" | "read" | "admin";

export interface GuardDeps {
  users: UserStore;
  directory: UserDirectory;
  quotas: Quotas;
  audit: AuditLog;
  /** Where unconfined users' threads run by default (the server's cwd). */
  defaultCwd: string;
  /** This process, as audit rows name it. */
  processLabel: () => string;
  /** The turn now running on a thread in this process, with a promise of its end. */
  activeTurn(threadId: string): { id: string; ended: Promise<void> } | null;
  /** The owner of a thread loaded in this process (no lookup needed when it is the caller). */
  loadedOwner(threadId: string): string | null;
}

const LEVEL_MEETS: Record<ThreadNeed, readonly ThreadLevel[]> = {
  read: ["owner", "write", "read", "admin"],
  write: ["owner", "write", "admin"],
  owner: ["owner", "admin"],
};

function levelOf(who: Principal, row: ThreadAccessRow): ThreadLevel | null {
  if (row.ownerId === who.id) return "owner";
  if (row.shared) return row.shared;
  return who.admin ? "admin" : null;
}

/** The guard's errors as JSON-RPC answers. */
function asRpc(err: unknown): unknown {
  if (err instanceof QuotaExceededError) return new RpcError(ErrorCode.QuotaExceeded, err.message, err.data);
  if (err instanceof WorkspaceRefusedError) return invalidRequest(err.message);
  return err;
}

export class TeamRequestGuard implements RequestGuard {
  /** Per connection: the level it was granted on each thread it touched. */
  private readonly levels = new WeakMap<Connection, Map<string, ThreadLevel>>();
  /** Turns holding a concurrent-turn slot (so a repeated turn/start does not take a second one). */
  private readonly slotted = new Set<string>();

  constructor(private readonly deps: GuardDeps) {}

  admit(method: ClientRequestMethod, params: unknown, conn: Connection): AdmittedRequest | Promise<AdmittedRequest> {
    try {
      const admitted = this.admitOrThrow(method, params as Record<string, unknown>, conn);
      return admitted instanceof Promise ? admitted.catch((err: unknown) => Promise.reject(asRpc(err))) : admitted;
    } catch (err) {
      throw asRpc(err);
    }
  }

  /** Synchronous for rules that need no lookup (open, self, admin). */
  private admitOrThrow(method: ClientRequestMethod, p: Record<string, unknown>, conn: Connection): AdmittedRequest | Promise<AdmittedRequest> {
    const who = conn.principal;
    this.deps.quotas.takeRequest(who.id);
    const rule = ruleOf(method);
    switch (rule.kind) {
      case "open":
      case "self":
        return this.after(conn, rule.audit, p, false, undefined);
      case "admin":
        if (!who.admin) throw invalidRequest(`${method} is for admins`);
        return this.after(conn, rule.audit, p, false, undefined);
      case "create": {
        const then = this.after(conn, rule.audit, p, false, undefined, (r) => this.grantNew(conn, r));
        if (!rule.workspace) return then;
        return checkWorkspace(who, rule.workspace(p as never, this.base(who)), `${method}'s cwd`).then(() => then);
      }
      case "thread":
        return this.threadRequest(method, rule, p, conn);
    }
  }

  private async threadRequest(method: ClientRequestMethod, rule: Extract<ReturnType<typeof ruleOf>, { kind: "thread" }>, p: Record<string, unknown>, conn: Connection): Promise<AdmittedRequest> {
    const who = conn.principal;
    const threadId = p.threadId as string;
    // The owner on a thread loaded here, for a request that needs nothing else from the row
    // (steer, interrupt, pages): no lookup on the hot path.
    if (!rule.workspace && !rule.startsTurn && !rule.audit && this.deps.loadedOwner(threadId) === who.id) {
      this.grant(conn, threadId, "owner");
      return {};
    }
    const row = await this.deps.users.threadAccess(threadId, who.id);
    // An unknown thread: the handler gives its usual answer.
    if (row === null) return {};
    const level = levelOf(who, row);
    if (level === null) {
      if (rule.unknownAnswer !== undefined) return { answer: rule.unknownAnswer };
      throw threadNotFound(threadId);
    }
    const need = typeof rule.need === "function" ? rule.need(p as never) : rule.need;
    if (!LEVEL_MEETS[need].includes(level))
      throw invalidRequest(need === "owner" ? `only the owner of thread ${threadId} (or an admin) can do that` : `thread ${threadId} is shared with you read-only`);
    this.grant(conn, threadId, level);
    // The thread works in its owner's workspace (a fork: in the caller's, whose thread it becomes).
    if (rule.workspace) await checkWorkspace(rule.forks ? who : await this.ownerOf(row.ownerId), rule.workspace(p as never, row), "the thread's cwd");
    let slot: TurnSlot | null = null;
    if (rule.startsTurn) {
      await this.deps.quotas.assertTokensLeft(row.ownerId);
      slot = await this.deps.quotas.takeTurnSlot(row.ownerId);
    }
    const admin = level === "admin";
    const audit = rule.audit ?? (admin ? () => ({ action: "admin.access", threadId, detail: { method } }) : undefined);
    const done = this.after(conn, audit, p, admin, row, (r) => {
      if (rule.forks) this.grantNew(conn, r);
      if (slot) this.holdUntilTurnEnds(threadId, slot);
    });
    return { ...done, failed: () => slot?.release() };
  }

  /** Audits the action (and runs `then`) once the handler succeeded, before the response goes out. */
  private after(
    conn: Connection,
    audit: ((p: never, r: never, thread?: ThreadFacts) => AuditFacts | null) | undefined,
    p: Record<string, unknown>,
    admin: boolean,
    thread: ThreadFacts | undefined,
    then?: (result: unknown) => void,
  ): AdmittedRequest {
    if (!audit && !then) return {};
    return {
      succeeded: async (result) => {
        then?.(result);
        const facts = audit?.(p as never, result as never, thread);
        // Not awaited: the response does not wait for its row (audit-log.ts).
        if (facts) void this.deps.audit.record(conn.principal, this.source(conn), { ...facts, admin });
      },
    };
  }

  /** A turn the request started keeps its slot until it ends; no new turn (a retry, a command joining a turn): given back. */
  private holdUntilTurnEnds(threadId: string, slot: TurnSlot): void {
    const turn = this.deps.activeTurn(threadId);
    if (!turn || this.slotted.has(turn.id)) return slot.release();
    this.slotted.add(turn.id);
    void turn.ended.finally(() => {
      this.slotted.delete(turn.id);
      slot.release();
    });
  }

  private grant(conn: Connection, threadId: string, level: ThreadLevel): void {
    let map = this.levels.get(conn);
    if (!map) this.levels.set(conn, (map = new Map()));
    map.set(threadId, level);
  }

  /** The caller owns a thread its request made (thread/start, thread/fork). */
  private grantNew(conn: Connection, result: unknown): void {
    const id = (result as { thread?: { id?: unknown } } | null)?.thread?.id;
    if (typeof id === "string") this.grant(conn, id, "owner");
  }

  /** The level this connection holds on a thread (for handlers that show it), if it touched it. */
  levelOn(conn: Connection, threadId: string): ThreadLevel | null {
    return this.levels.get(conn)?.get(threadId) ?? null;
  }

  /** Takes a connection's access to a thread back (an unshare): it gets no more questions for it. */
  revoke(conn: Connection, threadId: string): void {
    this.levels.get(conn)?.delete(threadId);
  }

  /** The threads a connection holds through a share (read or write), to check again. */
  shared(conn: Connection): string[] {
    return [...(this.levels.get(conn) ?? [])].filter(([, level]) => level === "read" || level === "write").map(([id]) => id);
  }

  /** A share of a thread changed (elsewhere): the connection's level follows it. */
  regrant(conn: Connection, threadId: string, level: ThreadLevel): void {
    this.grant(conn, threadId, level);
  }

  acceptsServerRequest(_method: string, params: object, conn: Connection): boolean {
    const threadId = (params as { threadId?: unknown }).threadId;
    if (typeof threadId !== "string") return true;
    const level = this.levels.get(conn)?.get(threadId);
    return level === "owner" || level === "write";
  }

  serverRequestAnswered(method: string, params: object, reply: ClientReply, conn: Connection): void {
    if (reply.result === undefined) return;
    void this.deps.audit.answered(conn.principal, this.source(conn), method, params, reply.result);
  }

  /**
   * The principal a thread's owner is now (a revoked or unknown user: confined to nothing). From
   * the database when this process has not heard of the user yet (added a moment ago elsewhere).
   */
  async ownerOf(ownerId: string): Promise<Principal> {
    if (ownerId === LOCAL_USER_ID) return localPrincipal("local");
    const user = this.deps.directory.active(ownerId) ?? (await this.deps.users.byId(ownerId));
    if (user && user.revokedAtMs === null) return userPrincipal(user, "token");
    return { id: ownerId, name: this.deps.directory.nameOf(ownerId) ?? ownerId, admin: false, roots: [], dangerFullAccess: false, signIn: "token" };
  }

  base(who: Principal): string {
    return workspaceBase(who, this.deps.defaultCwd);
  }

  source(conn: Connection): AuditSource {
    return { connection: `${this.deps.processLabel()}/${conn.id}`, remote: conn.remote, client: conn.clientName };
  }
}

export type { WorkspaceUse };
