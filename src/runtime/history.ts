/**
 * A thread's model history is an append-only log of entries: messages, and markers for rollback
 * and compaction. The model context is what replaying the log gives, so nothing stored is ever
 * rewritten (a rollback is "a stored marker, not a delete") and a fork that reads its parent's
 * log up to the fork point sees exactly what the parent saw then.
 */
import type { Message } from "../agent/messages.js";
import type { HistoryEntry } from "../store/history-entry.js";

// agent-turn.ts and turn-lifecycle.ts import it from here.
export type { HistoryEntry };

type Tagged = { turnOrdinal: number | null; message: Message };

function replay(entries: readonly HistoryEntry[], applyCompaction: boolean): Tagged[] {
  let out: Tagged[] = [];
  for (const e of entries) {
    if (e.kind === "message") out.push({ turnOrdinal: e.turnOrdinal, message: e.message });
    else if (e.kind === "rollback") out = out.filter((m) => m.turnOrdinal === null || m.turnOrdinal < e.fromTurnOrdinal);
    else if (applyCompaction) {
      out = [
        ...e.messages.map((message) => ({ turnOrdinal: null, message })),
        ...out.filter((m) => m.turnOrdinal !== null && m.turnOrdinal >= e.keepFromTurnOrdinal),
      ];
    }
  }
  return out;
}

/**
 * Every message of the thread that a rollback did not remove, compactions ignored: what the thread
 * has said and done (the plan stop-guard reads the newest plan here, whatever a compaction replaced).
 */
export function threadMessages(entries: readonly HistoryEntry[]): Message[] {
  return replay(entries, false).map((t) => t.message);
}

/** The messages to send the model. */
export function modelContext(entries: readonly HistoryEntry[]): Message[] {
  return replay(entries, true).map((t) => t.message);
}

/**
 * The turns a rollback removed, of `allTurnOrdinals` (the thread's turns as stored). A turn is
 * gone when a rollback marker covers it — `fromTurnOrdinal <= ordinal < toTurnOrdinal` — and only
 * then: a turn that wrote nothing to the log (a user shell command or a compaction that failed or
 * whose process died before its result was written) is still a turn the client saw start and end.
 * For a marker without `toTurnOrdinal` the end is inferred as one past the newest turn the log
 * names before the marker (a turn's first entry is written when it starts).
 */
export function rolledBackTurns(entries: readonly HistoryEntry[], allTurnOrdinals: Iterable<number>): Set<number> {
  const ranges: Array<{ from: number; to: number }> = [];
  let newest = -1;
  for (const e of entries) {
    if (e.kind === "message" && e.turnOrdinal !== null) newest = Math.max(newest, e.turnOrdinal);
    else if (e.kind === "compaction") newest = Math.max(newest, e.keepFromTurnOrdinal);
    else if (e.kind === "rollback") ranges.push({ from: e.fromTurnOrdinal, to: e.toTurnOrdinal ?? newest + 1 });
  }
  const gone = new Set<number>();
  for (const o of allTurnOrdinals) if (ranges.some((r) => o >= r.from && o < r.to)) gone.add(o);
  return gone;
}
