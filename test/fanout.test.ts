/** Relaying deltas larger than one NOTIFY payload: split into parts, joined by the listener. */
import { describe, expect, it } from "vitest";
import { DeltaParts, splitDelta, type RelayedDelta } from "../src/runtime/fanout.js";

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
