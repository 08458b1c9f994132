/** Relaying deltas larger than one NOTIFY payload: split into parts, joined by the listener. */
import { describe, expect, it } from "vitest";
import { DeltaParts, splitDelta, type RelayedDelta } from "../src/runtime/fanout.js";
import { gapBelow } from "../src/runtime/cluster.js";

const delta = (seq: number, text: string): RelayedDelta => ({ seq, method: "item/agentMessage/delta", params: { threadId: "t", turnId: "u", itemId: "i", delta: text, seq }, emittedAtMs: 1 });

describe("splitDelta / DeltaParts", () => {
  it("keeps a delta that fits one notification whole", () => {
    const entries = splitDelta(delta(5, "hello"));
    expect(entries).toEqual([[5, "item/agentMessage/delta", delta(5, "hello").params, 1]]);
    expect(new DeltaParts().collect(entries)).toEqual(entries);
  });

  it("splits a large delta (escapes, quotes, surrogate pairs) into parts that each fit, and joins them across notifications", () => {
    const text = `${'a"\\\n\u0001😀'.repeat(4_000)}end`;
    const entries = splitDelta(delta(9, text));
    expect(entries.length).toBeGreaterThan(3);
    for (const e of entries) expect(Buffer.byteLength(JSON.stringify(e))).toBeLessThan(7_400);
    const parts = new DeltaParts();
    const half = Math.floor(entries.length / 2);
    expect(parts.collect(entries.slice(0, half))).toEqual([]); // held until the last part
    const [joined] = parts.collect(entries.slice(half));
    expect(joined![0]).toBe(9);
    expect(joined![2].delta).toBe(text);
    expect((joined![2].delta as string).includes("\ufffd")).toBe(false);
  });
});

describe("gapBelow (a listener reads the log before relayed deltas when numbers are missing)", () => {
  const d = (...seqs: number[]) => seqs.map((seq) => ({ seq }));
  it("finds none when the deltas follow what was delivered or what the wake-up covers", () => {
    expect(gapBelow(10, 0, d(11, 12, 13))).toBe(false);
    expect(gapBelow(10, 14, d(15, 16))).toBe(false);
    expect(gapBelow(10, 14, d(12, 15))).toBe(false); // 12 is covered by the log read up to 14
    expect(gapBelow(10, 0, [])).toBe(false);
  });

  it("finds one when a number below a delta is neither delivered, covered nor relayed", () => {
    expect(gapBelow(10, 0, d(12))).toBe(true); // 11 unread: a wake-up that never came
    expect(gapBelow(5144, 0, d(5172))).toBe(true);
    expect(gapBelow(10, 14, d(15, 17))).toBe(true);
  });
});
