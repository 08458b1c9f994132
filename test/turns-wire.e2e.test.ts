/**
 * The exact wire a WebSocket client sees for reasoning turns and client-implemented (dynamic)
 * tool calls, on each of the three providers, plus what the model is sent back afterwards.
 * Faults, interrupt/steer and sessions/persistence are in the other turns-wire-*.e2e files.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { BACKENDS } from "./support/db.js";
import { TestClient } from "./support/client.js";
import { methodSequence, PROVIDERS, startTurnHarness, text, turnCompleted, type TurnHarness } from "./support/turns.js";
import {
  expectSeqIncreasing,
  itemsCompleted,
  itemsStarted,
  LOOKUP_TOOL,
  mockCallId,
  serverRequests,
  toolCallsIn,
  toolResultsIn,
  wireSequence,
} from "./support/wire.js";

const backend = BACKENDS[BACKENDS.length - 1]!; // Postgres when available (faster per test), else PGlite

describe.each(PROVIDERS)("turn wire order with %s", (provider) => {
  let h: TurnHarness;
  let client: TestClient;
  beforeEach(async () => {
    h = await startTurnHarness(backend, provider);
    client = await TestClient.initialized(h.ts.url);
  });
  afterEach(async () => {
    await client?.close();
    await h?.close();
  });

  const startThread = async (params: object = {}) => (await client.request("thread/start", params)).thread.id as string;
  const runTurn = async (threadId: string, input: string, extra: object = {}) => {
    const { turn } = await client.request("turn/start", { threadId, input: text(input), ...extra });
    return (await turnCompleted(client, turn.id)).params.turn;
  };

  describe("reasoning", () => {
    const reasoning = { summary: ["Plan the answer.", "Check the facts."], text: ["Let me think", " about it."], signature: "sig-abc-123", encryptedContent: "enc_blob_1" };

    it("streams the reasoning item to completion before the agent message", async () => {
      const threadId = await startThread();
      h.mock.enqueue({ reasoning, text: ["The answer", " is 42."] });
      const turn = await runTurn(threadId, "think first");
      expect(turn).toMatchObject({ status: "completed", stopReason: "finalAnswer", error: null });

      // Anthropic and Chat expose the reasoning text only; Responses streams the summary parts too.
      const reasoningDeltas = provider === "openai" ? ["item/reasoning/summaryTextDelta", "item/reasoning/textDelta"] : ["item/reasoning/textDelta"];
      expect(methodSequence(client, threadId)).toEqual([
        "thread/started",
        "thread/status/changed",
        "turn/started",
        "item/started:userMessage",
        "item/completed:userMessage",
        "item/started:reasoning",
        ...reasoningDeltas,
        "item/completed:reasoning",
        "item/started:agentMessage",
        "item/agentMessage/delta",
        "item/completed:agentMessage",
        "thread/tokenUsage/updated",
        "thread/status/changed",
        "turn/completed",
      ]);
      expectSeqIncreasing(client, threadId);

      const [started] = itemsStarted(client, "reasoning");
      const [completed] = itemsCompleted(client, "reasoning");
      expect(started).toMatchObject({ summary: [], content: [], completedAtMs: null });
      expect(completed.id).toBe(started.id);
      expect(completed.content).toEqual(["Let me think about it."]);
      expect(completed.summary).toEqual(provider === "openai" ? reasoning.summary : []);
      expect(typeof completed.completedAtMs).toBe("number");

      // Every delta names the reasoning item; the summary deltas add up to the parts, by index.
      const textDeltas = client.notifications("item/reasoning/textDelta").map((f) => f.params);
      expect(textDeltas.every((p) => p.itemId === started.id && p.contentIndex === 0)).toBe(true);
      expect(textDeltas.map((p) => p.delta).join("")).toBe("Let me think about it.");
      const summaryDeltas = client.notifications("item/reasoning/summaryTextDelta").map((f) => f.params);
      if (provider === "openai") {
        for (const [i, part] of reasoning.summary.entries()) {
          expect(summaryDeltas.filter((p) => p.summaryIndex === i && p.itemId === started.id).map((p) => p.delta).join("")).toBe(part);
        }
      } else expect(summaryDeltas).toEqual([]);

      const [message] = itemsCompleted(client, "agentMessage");
      expect(message.text).toBe("The answer is 42.");
      expect(message.id).not.toBe(started.id);

      const read = await client.request("thread/read", { threadId, includeTurns: true });
      expect(read.thread.turns[0].items.map((i: any) => i.type)).toEqual(["userMessage", "reasoning", "agentMessage"]);
      expect(read.thread.turns[0].items[1]).toEqual(completed);
    });

    it("sends the reasoning back on the next turn in the provider's replay form", async () => {
      const threadId = await startThread();
      h.mock.enqueue({ reasoning, text: "The answer is 42." }, { text: "Still 42." });
      await runTurn(threadId, "think first");
      await runTurn(threadId, "and now?");
      expect(h.mock.requests).toHaveLength(2);
      const body = h.mock.requests[1]!.body;

      if (provider === "anthropic") {
        // The thinking block goes back verbatim with the signature the API issued for it.
        const assistant = body.messages.filter((m: any) => m.role === "assistant");
        expect(assistant).toHaveLength(1);
        expect(assistant[0].content[0]).toEqual({ type: "thinking", thinking: "Let me think about it.", signature: "sig-abc-123" });
        expect(assistant[0].content[1]).toMatchObject({ type: "text", text: "The answer is 42." });
      } else if (provider === "openai") {
        // Stateless Responses: the reasoning item travels back with its id and encrypted content.
        const item = body.input.find((i: any) => i.type === "reasoning");
        expect(item).toEqual({
          type: "reasoning",
          id: "rs_mock_1_0",
          summary: reasoning.summary.map((t) => ({ type: "summary_text", text: t })),
          encrypted_content: "enc_blob_1",
        });
        const idx = body.input.indexOf(item);
        expect(body.input[idx + 1]).toMatchObject({ type: "message", role: "assistant", content: [{ type: "output_text", text: "The answer is 42." }] });
      } else {
        // Chat Completions has no way to send reasoning back: the assistant message is text only.
        const assistant = body.messages.filter((m: any) => m.role === "assistant");
        expect(assistant).toEqual([{ role: "assistant", content: "The answer is 42." }]);
      }
    });
  });

  describe("dynamic tools", () => {
    let threadId: string;
    beforeEach(async () => {
      threadId = await startThread({ dynamicTools: [LOOKUP_TOOL] });
    });

    it("asks the client through item/tool/call and feeds its answer back to the model", async () => {
      const calls: any[] = [];
      client.onServerRequest("item/tool/call", (params) => {
        calls.push(params);
        return { contentItems: [{ type: "inputText", text: "42" }], success: true };
      });
      h.mock.enqueue({ toolCalls: [{ name: "lookup", arguments: { key: "answer" } }] }, { text: "It is 42." });
      const turn = await runTurn(threadId, "look it up");
      expect(turn).toMatchObject({ status: "completed", stopReason: "finalAnswer", error: null });

      expect(wireSequence(client, threadId)).toEqual([
        "thread/started",
        "thread/status/changed",
        "turn/started",
        "item/started:userMessage",
        "item/completed:userMessage",
        "thread/tokenUsage/updated",
        "item/started:dynamicToolCall",
        "request:item/tool/call",
        "serverRequest/resolved",
        "item/completed:dynamicToolCall",
        "item/started:agentMessage",
        "item/agentMessage/delta",
        "item/completed:agentMessage",
        "thread/tokenUsage/updated",
        "thread/status/changed",
        "turn/completed",
      ]);
      expectSeqIncreasing(client, threadId);

      const callId = mockCallId(provider, 1);
      expect(calls).toEqual([{ threadId, turnId: turn.id, callId, namespace: null, tool: "lookup", arguments: { key: "answer" } }]);
      const [request] = serverRequests(client, "item/tool/call");
      const resolved = client.notifications("serverRequest/resolved");
      expect(resolved.map((f) => f.params)).toEqual([expect.objectContaining({ threadId, requestId: request!.id })]);

      const [started] = itemsStarted(client, "dynamicToolCall");
      const [completed] = itemsCompleted(client, "dynamicToolCall");
      expect(started).toMatchObject({ tool: "lookup", arguments: { key: "answer" }, status: "inProgress", contentItems: null, success: null });
      expect(completed).toMatchObject({
        id: started.id,
        tool: "lookup",
        arguments: { key: "answer" },
        status: "completed",
        contentItems: [{ type: "inputText", text: "42" }],
        success: true,
      });
      // The item's duration is the call's own: within the span from its item/started to its item/completed.
      const span = client.notifications("item/completed").find((f) => f.params.item.id === completed.id)!.params.completedAtMs - client.notifications("item/started").find((f) => f.params.item.id === started.id)!.params.startedAtMs;
      expect(completed.durationMs).toEqual(expect.any(Number));
      expect(completed.durationMs).toBeGreaterThanOrEqual(0);
      expect(completed.durationMs).toBeLessThanOrEqual(span);

      // The model saw the tool offered, then gets the result paired with its call id.
      expect(h.mock.requests).toHaveLength(2);
      const toolNames = h.mock.requests[0]!.body.tools.map((t: any) => t.name ?? t.function?.name);
      expect(toolNames).toContain("lookup");
      const second = h.mock.requests[1]!.body;
      expect(toolCallsIn(provider, second)).toEqual([expect.objectContaining({ callId, name: "lookup" })]);
      const results = toolResultsIn(provider, second);
      expect(results).toEqual([expect.objectContaining({ callId, text: "42", isError: false })]);
      expect(results[0]!.position).toBe(toolCallsIn(provider, second)[0]!.position + 1);

      const read = await client.request("thread/read", { threadId, includeTurns: true });
      expect(read.thread.turns[0].items.map((i: any) => i.type)).toEqual(["userMessage", "dynamicToolCall", "agentMessage"]);
      expect(read.thread.turns[0].items[1]).toEqual(completed);
    });

    it("fails the item and tells the model when the client answers with a JSON-RPC error", async () => {
      client.onServerRequest("item/tool/call", () => {
        throw new Error("lookup table is offline");
      });
      h.mock.enqueue({ toolCalls: [{ name: "lookup", arguments: { key: "answer" } }] }, { text: "The lookup failed." });
      const turn = await runTurn(threadId, "look it up");
      expect(turn).toMatchObject({ status: "completed", stopReason: "finalAnswer", error: null });
      expect(wireSequence(client, threadId).slice(5)).toEqual([
        "thread/tokenUsage/updated",
        "item/started:dynamicToolCall",
        "request:item/tool/call",
        "serverRequest/resolved",
        "item/completed:dynamicToolCall",
        "item/started:agentMessage",
        "item/agentMessage/delta",
        "item/completed:agentMessage",
        "thread/tokenUsage/updated",
        "thread/status/changed",
        "turn/completed",
      ]);
      const [item] = itemsCompleted(client, "dynamicToolCall");
      expect(item).toMatchObject({ status: "failed", success: false });
      expect(item.contentItems[0].text).toContain("lookup table is offline");

      const [result] = toolResultsIn(provider, h.mock.requests[1]!.body);
      expect(result!.callId).toBe(mockCallId(provider, 1));
      expect(result!.text).toContain("lookup table is offline");
      if (provider === "anthropic") expect(result!.isError).toBe(true);
    });

    it("passes success: false through as a failed item and an error result", async () => {
      client.onServerRequest("item/tool/call", () => ({ contentItems: [{ type: "inputText", text: "no such key" }], success: false }));
      h.mock.enqueue({ toolCalls: [{ name: "lookup", arguments: { key: "nope" } }] }, { text: "Not found." });
      const turn = await runTurn(threadId, "look it up");
      expect(turn).toMatchObject({ status: "completed", stopReason: "finalAnswer" });
      const [item] = itemsCompleted(client, "dynamicToolCall");
      expect(item).toMatchObject({ status: "failed", success: false, contentItems: [{ type: "inputText", text: "no such key" }] });
      const [result] = toolResultsIn(provider, h.mock.requests[1]!.body);
      expect(result).toMatchObject({ callId: mockCallId(provider, 1), text: "no such key" });
      if (provider === "anthropic") expect(result!.isError).toBe(true);
    });

    it("fails the item when the client's answer is not a DynamicToolCallResponse", async () => {
      client.onServerRequest("item/tool/call", () => ({ output: "42" }));
      h.mock.enqueue({ toolCalls: [{ name: "lookup", arguments: { key: "answer" } }] }, { text: "Hm." });
      const turn = await runTurn(threadId, "look it up");
      expect(turn.status).toBe("completed");
      const [item] = itemsCompleted(client, "dynamicToolCall");
      expect(item).toMatchObject({ status: "failed", success: false });
      const [result] = toolResultsIn(provider, h.mock.requests[1]!.body);
      expect(result!.text).toMatch(/invalid result/);
    });

    it("runs two calls of one message in order, each answered and paired to its own id", async () => {
      const seen: string[] = [];
      client.onServerRequest("item/tool/call", (p) => {
        seen.push(p.arguments.key);
        return { contentItems: [{ type: "inputText", text: `value of ${p.arguments.key}` }], success: true };
      });
      h.mock.enqueue(
        {
          toolCalls: [
            { name: "lookup", arguments: { key: "a" } },
            { name: "lookup", arguments: { key: "b" } },
          ],
        },
        { text: "Both found." },
      );
      await runTurn(threadId, "look both up");
      expect(seen).toEqual(["a", "b"]);
      expect(wireSequence(client, threadId).filter((l) => l.includes("dynamicToolCall") || l.includes("tool/call"))).toEqual([
        "item/started:dynamicToolCall",
        "request:item/tool/call",
        "item/completed:dynamicToolCall",
        "item/started:dynamicToolCall",
        "request:item/tool/call",
        "item/completed:dynamicToolCall",
      ]);
      const results = toolResultsIn(provider, h.mock.requests[1]!.body);
      expect(results.map((r) => [r.callId, r.text])).toEqual([
        [mockCallId(provider, 1, 0), "value of a"],
        [mockCallId(provider, 1, 1), "value of b"],
      ]);
    });
  });
});
