/**
 * One approval round trip for a tool: the thread shows `waitingOnApproval` while the request is
 * out (recorded with the pending request, so a restarted process restores the wait: recovery.ts);
 * the first valid answer wins (broker); anything unusable counts as `decline`, an interrupt as
 * `cancel`.
 */
import type { TransactionSql } from "postgres";
import { z } from "zod";
import { CommandExecutionApprovalDecision, type ApprovalDecision } from "../protocol/tools.js";
import type { ApprovalRequest } from "../tools/context.js";
import type { ActiveTurn } from "./active-turn.js";
import type { TurnDeps } from "./turn-deps.js";
import type { LoadedThread } from "./threads.js";

const ApprovalReply = z.object({ decision: CommandExecutionApprovalDecision });

export async function requestApproval(
  deps: Pick<TurnDeps, "runtime" | "turns" | "settings" | "log" | "observer">,
  thread: LoadedThread,
  turn: ActiveTurn,
  request: ApprovalRequest,
  signal: AbortSignal,
): Promise<ApprovalDecision> {
  const { runtime, turns, log, observer } = deps;
  const method = request.kind === "command" ? "item/commandExecution/requestApproval" : "item/fileChange/requestApproval";
  const params = {
    threadId: thread.id,
    turnId: turn.id,
    ...request.params,
    ...(request.kind === "command" ? { availableDecisions: ["accept", "acceptForSession", "decline", "cancel"] } : {}),
  };
  turn.pendingApprovals++;
  observer.approvalsPending(1);
  // Recorded with the status change: a process restarted now restores the wait (recovery.ts).
  const markPending = (tx: TransactionSql) => turns.setPendingRequest(tx, request.params.itemId, { method, params });
  if (turn.pendingApprovals === 1) await runtime.setStatus(thread, { type: "active", activeFlags: ["waitingOnApproval"] }, markPending);
  else await runtime.commit(thread, [], markPending);
  const timeout = deps.settings.approvalTimeoutMs;
  const waitSignal = timeout ? AbortSignal.any([signal, AbortSignal.timeout(timeout)]) : signal;
  let decision: ApprovalDecision;
  try {
    const reply = await thread.broker.ask(method, params, thread.subscribers, waitSignal, (r) => ApprovalReply.safeParse(r.result).success);
    if (reply === null) decision = signal.aborted ? "cancel" : "decline";
    else if (reply.error) {
      log.warn({ threadId: thread.id, itemId: request.params.itemId, error: reply.error.message }, "approval answered with an error; treating it as decline");
      decision = "decline";
    } else {
      const parsed = ApprovalReply.safeParse(reply.result);
      if (!parsed.success) log.warn({ threadId: thread.id, itemId: request.params.itemId }, "approval answered with an unknown decision; treating it as decline");
      decision = parsed.success ? parsed.data.decision : "decline";
    }
  } finally {
    turn.pendingApprovals--;
    observer.approvalsPending(-1);
  }
  const clearPending = (tx: TransactionSql) => turns.setPendingRequest(tx, request.params.itemId, null);
  if (turn.pendingApprovals === 0 && thread.activeTurn === turn && !signal.aborted) {
    await runtime.setStatus(thread, { type: "active", activeFlags: [] }, clearPending);
  } else await runtime.commit(thread, [], clearPending);
  return decision;
}
