/**
 * Start-up recovery (DESIGN.md §4): a turn a dead process left `inProgress` is closed as
 * `interrupted`, its unfinished items as failed with the reason "server restarted" — never re-run.
 * The closing notifications are stored in the event log, so a client that resumes with `afterSeq`
 * learns how the turn ended. The exception is a turn that was waiting on an approval: nothing ran
 * yet, so it is restored as waiting (TurnRunner.restore, agent-turn.ts) and asks again.
 *
 * With several processes on one database this runs per thread, by the sweeper (sweeper.ts), only
 * for threads whose owner's lease expired — never for a turn a live process is running.
 */
import { uuidv7 } from "../ids.js";
import type { TurnError } from "../protocol/common.js";
import type { ThreadItem } from "../protocol/items.js";
import type { ClaimedThread, UnfinishedItem } from "../store/recovery-store.js";
import type { RuntimeLogger } from "./thread-types.js";
import { turnView } from "./turn-view.js";

export const RESTART_REASON = "server restarted";

/** Item types whose payload has a status field, and the status an unfinished one gets. */
const FAILED_STATUS: Partial<Record<ThreadItem["type"], string>> = {
  commandExecution: "failed",
  fileChange: "failed",
  mcpToolCall: "failed",
  dynamicToolCall: "failed",
};

/** A turn that was waiting on an approval when its process died: restored, not closed. */
export interface RestorableTurn {
  threadId: string;
  turnId: string;
  /** The item whose approval was pending, and the model's call id it belongs to. */
  itemId: string;
  callId: string;
}

export interface RecoveryResult {
  closed: number;
  restorable: RestorableTurn[];
}

/**
 * Closes (or marks for restore) every in-progress turn of a thread this process claimed, inside the
 * claiming transaction, which holds the thread row locked. Event seqs continue above the claimed
 * reservation; the new reservation is written back. Returns the restorable turn (at most one: one
 * turn per thread).
 */
export async function recoverThread(thread: ClaimedThread, log: RuntimeLogger): Promise<{ closed: number; restorable: RestorableTurn | null; lastSeq: number }> {
  const { threadId, seqReserved } = thread;
  const stale = await thread.turnsInProgress();
  const now = Date.now();
  const events: Array<{ method: string; params: Record<string, unknown> }> = [];
  let restorable: RestorableTurn | null = null;
  let closed = 0;
  for (const turn of stale) {
    const unfinished = await thread.unfinishedItems(turn.id);
    // The wait on an approval survives the restart: nothing ran yet, so asking again is safe.
    const waiting: UnfinishedItem | undefined = restorable ? undefined : [...unfinished].reverse().find((i) => i.pendingRequest !== null && i.callId !== null);
    const restored: RestorableTurn | null = waiting ? { threadId, turnId: turn.id, itemId: waiting.id, callId: waiting.callId! } : null;
    const items = unfinished.filter((i) => i !== waiting);
    const payloads = items.map((i) => {
      const status = FAILED_STATUS[i.payload.type];
      const payload = { ...i.payload, ...(status ? { status } : {}), completedAtMs: now } as ThreadItem;
      if (payload.type === "commandExecution") payload.aggregatedOutput = `${payload.aggregatedOutput ?? ""}\n[${RESTART_REASON}]`.trimStart();
      return payload;
    });
    for (const payload of payloads) {
      await thread.completeItem(payload, FAILED_STATUS[payload.type] ?? "completed", now);
      events.push({ method: "item/completed", params: { item: payload, threadId, turnId: turn.id, completedAtMs: now } });
    }
    if (restored) {
      restorable = restored;
      log.warn({ threadId, turnId: turn.id }, "restoring a turn that was waiting on an approval when its process stopped");
      continue;
    }
    // A review turn closes its review mode, as review/start's own end does: clients (the TUI) show
    // the review as running until exitedReviewMode arrives.
    const review = await thread.reviewMarks(turn.id);
    if (review?.entered && !review.exited) {
      const exited: ThreadItem = { type: "exitedReviewMode", id: uuidv7(now), review: `The review was interrupted: ${RESTART_REASON}.`, startedAtMs: now, completedAtMs: now };
      await thread.insertCompletedItem(turn.id, review.next, exited, now);
      events.push(
        { method: "item/started", params: { item: { ...exited, completedAtMs: null }, threadId, turnId: turn.id, startedAtMs: now } },
        { method: "item/completed", params: { item: exited, threadId, turnId: turn.id, completedAtMs: now } },
      );
    }
    const error: TurnError = { message: RESTART_REASON, codexErrorInfo: "other", additionalDetails: null, misalignment: null };
    await thread.interruptTurn(turn.id, error, now);
    const finished = { ...turn, status: "interrupted" as const, stopReason: "interrupted" as const, error, completedAtMs: now };
    events.push(
      { method: "thread/status/changed", params: { threadId, status: { type: "idle" } } },
      { method: "turn/completed", params: { threadId, turn: turnView(finished, null) } },
    );
    closed++;
    log.warn({ threadId, turnId: turn.id }, "closed a turn left running by a process that stopped");
  }
  const first = seqReserved + 1;
  if (events.length > 0) {
    await thread.appendEvents(
      seqReserved + events.length,
      events.map((e, i) => ({ seq: first + i, method: e.method, params: { ...e.params, seq: first + i }, emittedAtMs: now })),
    );
  }
  return { closed, restorable, lastSeq: seqReserved + events.length };
}
