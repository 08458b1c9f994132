/**
 * The end of a turn: exactly one terminal event (DESIGN.md §3.9), recorded with the turn's final
 * state. How each stop reads to a Codex client, whose TurnStatus has only completed / interrupted /
 * failed and whose clients read `completed` as "the task is done":
 *
 *   finalAnswer            completed
 *   interrupted            interrupted
 *   maxTokens, maxTurns    failed, with a TurnError saying the answer is incomplete, and an `error`
 *                          notification — the work stopped short; the thread stays idle (not
 *                          systemError: nothing is broken), and `stopReason` (our extension) says which
 *   refused                failed likewise (idle, not systemError), with the provider's refusal
 *                          as the error: who stopped the answer and why
 *   error                  failed, thread systemError
 */
import type { LoopResult } from "../agent/loop.js";
import { ToolHostError } from "../agent/tools.js";
import type { ThreadStatus, TurnError } from "../protocol/common.js";
import type { TurnStopReason } from "../protocol/thread.js";
import type { TurnRecord } from "../store/records.js";
import { TurnAlreadyEndedError } from "../store/turn-store.js";
import type { ActiveTurn } from "./active-turn.js";
import type { ItemRecorder } from "./item-recorder.js";
import { LeaseLostError } from "./leases.js";
import type { TurnDeps } from "./turn-deps.js";
import { firstFailure, turnError, turnFailed } from "./turn-errors.js";
import type { TurnStream } from "./turn-stream.js";
import { completedTurnView, statusFor } from "./turn-view.js";
import type { LoadedThread } from "./loaded-thread.js";
import { inIssueOrder } from "../store/transaction.js";
import type { ThreadEvent } from "./thread-types.js";
import type { ThreadItem } from "../protocol/items.js";
import { capText, itemRef } from "../store/event-refs.js";

/** turn/completed repeats an agent message's text up to this many UTF-16 units (64 Ki). */
export const SUMMARY_TEXT_CAP = 64 * 1024;

/** Stops that leave the work short without anything being broken: the thread stays idle. */
const TRUNCATED: ReadonlySet<TurnStopReason> = new Set(["maxTokens", "maxTurns", "refused"]);

function errorOf(turn: ActiveTurn, stopReason: TurnStopReason, result: LoopResult): TurnError | null {
  if (stopReason === "refused" && result.error) return { ...turnError(result.error), additionalDetails: "stopReason: refused" };
  if (stopReason === "error" && result.error) {
    const retryable = "retryable" in result.error && Boolean((result.error as { retryable?: boolean }).retryable);
    const error = turnError(result.error, { exhaustedRetries: turn.announcedFailure && retryable });
    // A store failure after a tool ran: say so plainly, the tool itself did not fail.
    if (result.error instanceof ToolHostError) return { ...error, additionalDetails: "The tool's side effects may have happened; its result could not be recorded." };
    return error;
  }
  if (TRUNCATED.has(stopReason) && result.note) return { message: result.note, codexErrorInfo: "other", additionalDetails: `stopReason: ${stopReason}`, misalignment: null };
  if (result.note) return { message: result.note, codexErrorInfo: null, additionalDetails: null, misalignment: null };
  return null;
}

