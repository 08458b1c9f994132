/**
 * Start-up recovery (DESIGN.md §4): a turn a dead process left `inProgress` is closed as
 * `interrupted`, its unfinished items as failed with the reason "server restarted" — never re-run.
 * The closing notifications are stored in the event log, so a client that resumes with `afterSeq`
 * learns how the turn ended. The exception is a turn that was waiting on an approval: nothing ran
 * yet, so it is restored as waiting (TurnRunner.restore) and asks again.
 *
 * It assumes one server process per database (leases for several processes are future work).
 */
import type { JSONValue } from "postgres";
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

export async function recoverInterruptedTurns(store: ThreadStore, log: RuntimeLogger): Promise<RecoveryResult> {
  const sql = store.sql;
  const stale = await sql<TurnRecord[]>`select * from turns where status = 'inProgress' order by thread_id, ordinal`;
  const restorable: RestorableTurn[] = [];
  for (const turn of stale) {
    let restored: RestorableTurn | null = null;
    await store.transaction(async (tx) => {
      const now = Date.now();
      const unfinished = await tx<(ItemRecord & { callId: string | null; pendingRequest: unknown })[]>`
        select * from items where turn_id = ${turn.id} and completed_at_ms is null order by ordinal`;
      // The wait on an approval survives the restart: nothing ran yet, so asking again is safe.
      const waiting = [...unfinished].reverse().find((i) => i.pendingRequest !== null && i.callId !== null);
      restored = waiting ? { threadId: turn.threadId, turnId: turn.id, itemId: waiting.id, callId: waiting.callId! } : null;
      const items = unfinished.filter((i) => i !== waiting);
      const closed = items.map((i) => {
        const status = FAILED_STATUS[i.payload.type];
        const payload = { ...i.payload, ...(status ? { status } : {}), completedAtMs: now } as ThreadItem;
        if (payload.type === "commandExecution") payload.aggregatedOutput = `${payload.aggregatedOutput ?? ""}\n[${RESTART_REASON}]`.trimStart();
        return payload;
      });
      for (const payload of closed) {
        await tx`update items set payload = ${tx.json(payload as unknown as JSONValue)}, status = ${FAILED_STATUS[payload.type] ?? "completed"}, completed_at_ms = ${now} where id = ${payload.id}`;
      }
      const events: Array<{ method: string; params: Record<string, unknown> }> = closed.map((item) => ({
        method: "item/completed",
        params: { item, threadId: turn.threadId, turnId: turn.id, completedAtMs: now },
      }));
      if (!restored) {
        const error = { message: RESTART_REASON, codexErrorInfo: "other", additionalDetails: null, misalignment: null };
        await tx`update turns set status = 'interrupted', stop_reason = 'interrupted', error = ${tx.json(error)}, completed_at_ms = ${now} where id = ${turn.id}`;
        const finished = { ...turn, status: "interrupted" as const, stopReason: "interrupted" as const, error, completedAtMs: now };
        events.push(
          { method: "thread/status/changed", params: { threadId: turn.threadId, status: { type: "idle" } } },
          { method: "turn/completed", params: { threadId: turn.threadId, turn: turnView(finished, null) } },
        );
      }
      if (events.length === 0) return;
      const [row] = await tx<{ seqReserved: number }[]>`
        update threads set seq_reserved = seq_reserved + ${events.length}, system_error = false where id = ${turn.threadId} returning seq_reserved`;
      const first = row!.seqReserved - events.length + 1;
      await store.insertEvents(
        tx,
        turn.threadId,
        events.map((e, i) => ({ seq: first + i, method: e.method, params: { ...e.params, seq: first + i }, emittedAtMs: now })),
      );
    });
    if (restored) {
      restorable.push(restored);
      log.warn({ threadId: turn.threadId, turnId: turn.id }, "restoring a turn that was waiting on an approval when the previous process stopped");
    } else log.warn({ threadId: turn.threadId, turnId: turn.id }, "closed a turn left running by a previous process");
  }
  return { closed: stale.length - restorable.length, restorable };
}
