/**
 * An entry of a thread's model history log (the `model_messages` rows): a message, or a marker for
 * a rollback or a compaction. The log is append-only — replaying it gives the model context
 * (runtime/history.ts) — so the store only ever appends entries and reads them back in order.
 */
import type { Message } from "../agent/messages.js";

export type HistoryEntry =
  /** `turnOrdinal` null: thread-level context (environment, settings changes), kept by rollbacks. */
  | { kind: "message"; turnOrdinal: number | null; message: Message }
  /**
   * Turns with ordinal >= `fromTurnOrdinal` (so far) leave the context. `toTurnOrdinal`: the
   * thread's next turn ordinal when it was written, so exactly [from, to) were rolled back (absent
   * in markers written before it existed: inferred from the log then).
   */
  | { kind: "rollback"; fromTurnOrdinal: number; toTurnOrdinal?: number }
  /** Everything before is replaced by `messages` (environment + summary), except turns >= keepFromTurnOrdinal. */
  | { kind: "compaction"; keepFromTurnOrdinal: number; messages: Message[] };
