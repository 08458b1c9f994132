/**
 * The audit trail's writer (docs/teams.md, "Audit trail"): one row per action — thread created,
 * forked, archived, shared; turn started; command run (command/exec, thread/shellCommand, with
 * its sandbox); approval decided (who, what, when, from which connection); rule added or removed;
 * configuration reloaded; an admin's access to another user's thread — in the database, so every
 * process of a cluster writes to the same trail and it outlives restarts.
 *
 * A row is written once the action succeeded, beside its response (a response never waits for
 * it: a turn's first model call must not overtake the answer that names the turn). Rows are side
 * writes (store/side-writes.ts): they commit with the next recording transaction, a turn's audit
 * row with the turn's next step, or on their own within 100 ms. A process's rows keep the order
 * of its actions, and audit/list waits for the ones still being written (`settled`): whoever got
 * an answer reads its row. A failure to write a row is logged and does not undo the action
 * (which has happened).
 */
import type { AuditStore, NewAuditEntry } from "../store/audit-store.js";
import type { SideWrites } from "../store/side-writes.js";
import type { Principal } from "./principal.js";

/** Where an action came from: this process and the connection's number, address and client. */
export interface AuditSource {
  connection: string | null;
  remote: string | null;
  client: string | null;
}

const APPROVALS = new Set(["item/commandExecution/requestApproval", "item/fileChange/requestApproval", "mcpServer/elicitation/request"]);

/** What an approval answer decided, as stored: the decision's name and a saved rule's prefix. */
function decisionOf(result: unknown): { decision: string; rule: string[] | null } {
  const r = (result ?? {}) as { decision?: unknown; action?: unknown };
  const d = r.decision ?? r.action;
  if (typeof d === "string") return { decision: d, rule: null };
  const amendment = (d as { acceptWithExecpolicyAmendment?: { execpolicy_amendment?: unknown } } | undefined)?.acceptWithExecpolicyAmendment?.execpolicy_amendment;
  if (Array.isArray(amendment)) return { decision: "acceptWithExecpolicyAmendment", rule: amendment.map(String) };
  return { decision: "unknown", rule: null };
}

export class AuditLog {
  constructor(
    private readonly store: AuditStore,
    private readonly writes: SideWrites,
    private readonly log: { error(obj: object, msg: string): void },
  ) {}

  async record(who: Principal, from: AuditSource, e: { action: string; threadId?: string | null; detail?: Record<string, unknown>; admin?: boolean }): Promise<void> {
    const row: NewAuditEntry = {
      userId: who.id,
      userName: who.name,
      admin: e.admin ?? false,
      action: e.action,
      threadId: e.threadId ?? null,
      detail: e.detail ?? {},
      ...from,
    };
    await this.write(row);
  }

  /** Rows of the command line (`app-server users …`): no user id, the OS user's name. */
  async recordCli(osUser: string, action: string, detail: Record<string, unknown>): Promise<void> {
    await this.write({ userId: null, userName: osUser, admin: false, action, threadId: null, detail, connection: null, remote: null, client: "app-server cli" });
  }

  /** A client answered a server request: the decision of an approval or elicitation (and a rule it saved). */
  async answered(who: Principal, from: AuditSource, method: string, params: object, result: unknown): Promise<void> {
    if (!APPROVALS.has(method)) return;
    const p = params as { threadId?: string; turnId?: string | null; itemId?: string; command?: string | null; cwd?: string | null; serverName?: string };
    const { decision, rule } = decisionOf(result);
    const what = { method, turnId: p.turnId ?? null, itemId: p.itemId ?? null, ...(p.command ? { command: p.command, cwd: p.cwd ?? null } : {}), ...(p.serverName ? { server: p.serverName } : {}) };
    await this.record(who, from, { action: "approval.decided", threadId: p.threadId ?? null, detail: { ...what, decision } });
    if (rule) await this.record(who, from, { action: "execpolicy.rule.added", threadId: p.threadId ?? null, detail: { pattern: rule } });
  }

  /** Resolves once every row queued so far is written (or failed). */
  settled(): Promise<void> {
    return this.writes.flush();
  }

  private write(row: NewAuditEntry): Promise<void> {
    return this.writes.add((q) => this.store.add(row, q)).catch((err: unknown) => this.log.error({ err, action: row.action, user: row.userName }, "could not write an audit row"));
  }
}
