/**
 * Item persistence for a running turn: every item is written when it starts and when it completes,
 * in the same transaction as the notification that announces it (record before publish).
 *
 * A completion that fails to commit is retried a few times before the error propagates: the item
 * may describe a side effect that already happened (a command ran), and the next step must not be
 * "tell the model it failed". If it still fails, the caller ends the turn (DESIGN.md §4).
 */
import { inIssueOrder, type Transaction } from "../store/transaction.js";
import type { ThreadItem } from "../protocol/items.js";
import type { ItemRecord } from "../store/records.js";
import { currentCall, type ActiveTurn } from "./active-turn.js";
import type { TurnDeps } from "./turn-deps.js";
import type { LoadedThread } from "./loaded-thread.js";
import type { ThreadEvent } from "./thread-types.js";
import { itemRef } from "../store/event-refs.js";

/** Attempts at recording an item's completion before the storage error propagates. */
const COMPLETE_ATTEMPTS = 3;

export class ItemRecorder {
  constructor(private readonly deps: Pick<TurnDeps, "runtime" | "turns" | "log">) {}

  /**
   * Records an item as started, then publishes its item/started. `opts.onError` hears of a
   * failed record before anything queued after it runs (a streamed item's deltas wait behind it).
   */
  async started(thread: LoadedThread, turn: ActiveTurn, item: ThreadItem, opts: { onError?: (err: unknown) => void } = {}): Promise<void> {
    const now = Date.now();
    const ordinal = turn.nextItemOrdinal++;
    turn.noteItem(item, ordinal);
    await this.deps.runtime.commit(
      thread,
      [{ method: "item/started", params: { item, threadId: thread.id, turnId: turn.id, startedAtMs: item.startedAtMs ?? now } }],
      (tx) => this.write(tx, thread, turn, item, ordinal, "inProgress", now),
      { underHeldLease: true, onError: opts.onError },
    );
  }

  async completed(thread: LoadedThread, turn: ActiveTurn, items: ThreadItem[]): Promise<void> {
    const now = Date.now();
    try {
      // Retried with the same numbers in the thread's slot (EventLog.record, event-log.ts): an attempt whose
      // commit went through unacknowledged is not stored twice, and nothing overtakes it.
      await this.deps.runtime.commit(
        thread,
        items.map((item) => completedEvent(thread, turn, item, item.completedAtMs ?? now)),
        (tx) => inIssueOrder(items.map((item) => this.deps.turns.completeItem(tx, item.id, item, "status" in item ? String(item.status) : "completed", item.completedAtMs ?? now))),
        { underHeldLease: true, attempts: COMPLETE_ATTEMPTS },
      );
    } catch (err) {
      // Kept so the end of the turn can try once more (the item is "recorded as well as possible").
      for (const item of items) turn.unrecorded.set(item.id, item);
      throw err;
    }
    for (const item of items) {
      turn.unrecorded.delete(item.id);
      turn.noteItem(item);
    }
  }

  /** Inserts an item row (already complete when `status` is not inProgress) in the caller's transaction. */
  insert(tx: Transaction, thread: LoadedThread, turn: ActiveTurn, item: ThreadItem, status: string, now: number): Promise<void> {
    const ordinal = turn.nextItemOrdinal++;
    turn.noteItem(item, ordinal);
    return this.write(tx, thread, turn, item, ordinal, status, now);
  }

  write(tx: Transaction, thread: LoadedThread, turn: ActiveTurn, item: ThreadItem, ordinal: number, status: string, now: number): Promise<void> {
    const callId = currentCall.getStore() ?? null;
    const record: ItemRecord = {
      id: item.id,
      threadId: thread.id,
      turnId: turn.id,
      ordinal,
      type: item.type,
      status,
      payload: item,
      startedAtMs: item.startedAtMs ?? now,
      // An item recorded already complete (the turn's user message) must say so, or start-up
      // recovery would take it for unfinished and "close" it again with a new item/completed.
      completedAtMs: status === "inProgress" ? null : (item.completedAtMs ?? now),
    };
    // From now on a missing result for this call means "outcome unknown", not "not executed".
    if (callId !== null) thread.startedCalls.add(callId);
    return this.deps.turns.insertItem(tx, { ...record, callId });
  }
}

/**
 * item/completed for an item whose row is completed with this very payload in the same
 * transaction: stored as a reference to the row (the text is stored once, event-refs.ts).
 */
export function completedEvent(thread: LoadedThread, turn: ActiveTurn, item: ThreadItem, completedAtMs: number): ThreadEvent {
  const params = { item, threadId: thread.id, turnId: turn.id, completedAtMs };
  return { method: "item/completed", params, stored: { params: { ...params, item: itemRef(item) }, itemIds: [item.id] } };
}
