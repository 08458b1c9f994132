/** Anthropic-specific request conversion and stream assembly. */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { Message } from "../../src/agent/messages.js";
import {
  AnthropicStreamAssembler,
  applyMessageBreakpoints,
  buildAnthropicRequest,
  convertMessagesToAnthropic,
} from "../../src/providers/anthropic.js";
import { ANTHROPIC_THINKING_BUDGETS, parseClaudeVersion, usesAdaptiveThinking } from "../../src/providers/anthropic-thinking.js";
import type { RawMessageStreamEvent } from "@anthropic-ai/sdk/resources/messages";
import { ProviderError } from "../../src/providers/types.js";
import { startMockModelServer, type MockModelServer } from "../support/mock-model-server.js";
import { baseRequest, collect, countCacheControl, developer, providerFor, toolResult, user } from "./helpers.js";

let mock: MockModelServer;
beforeAll(async () => {
  mock = await startMockModelServer();
});
afterAll(async () => {
  await mock.close();
});
beforeEach(() => mock.reset());

type Body = { system?: unknown[]; tools?: unknown[]; messages: Array<{ role: string; content: Array<Record<string, unknown>> }>; [k: string]: unknown };

async function sentBody(messages: Message[], extra = {}, opts = {}): Promise<Body> {
  mock.enqueue({ text: "ok" });
  await collect(providerFor("anthropic", mock, opts), baseRequest(messages, extra));
  const r = mock.requests.at(-1)!;
  expect(r.path).toBe("/v1/messages");
  expect(r.headers.authorization).toMatch(/^Bearer /);
  return r.body as Body;
}

const assistantCalls = (...ids: string[]): Message => ({
  role: "assistant",
  content: [{ type: "text", text: "Running." }, ...ids.map((id) => ({ type: "toolCall" as const, id, name: "shell", arguments: `{"cmd":"echo ${id}"}` }))],
});