export async function finishTurn(deps: TurnDeps, recorder: ItemRecorder, stream: TurnStream, thread: LoadedThread, turn: ActiveTurn, result: LoopResult): Promise<void> {
  const { runtime, log, observer, turns } = deps;
  const now = Date.now();
  turn.steerable = false;
  await closeOpenWork(deps, recorder, stream, thread, turn);
  // The last model message's record, when held for this transaction (turn-stream.ts).
  const held = turn.deferred;
  turn.deferred = null;
  // Records still committing (a streamed item's start): the summary below reads their rows.
  await thread.committed();
  // A streamed item's item/started whose record failed (turn-stream.ts) fails the turn, however
  // far the stream got: nothing of that item was published, and the turn says the store failed.
  if (turn.recordError) result = firstFailure(result, turn.recordError);
  const stopReason: TurnStopReason = turn.abort.signal.aborted && result.stopReason !== "error" ? "interrupted" : result.stopReason;
  const end = await endOf(deps, thread, turn, stopReason, result, held?.items ?? [], now);
  thread.activeTurn = null;
  const epoch = thread.lease?.epoch ?? null;
  const recordEnd = (e: TurnEnd, withHeld: boolean) => {
    thread.status = e.threadStatus;
    thread.record = { ...thread.record, systemError: e.systemError, updatedAtMs: now };
    const row = { systemError: e.systemError, updatedAtMs: now };
    return runtime.commit(
      thread,
      withHeld && held ? [...held.events, ...e.events] : e.events,
      (tx) =>
        // Pipelined; with the held message, one UPDATE of the thread row carries both changes.
        inIssueOrder(withHeld && held ? [held.write(tx, row), turns.finishTurn(tx, turn.id, e.record)] : [turns.finishTurn(tx, turn.id, e.record), runtime.store.updateThread(tx, thread.id, row)]),
      // A lost lease is not taken again to write this ending: the new owner records its own.
      { underHeldLease: true },
    );
  };
  let told = end;
  try {
    if (end.record.status === "failed") log.warn({ threadId: thread.id, turnId: turn.id, stopReason: end.record.stopReason, error: end.error?.message }, "turn failed");
    await recordEnd(end, true);
  } catch (err) {
    // Another process took the thread over (fencing) or closed the turn: its ending stands, not ours.
    if (err instanceof LeaseLostError) log.warn({ threadId: thread.id, turnId: turn.id }, "turn stopped: its thread's lease was lost");
    else if (err instanceof TurnAlreadyEndedError) {
      log.warn({ threadId: thread.id, turnId: turn.id }, "turn stopped: another process recorded its end");
      thread.entries = null; // what this process holds may differ from the record: reload on next use
      thread.history = null;
    }
    else told = await holdEnd(deps, thread, turn, err, { end, held, result, now, epoch });
  }
  observer.turnEnded(told.record.status);
  runtime.maybeUnload(thread);
}

/**
 * Before the ending is recorded: what the turn left open is closed or recorded as well as it can
 * be (each failure is logged, and the ending is still recorded).
 */
async function closeOpenWork(deps: TurnDeps, recorder: ItemRecorder, stream: TurnStream, thread: LoadedThread, turn: ActiveTurn): Promise<void> {
  const { log } = deps;
  try {
    // Open items of an interrupted attempt keep what arrived (the user stopped it there).
    await stream.closeStreamingItems(thread, turn, false);
  } catch (err) {
    log.error({ err, threadId: thread.id }, "could not close streaming items");
  }
  if (turn.unrecorded.size > 0) {
    // Completed items whose record failed (and failed the turn): one more try, so the record
    // shows the side effect as well as it can.
    try {
      await recorder.completed(thread, turn, [...turn.unrecorded.values()]);
    } catch (err) {
      log.error({ err, threadId: thread.id, items: [...turn.unrecorded.keys()] }, "could not record completed items at the end of the turn");
    }
  }
  // Steering the loop never took (the turn stopped on truncation, an error or an interrupt
  // before its next model call) was already answered with {turnId}: record it as this turn's
  // user input, and it reaches the model with the next turn, instead of vanishing.
  if (turn.steering.length > 0) {
    try {
      await stream.onLoopEvent(thread, turn, { type: "steered", messages: turn.steering.take() });
    } catch (err) {
      log.error({ err, threadId: thread.id }, "could not record steering input");
    }
  }
}

/**
 * The ending could not be recorded (the database is away): it is held, told as waiting, and
 * recorded (then told) once the database is back. Returns the ending as it will be told.
 */
