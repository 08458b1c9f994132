/**
 * The pure part of compaction (src/agent/compaction.ts): which user messages the compacted history
 * keeps — the current request always, shortened with a marker that keeps its beginning and end —
 * and the summary request's conversation: fitted to a budget, tool-free, never empty.
 */
import { describe, expect, it } from "vitest";
import { estimateTokens, fitForSummary, keptUserMessages, summaryMessage, toolFreeConversation } from "../src/agent/compaction.js";
import type { Message, UserMessage } from "../src/agent/messages.js";

const user = (text: string): UserMessage => ({ role: "user", content: [{ type: "text", text }] });
const textOf = (m: Message) => m.content.map((b) => ("text" in b ? b.text : "")).join("");

describe("keptUserMessages", () => {
  it("keeps the newest user messages that fit, oldest first, skipping earlier summaries", () => {
    const history: Message[] = [user("one"), summaryMessage("old summary"), user("two"), { role: "assistant", content: [{ type: "text", text: "ok" }] }, user("three")];
    expect(keptUserMessages(history, 1000).map(textOf)).toEqual(["one", "two", "three"]);
  });

  it("the current request over the budget is kept, shortened, with its beginning, its end and a visible marker", () => {
    const big = `BEGIN-OF-REQUEST ${"middle ".repeat(5000)} END-OF-REQUEST`;
    const history: Message[] = [user("an older request"), user(big)];
    const kept = keptUserMessages(history, 500);
    expect(kept).toHaveLength(1); // nothing older once the budget is spent
    const text = textOf(kept[0]!);
    expect(text.startsWith("BEGIN-OF-REQUEST")).toBe(true);
    expect(text.endsWith("END-OF-REQUEST")).toBe(true);
    expect(text).toMatch(/\[… \d+ characters omitted to fit the context window …\]/);
    expect(estimateTokens(kept[0])).toBeLessThanOrEqual(500);
  });

  it("an older message that does not fit whole is shortened to what is left, and the walk stops there", () => {
    const older = `OLD-START ${"x".repeat(6000)} OLD-END`;
    const history: Message[] = [user("oldest"), user(older), user("current")];
    const kept = keptUserMessages(history, 600);
    expect(kept.map(textOf)[1]).toBe("current");
    expect(kept).toHaveLength(2);
    expect(textOf(kept[0]!)).toMatch(/^OLD-START[\s\S]*omitted[\s\S]*OLD-END$/);
  });

  it("images of a shortened request become a marker", () => {
    const m: UserMessage = { role: "user", content: [{ type: "text", text: "see ".repeat(2000) }, { type: "image", url: `data:image/png;base64,${"A".repeat(50_000)}` }] };
    const [kept] = keptUserMessages([m], 300);
    expect(kept!.content).toHaveLength(1);
    expect(JSON.stringify(kept)).not.toContain("AAAAAAAA");
  });
});

describe("toolFreeConversation", () => {
  it("turns tool calls and results into text and drops reasoning, so a request without tools can carry them", () => {
    const out = toolFreeConversation([
      user("run ls"),
      {
        role: "assistant",
        content: [
          { type: "reasoning", text: "secret thoughts", summary: [], signature: "sig" },
          { type: "text", text: "Listing." },
          { type: "toolCall", id: "c1", name: "shell", arguments: '{"command":"ls"}' },
        ],
      },
      { role: "toolResult", toolCallId: "c1", toolName: "shell", content: [{ type: "text", text: "a.ts" }], isError: true },
    ]);
    expect(out).toEqual([
      user("run ls"),
      { role: "assistant", content: [{ type: "text", text: "Listing." }, { type: "text", text: '[tool call shell (c1): {"command":"ls"}]' }] },
      { role: "user", content: [{ type: "text", text: "[tool result of shell (c1), an error:\na.ts\n]" }] },
    ]);
    expect(JSON.stringify(out)).not.toContain("secret thoughts");
  });
});

describe("fitForSummary", () => {
  it("nothing to summarise is a failure, not an empty conversation", () => {
    expect(fitForSummary([], 10_000, 100)).toEqual({ ok: false, reason: "there is no conversation to summarise" });
  });

  it("a budget only the prompt fits in is a failure that says so", () => {
    const r = fitForSummary([user("hello there"), user("x".repeat(3000))], 110, 100);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.reason).toMatch(/not even the newest message fits a summary request of 110 tokens/);
  });

  it("shortens tool output first, then drops the oldest, and says how many were dropped", () => {
    const history: Message[] = [
      user("first request ".repeat(400)),
      { role: "assistant", content: [{ type: "toolCall", id: "c1", name: "read_file", arguments: "{}" }] },
      { role: "toolResult", toolCallId: "c1", toolName: "read_file", content: [{ type: "text", text: "L".repeat(100_000) }], isError: false },
      user("second request"),
    ];
    const r = fitForSummary(history, 1500, 100);
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(100 + estimateTokens(r.messages)).toBeLessThanOrEqual(1500);
    expect(JSON.stringify(r.messages)).toContain("second request");
    expect(JSON.stringify(r.messages)).not.toContain('"toolCall"');
    expect(JSON.stringify(r.messages)).not.toContain("L".repeat(1000));
  });
});
