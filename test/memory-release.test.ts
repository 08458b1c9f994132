/**
 * src/runtime/memory-release.ts: the size estimate that decides whether an unloaded thread was
 * big, and the idle collection itself.
 */
import v8 from "node:v8";
import { describe, expect, it } from "vitest";
import { BIG_HISTORY_CHARS, collectGarbage, textChars } from "../src/runtime/memory-release.js";

describe("textChars", () => {
  it("counts the strings of a history, nested in arrays and objects", () => {
    const entries = [
      { kind: "message", turnOrdinal: 0, message: { role: "user", content: [{ type: "text", text: "hello" }] } },
      { kind: "message", turnOrdinal: 0, message: { role: "assistant", content: [{ type: "text", text: "x".repeat(100) }] } },
    ];
    // "message" ×2, "user", "text" ×2, "hello", "assistant", 100 × "x".
    expect(textChars(entries)).toBe(7 + 7 + 4 + 4 + 4 + 5 + 9 + 100);
  });

  it("stops walking once the limit is reached", () => {
    const big = Array.from({ length: 10 }, () => "y".repeat(BIG_HISTORY_CHARS));
    expect(textChars(big)).toBe(BIG_HISTORY_CHARS);
    expect(textChars(big, 10)).toBe(BIG_HISTORY_CHARS);
  });
});

describe("collectGarbage", () => {
  const newSpace = () => v8.getHeapSpaceStatistics().find((s) => s.space_name === "new_space")!.space_size;

  it("frees old-generation garbage, and from V8 12 on (Node 22, 24) gives the young generation back", () => {
    // Objects that survive scavenges are promoted: only a major collection frees them.
    let junk: Array<{ i: number; s: string }> | null = Array.from({ length: 200_000 }, (_, i) => ({ i, s: `item ${i}` }));
    for (let round = 0; round < 4; round++) {
      const churn: object[] = [];
      for (let i = 0; i < 300_000; i++) churn.push({ i });
    }
    expect(junk.length).toBe(200_000);
    const before = v8.getHeapStatistics().used_heap_size;
    junk = null;
    collectGarbage();
    const after = v8.getHeapStatistics().used_heap_size;
    expect(before - after).toBeGreaterThan(8 * 1024 * 1024);
    if (Number(process.versions.v8.split(".")[0]) >= 12) expect(newSpace()).toBeLessThanOrEqual(2 * 1024 * 1024);
  });
});
