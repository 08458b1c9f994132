/** Which turns a thread's history log says were rolled back (src/runtime/history.ts). */
import { describe, expect, it } from "vitest";
import type { Message } from "../src/agent/messages.js";
import { modelContext, rolledBackTurns } from "../src/runtime/history.js";
import type { HistoryEntry } from "../src/store/history-entry.js";

const say = (turnOrdinal: number | null, text: string): HistoryEntry => ({ kind: "message", turnOrdinal, message: { role: "user", content: [{ type: "text", text }] } as Message });
const gone = (entries: HistoryEntry[], turns: number[]) => [...rolledBackTurns(entries, turns)].sort((a, b) => a - b);

describe("rolledBackTurns", () => {
  it("a marker removes exactly the turns in [fromTurnOrdinal, toTurnOrdinal), whether or not they wrote to the log", () => {
    // Turn 1 wrote nothing (a user shell command whose process died, a compaction that failed).
    const log: HistoryEntry[] = [say(null, "env"), say(0, "a"), say(2, "c"), { kind: "rollback", fromTurnOrdinal: 2, toTurnOrdinal: 3 }, say(3, "d")];
    expect(gone(log, [0, 1, 2, 3])).toEqual([2]);
    const wider: HistoryEntry[] = [say(0, "a"), say(2, "c"), { kind: "rollback", fromTurnOrdinal: 1, toTurnOrdinal: 3 }, say(3, "d")];
    expect(gone(wider, [0, 1, 2, 3])).toEqual([1, 2]);
    // Turns after the marker are never covered by it, even with a lower "from".
    expect(gone([say(0, "a"), { kind: "rollback", fromTurnOrdinal: 0, toTurnOrdinal: 1 }, say(1, "b")], [0, 1, 2])).toEqual([0]);
  });

  it("an older marker without toTurnOrdinal ends after the newest turn the log names before it", () => {
    const log: HistoryEntry[] = [say(0, "a"), say(1, "b"), say(2, "c"), { kind: "rollback", fromTurnOrdinal: 1 }, say(3, "d")];
    expect(gone(log, [0, 1, 2, 3])).toEqual([1, 2]);
    // A compaction marker names its turn too.
    const compacted: HistoryEntry[] = [say(0, "a"), { kind: "compaction", keepFromTurnOrdinal: 1, messages: [] }, { kind: "rollback", fromTurnOrdinal: 1 }, say(2, "c")];
    expect(gone(compacted, [0, 1, 2])).toEqual([1]);
  });

  it("no marker, nothing gone; the model context is unaffected by toTurnOrdinal", () => {
    expect(gone([say(0, "a")], [0, 1, 2])).toEqual([]);
    const withEnd: HistoryEntry[] = [say(0, "a"), say(1, "b"), { kind: "rollback", fromTurnOrdinal: 1, toTurnOrdinal: 2 }, say(2, "c")];
    const without: HistoryEntry[] = [say(0, "a"), say(1, "b"), { kind: "rollback", fromTurnOrdinal: 1 }, say(2, "c")];
    expect(modelContext(withEnd)).toEqual(modelContext(without));
    expect(JSON.stringify(modelContext(withEnd))).not.toContain('"b"');
  });
});
