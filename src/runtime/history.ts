/**
 * A thread's model history is an append-only log of entries: messages, and markers for rollback
 * and compaction. The model context is what replaying the log gives, so nothing stored is ever
 * rewritten (a rollback is "a stored marker, not a delete") and a fork that reads its parent's
 * log up to the fork point sees exactly what the parent saw then.
 */
import type { Message } from "../agent/messages.js";

export type HistoryEntry =
  /** `turnOrdinal` null: thread-level context (environment, settings changes), kept by rollbacks. */
  | { kind: "message"; turnOrdinal: number | null; message: Message }
  /** Turns with ordinal >= `fromTurnOrdinal` (so far) leave the context. */
  | { kind: "rollback"; fromTurnOrdinal: number }
  /** Everything before is replaced by `messages` (environment + summary), except turns >= keepFromTurnOrdinal. */
  | { kind: "compaction"; keepFromTurnOrdinal: number; messages: Message[] };

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

/** The messages to send the model. */
export function modelContext(entries: readonly HistoryEntry[]): Message[] {
  return replay(entries, true).map((t) => t.message);
}

/** Turns still part of the conversation (rollbacks remove turns; compaction only shortens the context). */
export function rolledBackTurns(entries: readonly HistoryEntry[], allTurnOrdinals: Iterable<number>): Set<number> {
  const visible = new Set<number | null>(replay(entries, false).map((t) => t.turnOrdinal));
  // A thread/compact/start turn writes no message, only its marker: without this it would read
  // as rolled back and vanish from thread/read although clients saw it start and complete.
  // A marker is never removed by a rollback, so one made by a turn that a later rollback removed
  // must not bring that turn back.
  let removedFrom = Infinity;
  for (let i = entries.length - 1; i >= 0; i--) {
    const e = entries[i]!;
    if (e.kind === "rollback") removedFrom = Math.min(removedFrom, e.fromTurnOrdinal);
    else if (e.kind === "compaction" && e.keepFromTurnOrdinal < removedFrom) visible.add(e.keepFromTurnOrdinal);
  }
  const gone = new Set<number>();
  for (const o of allTurnOrdinals) if (!visible.has(o)) gone.add(o);
  return gone;
}
