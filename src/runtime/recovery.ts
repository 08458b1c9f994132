/**
 * Start-up recovery (DESIGN.md §4): a turn a dead process left `inProgress` is closed as
 * `interrupted`, its unfinished items as failed with the reason "server restarted" — never re-run.
 * The closing notifications are stored in the event log, so a client that resumes with `afterSeq`
 * learns how the turn ended. The exception is a turn that was waiting on an approval: nothing ran
 * yet, so it is restored as waiting (TurnRunner.restore) and asks again.
 *
 * With several processes on one database this runs per thread, by the sweeper (sweeper.ts), only
 * for threads whose owner's lease expired — never for a turn a live process is running.
 */
import type { JSONValue, TransactionSql } from "postgres";
import { uuidv7 } from "../ids.js";
import type { ThreadItem } from "../protocol/items.js";
import type { ItemRecord, TurnRecord } from "../store/records.js";
import type { ThreadStore } from "../store/thread-store.js";
import type { RuntimeLogger } from "./threads.js";
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
 * Closes (or marks for restore) every in-progress turn of one thread, inside the caller's
 * transaction, which holds the thread row locked. Event seqs continue above `seqReserved`; the new
 * reservation is written back. Returns the restorable turn (at most one: one turn per thread).
 */
export async function recoverThread(
  store: ThreadStore,
  tx: TransactionSql,
  threadId: string,
  seqReserved: number,
  log: RuntimeLogger,
): Promise<{ closed: number; restorable: RestorableTurn | null; lastSeq: number }> {
  const stale = await tx<TurnRecord[]>`select * from turns where thread_id = ${threadId} and status = 'inProgress' order by ordinal`;
  const now = Date.now();
  const events: Array<{ method: string; params: Record<string, unknown> }> = [];
  let restorable: RestorableTurn | null = null;
  let closed = 0;
  for (const turn of stale) {
    const unfinished = await tx<(ItemRecord & { callId: string | null; pendingRequest: unknown })[]>`
      select * from items where turn_id = ${turn.id} and completed_at_ms is null order by ordinal`;
    // The wait on an approval survives the restart: nothing ran yet, so asking again is safe.
    const waiting: (ItemRecord & { callId: string | null }) | undefined = restorable ? undefined : [...unfinished].reverse().find((i) => i.pendingRequest !== null && i.callId !== null);
    const restored: RestorableTurn | null = waiting ? { threadId, turnId: turn.id, itemId: waiting.id, callId: waiting.callId! } : null;
    const items = unfinished.filter((i) => i !== waiting);
    const payloads = items.map((i) => {
      const status = FAILED_STATUS[i.payload.type];
      const payload = { ...i.payload, ...(status ? { status } : {}), completedAtMs: now } as ThreadItem;
      if (payload.type === "commandExecution") payload.aggregatedOutput = `${payload.aggregatedOutput ?? ""}\n[${RESTART_REASON}]`.trimStart();
      return payload;
    });
    for (const payload of payloads) {
      await tx`update items set payload = ${tx.json(payload as unknown as JSONValue)}, status = ${FAILED_STATUS[payload.type] ?? "completed"}, completed_at_ms = ${now} where id = ${payload.id}`;
      events.push({ method: "item/completed", params: { item: payload, threadId, turnId: turn.id, completedAtMs: now } });
    }
    if (restored) {
      restorable = restored;
      log.warn({ threadId, turnId: turn.id }, "restoring a turn that was waiting on an approval when its process stopped");
      continue;
    }
    // A review turn closes its review mode, as review/start's own end does: clients (the TUI) show
    // the review as running until exitedReviewMode arrives.
    const [review] = await tx<{ entered: boolean | null; exited: boolean | null; next: number }[]>`
      select bool_or(type = 'enteredReviewMode') as entered, bool_or(type = 'exitedReviewMode') as exited, coalesce(max(ordinal) + 1, 0)::int as next
      from items where turn_id = ${turn.id}`;
    if (review?.entered && !review.exited) {
      const exited: ThreadItem = { type: "exitedReviewMode", id: uuidv7(now), review: `The review was interrupted: ${RESTART_REASON}.`, startedAtMs: now, completedAtMs: now };
      await tx`insert into items (id, thread_id, turn_id, ordinal, type, status, payload, started_at_ms, completed_at_ms)
        values (${exited.id}, ${threadId}, ${turn.id}, ${review.next}, ${exited.type}, 'completed', ${tx.json(exited as unknown as JSONValue)}, ${now}, ${now})`;
      events.push(
        { method: "item/started", params: { item: { ...exited, completedAtMs: null }, threadId, turnId: turn.id, startedAtMs: now } },
        { method: "item/completed", params: { item: exited, threadId, turnId: turn.id, completedAtMs: now } },
      );
    }
    const error = { message: RESTART_REASON, codexErrorInfo: "other", additionalDetails: null, misalignment: null };
    await tx`update turns set status = 'interrupted', stop_reason = 'interrupted', error = ${tx.json(error)}, completed_at_ms = ${now} where id = ${turn.id}`;
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
    await tx`update threads set seq_reserved = ${seqReserved + events.length}, system_error = false where id = ${threadId}`;
    await store.insertEvents(
      tx,
      threadId,
      events.map((e, i) => ({ seq: first + i, method: e.method, params: { ...e.params, seq: first + i }, emittedAtMs: now })),
    );
  }
  return { closed, restorable, lastSeq: seqReserved + events.length };
}
