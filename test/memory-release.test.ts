/** src/runtime/memory-release.ts: the size estimate that decides whether an unloaded thread was big. */
import { describe, expect, it } from "vitest";
import { BIG_HISTORY_CHARS, textChars } from "../src/runtime/memory-release.js";

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
