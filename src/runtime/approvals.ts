/**
 * One approval round trip for a tool: the thread shows `waitingOnApproval` while the request is
 * out (recorded with the pending request, so a restarted process restores the wait: recovery.ts);
 * the first valid answer wins (broker); anything unusable counts as `decline`, an interrupt as
 * `cancel`. A command request offers, in this order, `accept`, `acceptForSession`, the proposed
 * rule (`acceptWithExecpolicyAmendment`, when the tool proposes one), `decline` and `cancel`.
 */
import type { Transaction } from "../store/transaction.js";
import { withDeadline } from "../abortable.js";
import { z } from "zod";
import { ApprovalDecision, CommandExecutionApprovalDecision } from "../protocol/tools.js";
import { samePattern } from "../tools/execpolicy.js";
import type { ApprovalAnswer, ApprovalRequest } from "../tools/context.js";
import type { ActiveTurn } from "./active-turn.js";
import type { TurnDeps } from "./turn-deps.js";
import type { LoadedThread } from "./loaded-thread.js";

const CommandReply = z.object({ decision: CommandExecutionApprovalDecision });
const FileChangeReply = z.object({ decision: ApprovalDecision });

/** The decisions a request offers (Codex's order: accept first, the rule before the refusals). */
function availableDecisions(request: ApprovalRequest): z.infer<typeof CommandExecutionApprovalDecision>[] | undefined {
  if (request.kind !== "command") return undefined;
  const rule = request.params.proposedExecpolicyAmendment;
  return ["accept", "acceptForSession", ...(rule ? [{ acceptWithExecpolicyAmendment: { execpolicy_amendment: rule } }] : []), "decline", "cancel"];
}

/**
 * A reply's decision as the tool sees it, or null when it is unusable. Saving a rule other than
 * the one proposed is unusable: a client cannot make the server remember a prefix nobody showed.
 */
function answerOf(request: ApprovalRequest, result: unknown): ApprovalAnswer | null {
  if (request.kind !== "command") {
    const parsed = FileChangeReply.safeParse(result);
    return parsed.success ? parsed.data.decision : null;
  }
  const parsed = CommandReply.safeParse(result);
  if (!parsed.success) return null;
  const decision = parsed.data.decision;
  if (typeof decision === "string") return decision;
  const proposed = request.params.proposedExecpolicyAmendment;
  return proposed && samePattern(proposed, decision.acceptWithExecpolicyAmendment.execpolicy_amendment) ? "acceptWithExecpolicyAmendment" : null;
}

export async function requestApproval(
  deps: Pick<TurnDeps, "runtime" | "turns" | "settings" | "log" | "observer">,
  thread: LoadedThread,
  turn: ActiveTurn,
  request: ApprovalRequest,
  signal: AbortSignal,
): Promise<ApprovalAnswer> {
  const { runtime, turns, log, observer } = deps;
  const method = request.kind === "command" ? "item/commandExecution/requestApproval" : "item/fileChange/requestApproval";
  const params = {
    threadId: thread.id,
    turnId: turn.id,
    ...request.params,
    ...(request.kind === "command" ? { availableDecisions: availableDecisions(request) } : {}),
  };
  turn.pendingApprovals++;
  observer.approvalsPending(1);
  // Recorded with the status change: a process restarted now restores the wait (recovery.ts).
  const markPending = (tx: Transaction) => turns.setPendingRequest(tx, request.params.itemId, { method, params });
  if (turn.pendingApprovals === 1) await runtime.setStatus(thread, { type: "active", activeFlags: ["waitingOnApproval"] }, markPending);
  else await runtime.commit(thread, [], markPending);
  const timeout = deps.settings.approvalTimeoutMs;
  const deadline = timeout ? withDeadline(signal, timeout) : null;
  let decision: ApprovalAnswer;
  try {
    const reply = await thread.ask(method, params, deadline?.signal ?? signal, (r) => answerOf(request, r.result) !== null);
    if (reply === null) decision = signal.aborted ? "cancel" : "decline";
    else if (reply.error) {
      log.warn({ threadId: thread.id, itemId: request.params.itemId, error: reply.error.message }, "approval answered with an error; treating it as decline");
      decision = "decline";
    } else {
      const answer = answerOf(request, reply.result);
      if (answer === null) log.warn({ threadId: thread.id, itemId: request.params.itemId }, "approval answered with an unknown decision (or a rule that was not proposed); treating it as decline");
      decision = answer ?? "decline";
    }
  } finally {
    deadline?.clear();
    turn.pendingApprovals--;
    observer.approvalsPending(-1);
  }
  const clearPending = (tx: Transaction) => turns.setPendingRequest(tx, request.params.itemId, null);
  if (turn.pendingApprovals === 0 && thread.activeTurn === turn && !signal.aborted) {
    await runtime.setStatus(thread, { type: "active", activeFlags: [] }, clearPending);
  } else await runtime.commit(thread, [], clearPending);
  return decision;
}