async function holdEnd(
  deps: TurnDeps,
  thread: LoadedThread,
  turn: ActiveTurn,
  err: unknown,
  e: { end: TurnEnd; held: ActiveTurn["deferred"]; result: LoopResult; now: number; epoch: number | null },
): Promise<TurnEnd> {
  const { runtime, log } = deps;
  const { held, result, now, epoch } = e;
  let told = e.end;
  // The record could not be written (the database is away). Clients are told no ending the
  // store does not have (DESIGN.md §7): only that the ending waits for the database. The
  // ending is kept and recorded once it is back, and told then (unrecorded.ts); if another
  // process took the thread over meanwhile, the ending it recorded is the one told.
  log.error({ err, threadId: thread.id, turnId: turn.id }, "could not record the end of a turn");
  // The model's last message was in that transaction: as when its own record failed, the
  // turn fails (its answer is not in the model history), its items are kept with it.
  if (held) {
    for (const item of held.items) turn.unrecorded.set(item.id, item);
    const failed = turnFailed(err, result);
    told = await endOf(deps, thread, turn, "error", failed, held.items, now, false);
  }
  // The stored turn is still in progress: so is the thread, until its ending is recorded.
  thread.status = { type: "active", activeFlags: [] };
  thread.record = { ...thread.record, systemError: false };
  runtime.publishLive(thread, "error", {
    threadId: thread.id,
    turnId: turn.id,
    willRetry: true,
    error: {
      message: "The database is unavailable: this turn has ended, and how is told once the database has recorded it",
      codexErrorInfo: "other",
      additionalDetails: null,
      misalignment: null,
    },
  });
  const items = [...turn.unrecorded.values()];
  const events = runtime.stampHeld(thread, [
    ...items.map((item) => ({ method: "item/completed" as const, params: { item, threadId: thread.id, turnId: turn.id, completedAtMs: item.completedAtMs ?? now } })),
    // Stored whole, as told (no references to item rows: the rows may be what failed).
    ...told.events.map(({ method, params }) => ({ method, params })),
  ]);
  runtime.unrecorded?.add(thread, { record: told.record, systemError: told.systemError, threadStatus: told.threadStatus, items, events, epoch });
  return told;
}

interface TurnEnd {
  record: TurnRecord;
  error: TurnError | null;
  systemError: boolean;
  threadStatus: ThreadStatus;
  events: ThreadEvent[];
}

/**
 * The turn's final record and its terminal events. turn/completed carries the turn's final items
 * (the `summary` view, turn-view.ts): the stored ones, with `pending` (completed in the same
 * transaction) in place of their rows; stored as references to the item rows (event-refs.ts).
 */
async function endOf(
  deps: TurnDeps,
  thread: LoadedThread,
  turn: ActiveTurn,
  stopReason: TurnStopReason,
  result: LoopResult,
  pending: ThreadItem[],
  now: number,
  summaryFromStore = true,
): Promise<TurnEnd> {
  const status = statusFor[stopReason];
  const error = errorOf(turn, stopReason, result);
  const record: TurnRecord = {
    id: turn.id,
    threadId: thread.id,
    ordinal: 0,
    status,
    stopReason,
    error,
    clientUserMessageId: turn.clientUserMessageId,
    startedAtMs: turn.startedAtMs,
    completedAtMs: now,
  };
  const systemError = status === "failed" && !TRUNCATED.has(stopReason);
  const threadStatus: ThreadStatus = systemError ? { type: "systemError" } : { type: "idle" };
  const completedView = await completedTurnView(record, deps.turns, pending, summaryFromStore, turn.knownMessages());
  const events: ThreadEvent[] = [];
  if (status === "failed" && !turn.announcedFailure && error) {
    events.push({ method: "error", params: { error, willRetry: false, threadId: thread.id, turnId: turn.id } });
  }
  events.push({ method: "thread/status/changed", params: { threadId: thread.id, status: threadStatus } });
  // The summary repeats the final answer; a very long one only up to the cap (the full text is in
  // its item/completed and its row; thread/items/list and thread/read give it whole).
  const overCap = (i: ThreadItem) => i.type === "agentMessage" && i.text.length > SUMMARY_TEXT_CAP;
  const liveView = { ...completedView, items: completedView.items.map((i) => (overCap(i) ? { ...i, text: capText((i as { text: string }).text, SUMMARY_TEXT_CAP) } : i)) };
  const params = { threadId: thread.id, turn: liveView };
  // Only items with a row (stored, or written by this transaction) are referred to.
  const referable = completedView.itemsView === "summary" && summaryFromStore;
  events.push(
    referable
      ? {
          method: "turn/completed",
          params,
          stored: {
            params: { ...params, turn: { ...completedView, items: completedView.items.map((i) => itemRef(i, i.type === "agentMessage" ? { phase: i.phase } : {}, overCap(i) ? SUMMARY_TEXT_CAP : undefined)) } },
            itemIds: completedView.items.map((i) => i.id),
          },
        }
      : { method: "turn/completed", params },
  );
  return { record, error, systemError, threadStatus, events };
}
