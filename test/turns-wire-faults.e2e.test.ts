/**
 * Provider faults as a WebSocket client sees them, on each of the three providers: transient
 * failures are announced with `error` (willRetry true) and retried; fatal ones fail the turn with
 * Codex's codexErrorInfo and put the thread in systemError until the next turn; a stop reason
 * before the tool call does not stop the loop; a truncated message never runs its tool calls.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { BACKENDS } from "./support/db.js";
import { TestClient } from "./support/client.js";
import { methodSequence, PROVIDERS, startTurnHarness, text, turnCompleted, type TurnHarness } from "./support/turns.js";
import {
  afterFirstTextDelta,
  expectSeqIncreasing,
  itemsCompleted,
  itemsStarted,
  LOOKUP_TOOL,
  mockCallId,
  serverRequests,
  toolResultsIn,
  wireSequence,
  OPENING,
  ANSWER,
  END,
} from "./support/wire.js";

const backend = BACKENDS[BACKENDS.length - 1]!; // Postgres when available (faster per test), else PGlite


describe.each(PROVIDERS)("provider faults with %s", (provider) => {
  let h: TurnHarness;
  let client: TestClient;
  let threadId: string;
  beforeEach(async () => {
    h = await startTurnHarness(backend, provider);
    client = await TestClient.initialized(h.ts.url);
    threadId = (await client.request("thread/start", { dynamicTools: [LOOKUP_TOOL] })).thread.id;
  });
  afterEach(async () => {
    await client?.close();
    await h?.close();
  });

  const runTurn = async (input: string) => {
    const { turn } = await client.request("turn/start", { threadId, input: text(input) });
    return (await turnCompleted(client, turn.id)).params.turn;
  };
  const errors = () => client.notifications("error").map((f) => f.params);
  const statuses = () => client.notifications("thread/status/changed").filter((f) => f.params.threadId === threadId).map((f) => f.params.status);

  it("429 with Retry-After: announces the retry, then completes", async () => {
    h.mock.enqueue({ kind: "error", status: 429, retryAfterSeconds: 1 }, { text: "after the limit" });
    const turn = await runTurn("hi");
    expect(turn).toMatchObject({ status: "completed", stopReason: "finalAnswer", error: null });
    expect(methodSequence(client, threadId)).toEqual([...OPENING, "error", ...ANSWER, ...END]);
    expect(errors()).toEqual([expect.objectContaining({ threadId, turnId: turn.id, willRetry: true })]);
    expect(errors()[0].error).toMatchObject({ codexErrorInfo: "rateLimitExceeded" });
    expect(errors()[0].error.message).toMatch(/429/);
    expect(h.mock.requests).toHaveLength(2);
    expect(itemsCompleted(client, "agentMessage").map((i) => i.text)).toEqual(["after the limit"]);
    expectSeqIncreasing(client, threadId);
  });

  it("500: announces the retry, then completes", async () => {
    h.mock.enqueue({ kind: "error", status: 500 }, { text: "recovered" });
    const turn = await runTurn("hi");
    expect(turn).toMatchObject({ status: "completed", stopReason: "finalAnswer", error: null });
    expect(methodSequence(client, threadId)).toEqual([...OPENING, "error", ...ANSWER, ...END]);
    expect(errors()).toEqual([expect.objectContaining({ willRetry: true, error: expect.objectContaining({ codexErrorInfo: "internalServerError" }) })]);
    expect(h.mock.requests).toHaveLength(2);
  });

  it("a stream cut halfway: the partial item is voided (completed empty), a new item carries the retried answer", async () => {
    h.mock.enqueue({ text: ["Hel", "lo ", "world"], cutAfterEvents: afterFirstTextDelta(provider) }, { text: ["Hello", " again"] });
    const turn = await runTurn("hi");
    expect(turn).toMatchObject({ status: "completed", stopReason: "finalAnswer", error: null });
    expect(methodSequence(client, threadId)).toEqual([
      ...OPENING,
      "item/started:agentMessage",
      "item/agentMessage/delta",
      "item/completed:agentMessage",
      "error",
      ...ANSWER,
      ...END,
    ]);
    const [partial, retried] = itemsCompleted(client, "agentMessage");
    // A failed attempt's output is void: item/completed (authoritative) retracts the deltas shown.
    expect(partial.text).toBe("");
    expect(itemsCompleted(client, "agentMessage").filter((i) => i.text.includes("Hel") && i.text !== "Hello again")).toEqual([]);
    expect(retried.text).toBe("Hello again");
    expect(retried.id).not.toBe(partial.id);
    expect(errors()).toEqual([
      expect.objectContaining({ willRetry: true, error: expect.objectContaining({ codexErrorInfo: { responseStreamDisconnected: expect.anything() } }) }),
    ]);
    // The partial answer never reaches the model's history: the retry is the same request again.
    expect(h.mock.requests).toHaveLength(2);
    expect(h.mock.requests[1]!.rawBody).toBe(h.mock.requests[0]!.rawBody);
    // The record holds both items as the client has them after item/completed.
    const read = await client.request("thread/read", { threadId, includeTurns: true });
    expect(read.thread.turns[0].items.map((i: any) => [i.type, i.text ?? null])).toEqual([
      ["userMessage", null],
      ["agentMessage", ""],
      ["agentMessage", "Hello again"],
    ]);
    expectSeqIncreasing(client, threadId);
  });

  it("a malformed chunk: retried like a cut stream", async () => {
    h.mock.enqueue({ text: ["Hel", "lo"], malformedAfterEvents: afterFirstTextDelta(provider) }, { text: "clean" });
    const turn = await runTurn("hi");
    expect(turn).toMatchObject({ status: "completed", stopReason: "finalAnswer", error: null });
    expect(methodSequence(client, threadId)).toEqual([
      ...OPENING,
      "item/started:agentMessage",
      "item/agentMessage/delta",
      "item/completed:agentMessage",
      "error",
      ...ANSWER,
      ...END,
    ]);
    expect(errors()).toEqual([expect.objectContaining({ willRetry: true })]);
    expect(itemsCompleted(client, "agentMessage").map((i) => i.text)).toEqual(["", "clean"]);
    expect(h.mock.requests).toHaveLength(2);
  });

  it("a mid-stream provider error: announced, retried, completed", async () => {
    h.mock.enqueue({ text: ["Hel", "lo"], midStreamError: { afterEvents: afterFirstTextDelta(provider) } }, { text: "fine" });
    const turn = await runTurn("hi");
    expect(turn.status).toBe("completed");
    expect(errors()).toEqual([expect.objectContaining({ willRetry: true })]);
    expect(itemsCompleted(client, "agentMessage").map((i) => i.text)).toEqual(["", "fine"]);
  });

  it("exhausted retries: every attempt announced, the last with willRetry false, the turn fails", async () => {
    // The harness allows 3 retries: 4 attempts in all.
    for (let i = 0; i < 4; i++) h.mock.enqueue({ kind: "error", status: 503 });
    const turn = await runTurn("hi");
    expect(turn).toMatchObject({ status: "failed", stopReason: "error" });
    expect(errors().map((e) => e.willRetry)).toEqual([true, true, true, false]);
    expect(errors()[3].error.codexErrorInfo).toEqual({ responseTooManyFailedAttempts: { httpStatusCode: 503 } });
    expect(turn.error.codexErrorInfo).toEqual({ responseTooManyFailedAttempts: { httpStatusCode: 503 } });
    expect(h.mock.requests).toHaveLength(4);
  });

  it("401: not retried; the turn fails, the thread is in systemError until the next turn works", async () => {
    h.mock.enqueue({ kind: "error", status: 401, message: "invalid x-api-key" });
    const failed = await runTurn("hi");
    expect(failed).toMatchObject({ status: "failed", stopReason: "error" });
    expect(failed.error).toMatchObject({ codexErrorInfo: "unauthorized" });
    expect(failed.error.message).toMatch(/401/);
    expect(methodSequence(client, threadId)).toEqual([...OPENING, "error", ...END]);
    expect(errors()).toEqual([expect.objectContaining({ threadId, turnId: failed.id, willRetry: false, error: expect.objectContaining({ codexErrorInfo: "unauthorized" }) })]);
    expect(statuses()).toEqual([{ type: "active", activeFlags: [] }, { type: "systemError" }]);
    expect(h.mock.requests).toHaveLength(1);
    expect((await client.request("thread/read", { threadId })).thread.status).toEqual({ type: "systemError" });

    h.mock.enqueue({ text: "working again" });
    const ok = await runTurn("again");
    expect(ok).toMatchObject({ status: "completed", stopReason: "finalAnswer", error: null });
    expect(statuses()).toEqual([{ type: "active", activeFlags: [] }, { type: "systemError" }, { type: "active", activeFlags: [] }, { type: "idle" }]);
    expect((await client.request("thread/read", { threadId })).thread.status).toEqual({ type: "idle" });
    // The failed turn left only the user message in the history; the next request carries both.
    const body = h.mock.requests[1]!.body;
    const userTexts = JSON.stringify(provider === "openai" ? body.input : body.messages);
    expect(userTexts).toContain('"hi"');
    expect(userTexts).toContain('"again"');
  });

  it("a stop reason before the tool-call block: the tool still runs and the loop continues", async () => {
    client.onServerRequest("item/tool/call", () => ({ contentItems: [{ type: "inputText", text: "42" }], success: true }));
    h.mock.enqueue({ toolCalls: [{ name: "lookup", arguments: { key: "k" } }], stopReasonBeforeToolCall: true }, { text: "It is 42." });
    const turn = await runTurn("look it up");
    expect(turn).toMatchObject({ status: "completed", stopReason: "finalAnswer", error: null });
    expect(serverRequests(client, "item/tool/call").map((f) => f.params.callId)).toEqual([mockCallId(provider, 1)]);
    expect(itemsCompleted(client, "dynamicToolCall")).toEqual([expect.objectContaining({ status: "completed", success: true })]);
    expect(toolResultsIn(provider, h.mock.requests[1]!.body)).toEqual([expect.objectContaining({ callId: mockCallId(provider, 1), text: "42" })]);
    expect(itemsCompleted(client, "agentMessage").map((i) => i.text)).toEqual(["It is 42."]);
  });

  it("a failure after a tool ran retries only the model call, never the tool", async () => {
    let asked = 0;
    client.onServerRequest("item/tool/call", () => {
      asked++;
      return { contentItems: [{ type: "inputText", text: "42" }], success: true };
    });
    h.mock.enqueue({ toolCalls: [{ name: "lookup", arguments: { key: "k" } }] }, { kind: "error", status: 500 }, { text: "It is 42." });
    const turn = await runTurn("look it up");
    expect(turn).toMatchObject({ status: "completed", stopReason: "finalAnswer" });
    expect(asked).toBe(1);
    expect(itemsStarted(client, "dynamicToolCall")).toHaveLength(1);
    expect(h.mock.requests).toHaveLength(3);
    expect(h.mock.requests[2]!.rawBody).toBe(h.mock.requests[1]!.rawBody);
    expect(errors()).toEqual([expect.objectContaining({ willRetry: true })]);
  });

  it("a stream cut just before its final event: the streamed tool call is not run until the retry completes it", async () => {
    let asked = 0;
    client.onServerRequest("item/tool/call", () => {
      asked++;
      return { contentItems: [{ type: "inputText", text: "42" }], success: true };
    });
    // Every frame but the last (Anthropic message_stop, Responses response.completed, Chat [DONE]).
    const allButLast = { anthropic: 7, openai: 7, "openai-chat": 6 }[provider];
    const call = { name: "lookup", arguments: { key: "k" } };
    h.mock.enqueue({ toolCalls: [call], cutAfterEvents: allButLast }, { toolCalls: [call] }, { text: "It is 42." });
    const turn = await runTurn("look it up");
    expect(turn).toMatchObject({ status: "completed", stopReason: "finalAnswer" });
    expect(asked).toBe(1);
    expect(serverRequests(client, "item/tool/call").map((f) => f.params.callId)).toEqual([mockCallId(provider, 2)]);
    expect(errors()).toEqual([expect.objectContaining({ willRetry: true })]);
    // The cut attempt left nothing in the history: the retry is the same request again.
    expect(h.mock.requests[1]!.rawBody).toBe(h.mock.requests[0]!.rawBody);
    expect(toolResultsIn(provider, h.mock.requests[2]!.body)).toEqual([expect.objectContaining({ callId: mockCallId(provider, 2), text: "42" })]);
  });

  it("context overflow that compaction cannot fix: the turn fails with contextWindowExceeded", async () => {
    // Overflow → one compaction (its own model call) → the retry overflows again → failed.
    h.mock.enqueue({ kind: "error", status: 400, contextOverflow: true }, { text: "Summary of the conversation." }, { kind: "error", status: 400, contextOverflow: true });
    const turn = await runTurn("a very long prompt");
    expect(turn).toMatchObject({ status: "failed", stopReason: "error" });
    expect(turn.error.codexErrorInfo).toBe("contextWindowExceeded");
    expect(methodSequence(client, threadId)).toEqual([
      ...OPENING,
      "error",
      "item/started:contextCompaction",
      "item/completed:contextCompaction",
      "error",
      ...END,
    ]);
    expect(errors().map((e) => [e.willRetry, e.error.codexErrorInfo])).toEqual([
      [true, "contextWindowExceeded"],
      [false, "contextWindowExceeded"],
    ]);
    expect(statuses().at(-1)).toEqual({ type: "systemError" });
    expect(h.mock.requests).toHaveLength(3);
  });

  it("context overflow fixed by compaction: retried once on the compacted history, then completes", async () => {
    h.mock.enqueue({ kind: "error", status: 400, contextOverflow: true }, { text: "Summary of the conversation." }, { text: "Answer after compaction." });
    const turn = await runTurn("a very long prompt");
    expect(turn).toMatchObject({ status: "completed", stopReason: "finalAnswer", error: null });
    expect(methodSequence(client, threadId)).toEqual([
      ...OPENING,
      "error",
      "item/started:contextCompaction",
      "item/completed:contextCompaction",
      ...ANSWER,
      ...END,
    ]);
    expect(errors()).toEqual([expect.objectContaining({ willRetry: true, error: expect.objectContaining({ codexErrorInfo: "contextWindowExceeded" }) })]);
    expect(h.mock.requests).toHaveLength(3);
    // The retry carries the summary and still the turn's own input.
    const retried = JSON.stringify(h.mock.requests[2]!.body);
    expect(retried).toContain("Summary of the conversation.");
    expect(retried).toContain("a very long prompt");
  });

  it("maxTokens: the turn is failed (not completed: Codex clients read that as success) with stopReason maxTokens and a truncation error; the truncated tool call is never sent", async () => {
    const asked: unknown[] = [];
    client.onServerRequest("item/tool/call", (p) => {
      asked.push(p);
      return { contentItems: [{ type: "inputText", text: "should not happen" }], success: true };
    });
    h.mock.enqueue({ text: ["Let me look", " that up"], toolCalls: [{ name: "lookup", arguments: { key: "k" } }], stop: "maxTokens" });
    const turn = await runTurn("look it up");
    expect(turn).toMatchObject({ status: "failed", stopReason: "maxTokens" });
    expect(turn.error).toMatchObject({ codexErrorInfo: "other" });
    expect(turn.error.message).toMatch(/cut off|truncat/i);
    expect(wireSequence(client, threadId)).toEqual([...OPENING, ...ANSWER, "error", ...END]);
    expect(errors()).toEqual([expect.objectContaining({ willRetry: false, error: expect.objectContaining({ message: turn.error.message }) })]);
    expect(asked).toEqual([]);
    expect(itemsStarted(client, "dynamicToolCall")).toEqual([]);
    expect(itemsCompleted(client, "agentMessage").map((i) => i.text)).toEqual(["Let me look that up"]);
    expect(h.mock.requests).toHaveLength(1);
    expect(statuses().at(-1)).toEqual({ type: "idle" });

    // The unexecuted call is paired with a "not executed" result in the next request.
    h.mock.enqueue({ text: "ok" });
    await runTurn("go on");
    const [result] = toolResultsIn(provider, h.mock.requests[1]!.body);
    expect(result).toMatchObject({ callId: mockCallId(provider, 1) });
    expect(result!.text).toMatch(/not executed/);
  });
});