describe("anthropic request conversion", () => {
  it("renders developer messages as a tagged user-side block and merges user-side runs, tool results first", async () => {
    const body = await sentBody([
      developer("<environment>cwd=/repo</environment>"),
      user("Do it."),
      assistantCalls("t1", "t2"),
      developer("<settings>approval=never</settings>"), // e.g. a steer injected before the results
      toolResult("t1", "shell", "one"),
      toolResult("t2", "shell", "two", true),
      user("And then?"),
    ]);
    expect(body.messages.map((m) => m.role)).toEqual(["user", "assistant", "user"]);
    expect(body.messages[0].content).toEqual([
      { type: "text", text: "<developer_message>\n<environment>cwd=/repo</environment>\n</developer_message>" },
      { type: "text", text: "Do it." },
    ]);
    const last = body.messages[2].content.map((b) => {
      const { cache_control: _drop, ...rest } = b;
      return rest;
    });
    expect(last).toEqual([
      { type: "tool_result", tool_use_id: "t1", content: [{ type: "text", text: "one" }] },
      { type: "tool_result", tool_use_id: "t2", content: [{ type: "text", text: "two" }], is_error: true },
      { type: "text", text: "<developer_message>\n<settings>approval=never</settings>\n</developer_message>" },
      { type: "text", text: "And then?" },
    ]);
    expect(body.messages[1].content.at(-1)).toEqual({ type: "tool_use", id: "t2", name: "shell", input: { cmd: "echo t2" } });
  });

  it("keeps user/assistant alternation when assistant messages are empty or adjacent", () => {
    const out = convertMessagesToAnthropic([
      user("a"),
      { role: "assistant", content: [{ type: "reasoning", text: "unsigned", summary: [] }] }, // nothing replayable
      user("b"),
      { role: "assistant", content: [{ type: "text", text: "x" }] },
      { role: "assistant", content: [{ type: "text", text: "y" }] },
      user("c"),
    ]);
    expect(out.map((m) => m.role)).toEqual(["user", "assistant", "user"]);
    expect(out[0].content).toEqual([
      { type: "text", text: "a" },
      { type: "text", text: "b" },
    ]);
    expect(out[1].content).toEqual([
      { type: "text", text: "x" },
      { type: "text", text: "y" },
    ]);
  });

  it("replays thinking only with a signature, redacted thinking with its data", () => {
    const out = convertMessagesToAnthropic([
      user("q"),
      {
        role: "assistant",
        content: [
          { type: "reasoning", text: "signed", summary: [], signature: "sig" },
          { type: "reasoning", text: "", summary: [], redactedData: "opaque" },
          { type: "reasoning", text: "unsigned", summary: ["s"] },
          { type: "text", text: "" }, // empty text is rejected by the API
          { type: "toolCall", id: "t", name: "shell", arguments: "{not json" },
        ],
      },
    ]);
    expect(out[1].content).toEqual([
      { type: "thinking", thinking: "signed", signature: "sig" },
      { type: "redacted_thinking", data: "opaque" },
      { type: "tool_use", id: "t", name: "shell", input: {} },
    ]);
  });

  it("converts images: data URL → base64 source, http(s) → url source", () => {
    const out = convertMessagesToAnthropic([
      {
        role: "user",
        content: [
          { type: "text", text: "look" },
          { type: "image", url: "data:image/png;base64,iVBORw0KGgo=" },
          { type: "image", url: "https://example.com/a.jpg" },
        ],
      },
    ]);
    expect(out[0].content).toEqual([
      { type: "text", text: "look" },
      { type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" } },
      { type: "image", source: { type: "url", url: "https://example.com/a.jpg" } },
    ]);
  });

  it("max_tokens: request, then option, then 8192; thinking budgets keep max_tokens above the budget", async () => {
    expect((await sentBody([user("x")])).max_tokens).toBe(8192);
    expect((await sentBody([user("x")], {}, { defaultMaxOutputTokens: 1000 })).max_tokens).toBe(1000);
    expect((await sentBody([user("x")], { maxOutputTokens: 3000 }, { defaultMaxOutputTokens: 1000 })).max_tokens).toBe(3000);

    const none = await sentBody([user("x")], { reasoningEffort: "none" });
    expect(none.thinking).toBeUndefined();
    expect(buildAnthropicRequest(baseRequest([user("x")], { reasoningEffort: null })).thinking).toBeUndefined();

    const low = buildAnthropicRequest(baseRequest([user("x")], { reasoningEffort: "low" }));
    expect(low.thinking).toEqual({ type: "enabled", budget_tokens: 2048 });
    expect(low.max_tokens).toBe(8192);
    const high = buildAnthropicRequest(baseRequest([user("x")], { reasoningEffort: "high", maxOutputTokens: 4000 }));
    expect(high.thinking).toEqual({ type: "enabled", budget_tokens: ANTHROPIC_THINKING_BUDGETS.high });
    expect(high.max_tokens).toBe(ANTHROPIC_THINKING_BUDGETS.high + 4000);
    expect(Object.keys(high)).toEqual(["model", "max_tokens", "system", "tools", "messages", "thinking", "stream"]);
  });

  it("reads the family and version of Claude model ids, never a date as the minor version", () => {
    expect(parseClaudeVersion("claude-sonnet-5-5")).toEqual({ family: "sonnet", major: 5, minor: 5 });
    expect(parseClaudeVersion("claude-opus-5")).toEqual({ family: "opus", major: 5, minor: 0 });
    expect(parseClaudeVersion("claude-haiku-4-5-20251001")).toEqual({ family: "haiku", major: 4, minor: 5 });
    expect(parseClaudeVersion("claude-sonnet-4-20250514")).toEqual({ family: "sonnet", major: 4, minor: 0 });
    expect(parseClaudeVersion("us.anthropic.claude-opus-4-7")).toEqual({ family: "opus", major: 4, minor: 7 });
    expect(parseClaudeVersion("claude-3-7-sonnet-latest")).toEqual({ family: "sonnet", major: 3, minor: 7 });
    expect(parseClaudeVersion("claude-3-5-haiku-20241022")).toEqual({ family: "haiku", major: 3, minor: 5 });
    expect(parseClaudeVersion("mock-model")).toBeNull();
    expect(parseClaudeVersion("claude-mythos-preview")).toBeNull();
    for (const m of ["claude-sonnet-5-5", "claude-opus-4-6", "claude-sonnet-4-6", "claude-opus-4-7", "claude-fable-5-2", "claude-mythos-preview", "claude-haiku-5-5"]) {
      expect(usesAdaptiveThinking(m), m).toBe(true);
    }
    for (const m of ["claude-sonnet-4-5", "claude-opus-4-5-20251101", "claude-haiku-4-5", "claude-sonnet-4-20250514", "claude-3-7-sonnet-latest", "mock-model"]) {
      expect(usesAdaptiveThinking(m), m).toBe(false);
    }
  });

  it("asks Claude 4.6+ and 5.x to think adaptively with an effort (they reject budget_tokens), older models with a budget", async () => {
    // Through the real SDK to the mock: the body the API would get.
    const sonnet5 = await sentBody([user("x")], { model: "claude-sonnet-5-5", reasoningEffort: "medium" });
    expect(sonnet5.thinking).toEqual({ type: "adaptive", display: "summarized" });
    expect(sonnet5.output_config).toEqual({ effort: "medium" });
    expect(sonnet5.max_tokens).toBe(8192); // no budget to make room for
    expect(Object.keys(sonnet5)).toEqual(["model", "max_tokens", "system", "tools", "messages", "thinking", "output_config", "stream"]);
    expect(JSON.stringify(sonnet5)).not.toContain("budget_tokens");

    const effortOf = (model: string, reasoningEffort: "minimal" | "low" | "high" | "xhigh") =>
      (buildAnthropicRequest(baseRequest([user("x")], { model, reasoningEffort })) as unknown as Body).output_config;
    expect(effortOf("claude-opus-4-7", "xhigh")).toEqual({ effort: "xhigh" });
    expect(effortOf("claude-sonnet-5-5", "xhigh")).toEqual({ effort: "xhigh" });
    expect(effortOf("claude-sonnet-4-6", "xhigh")).toEqual({ effort: "high" }); // 4.6 has no xhigh
    expect(effortOf("claude-haiku-5-5", "xhigh")).toEqual({ effort: "high" });
    expect(effortOf("claude-opus-4-6", "minimal")).toEqual({ effort: "low" });
    expect(effortOf("claude-opus-4-6", "high")).toEqual({ effort: "high" });

    // No effort asked: nothing about thinking, whatever the model.
    const plain = buildAnthropicRequest(baseRequest([user("x")], { model: "claude-sonnet-5-5", reasoningEffort: "none" })) as unknown as Body;
    expect(plain.thinking).toBeUndefined();
    expect(plain.output_config).toBeUndefined();

    const haiku45 = await sentBody([user("x")], { model: "claude-haiku-4-5", reasoningEffort: "medium" });
    expect(haiku45.thinking).toEqual({ type: "enabled", budget_tokens: ANTHROPIC_THINKING_BUDGETS.medium });
    expect(haiku45.output_config).toBeUndefined();
  });

  it("places cache breakpoints: system, last block, and every 20 blocks back, at most 4", async () => {
    const msgs: Message[] = [user("start")];
    for (let i = 0; i < 30; i++) msgs.push(assistantCalls(`t${i}`), toolResult(`t${i}`, "shell", `out ${i}`));
    const body = await sentBody(msgs);
    expect(countCacheControl(body)).toBe(4);
    expect(body.system).toEqual([{ type: "text", text: "You are a careful coding agent.", cache_control: { type: "ephemeral" } }]);
    const flat = body.messages.flatMap((m) => m.content);
    const marked = flat.map((b, i) => ("cache_control" in b ? i : -1)).filter((i) => i >= 0);
    const last = flat.length - 1;
    expect(marked).toEqual([last - 40, last - 20, last]);

    // No system prompt: the breakpoint for the static prefix goes on the last tool instead.
    const noSystem = buildAnthropicRequest(baseRequest([user("x")], { system: "" })) as unknown as Body;
    expect(noSystem.system).toBeUndefined();
    expect(noSystem.tools?.at(-1)).toMatchObject({ name: "shell", cache_control: { type: "ephemeral" } });
    expect(countCacheControl(noSystem)).toBe(2);
  });

  it("never puts a breakpoint on a thinking block", () => {
    const msgs = applyMessageBreakpoints(
      [
        { role: "user", content: [{ type: "text", text: "q" }] },
        { role: "assistant", content: [{ type: "thinking", thinking: "t", signature: "s" }] },
      ],
      3,
    );
    expect(msgs[1].content).toEqual([{ type: "thinking", thinking: "t", signature: "s" }]);
    expect(msgs[0].content).toEqual([{ type: "text", text: "q", cache_control: { type: "ephemeral" } }]);
  });
});

describe("anthropic stream assembly", () => {
  const start = (id = "msg_1"): RawMessageStreamEvent =>
    ({
      type: "message_start",
      message: {
        id,
        type: "message",
        role: "assistant",
        model: "m",
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { input_tokens: 5, output_tokens: 1, cache_read_input_tokens: 100, cache_creation_input_tokens: 20 },
      },
    }) as unknown as RawMessageStreamEvent;
  const ev = (e: object) => e as RawMessageStreamEvent;

  it("maps Anthropic block indices to positions in our content, skipping unknown blocks", () => {
    const a = new AnthropicStreamAssembler();
    const out = [
      start(),
      ev({ type: "content_block_start", index: 0, content_block: { type: "redacted_thinking", data: "opaque" } }),
      ev({ type: "content_block_stop", index: 0 }),
      ev({ type: "content_block_start", index: 1, content_block: { type: "server_tool_use", id: "srv", name: "web_search", input: {} } }),
      ev({ type: "content_block_stop", index: 1 }),
      ev({ type: "content_block_start", index: 2, content_block: { type: "text", text: "" } }),
      ev({ type: "content_block_delta", index: 2, delta: { type: "text_delta", text: "hi" } }),
      ev({ type: "content_block_stop", index: 2 }),
      ev({ type: "content_block_start", index: 3, content_block: { type: "tool_use", id: "tu", name: "noargs", input: {} } }),
      ev({ type: "content_block_stop", index: 3 }),
      ev({ type: "message_delta", delta: { stop_reason: "refusal", stop_sequence: null }, usage: { output_tokens: 9, output_tokens_details: { thinking_tokens: 4 } } }),
      ev({ type: "message_stop" }),
    ].flatMap((e) => a.handle(e));
    expect(out).toEqual([
      { type: "textDelta", index: 1, delta: "hi" },
      { type: "toolCallStart", index: 2, id: "tu", name: "noargs" },
    ]);
    const done = a.finish();
    expect(done.message.content).toEqual([
      { type: "reasoning", text: "", summary: [], redactedData: "opaque" },
      { type: "text", text: "hi" },
      { type: "toolCall", id: "tu", name: "noargs", arguments: "{}" },
    ]);
    expect(done.stopReason).toBe("refusal");
    expect(done.usage).toEqual({
      inputTokens: 125,
      cachedInputTokens: 100,
      cacheWriteInputTokens: 20,
      outputTokens: 9,
      reasoningOutputTokens: 4,
      totalTokens: 134,
    });
  });

  it("a stream without message_stop is incomplete, even if it ended cleanly", () => {
    const a = new AnthropicStreamAssembler();
    a.handle(start());
    a.handle(ev({ type: "message_delta", delta: { stop_reason: "end_turn", stop_sequence: null }, usage: { output_tokens: 1 } }));
    expect(() => a.finish()).toThrow(ProviderError);
    try {
      a.finish();
    } catch (e) {
      expect((e as ProviderError).kind).toBe("streamIncomplete");
    }
  });
});
