/** Chat Completions-specific request conversion and stream assembly. */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { ChatCompletionChunk } from "openai/resources/chat/completions";
import type { Message } from "../../src/agent/messages.js";
import { buildChatRequest, ChatStreamAssembler, convertMessagesToChat } from "../../src/providers/openai-chat.js";
import type { ProviderOptions } from "../../src/providers/index.js";
import { startMockModelServer, type MockModelServer } from "../support/mock-model-server.js";
import { baseRequest, collect, developer, providerFor, replayDeltas, user } from "./helpers.js";

let mock: MockModelServer;
beforeAll(async () => {
  mock = await startMockModelServer();
});
afterAll(async () => {
  await mock.close();
});
beforeEach(() => mock.reset());

async function sentBody(messages: Message[], extra = {}, opts: ProviderOptions = {}): Promise<Record<string, unknown>> {
  mock.enqueue({ text: "ok" });
  await collect(providerFor("openai-chat", mock, opts), baseRequest(messages, extra));
  const r = mock.requests.at(-1)!;
  expect(r.path).toBe("/v1/chat/completions");
  return r.body as Record<string, unknown>;
}

const conversation: Message[] = [
  developer("<environment>cwd=/repo</environment>"),
  user("Do it."),
  {
    role: "assistant",
    content: [
      { type: "reasoning", text: "thinking out loud", summary: [] },
      { type: "toolCall", id: "call_1", name: "shell", arguments: '{"cmd":"ls"}' },
    ],
  },
  { role: "toolResult", toolCallId: "call_1", toolName: "shell", isError: false, content: [{ type: "text", text: "a.ts" }, { type: "text", text: "b.ts" }] },
  { role: "assistant", content: [{ type: "text", text: "Two files." }] },
];

describe("openai chat request conversion", () => {
  it("maps roles, tool calls and results; never sends reasoning back", async () => {
    const body = await sentBody(conversation, { maxOutputTokens: 500 });
    expect(body.messages).toEqual([
      { role: "system", content: "You are a careful coding agent." },
      { role: "developer", content: "<environment>cwd=/repo</environment>" },
      { role: "user", content: "Do it." },
      { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "shell", arguments: '{"cmd":"ls"}' } }] },
      { role: "tool", tool_call_id: "call_1", content: "a.ts\nb.ts" },
      { role: "assistant", content: "Two files." },
    ]);
    expect((body.tools as unknown[])[1]).toEqual({
      type: "function",
      function: { name: "shell", description: "Run a command", parameters: { type: "object", properties: { cmd: { type: "string" } }, required: ["cmd"], additionalProperties: false } },
    });
    expect(body.max_tokens).toBe(500);
    expect(body.stream).toBe(true);
    expect(body.stream_options).toEqual({ include_usage: true });
    expect(JSON.stringify(body)).not.toContain("thinking out loud");
  });

  it("developer role is configurable; prompt_cache_key only on request", async () => {
    const sys = await sentBody(conversation, { cacheKey: "thread-1" }, { chatDeveloperRole: "system" });
    expect((sys.messages as Array<{ role: string }>).map((m) => m.role)).toEqual(["system", "system", "user", "assistant", "tool", "assistant"]);
    expect(sys.prompt_cache_key).toBeUndefined();
    const keyed = await sentBody(conversation, { cacheKey: "thread-1" }, { sendPromptCacheKeyToChat: true });
    expect(keyed.prompt_cache_key).toBe("thread-1");
    expect(Object.keys(keyed)).toEqual(["model", "messages", "tools", "prompt_cache_key", "stream", "stream_options"]);
  });

  it("sends user images as image_url parts", () => {
    const msgs = convertMessagesToChat("", [
      { role: "user", content: [{ type: "text", text: "see" }, { type: "image", url: "data:image/png;base64,AAAA" }] },
    ]);
    expect(msgs).toEqual([
      {
        role: "user",
        content: [
          { type: "text", text: "see" },
          { type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } },
        ],
      },
    ]);
  });

  it("reasoning effort is forwarded only when set", () => {
    expect(buildChatRequest(baseRequest([user("x")], { reasoningEffort: "low" })).reasoning_effort).toBe("low");
    expect(buildChatRequest(baseRequest([user("x")], { reasoningEffort: "none" })).reasoning_effort).toBeUndefined();
  });
});

const chunk = (delta: object, finish_reason: string | null = null): ChatCompletionChunk =>
  ({ id: "chatcmpl-1", object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta, finish_reason, logprobs: null }] }) as ChatCompletionChunk;

describe("openai chat stream assembly", () => {

  it("assembles interleaved tool-call deltas by index, even after finish_reason", () => {
    const a = new ChatStreamAssembler();
    const events = [
      chunk({ role: "assistant", reasoning: "hmm " }),
      chunk({ reasoning_content: "ok" }),
      chunk({ content: "Calling." }),
      chunk({ tool_calls: [{ index: 0, id: "c0", type: "function", function: { name: "read_file", arguments: '{"pa' } }] }),
      chunk({ tool_calls: [{ index: 1, id: "c1", type: "function", function: { name: "shell", arguments: "" } }] }),
      chunk({ tool_calls: [{ index: 1, function: { arguments: '{"cmd":' } }] }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: 'th":"a"}' } }] }),
      chunk({}, "tool_calls"),
      chunk({ tool_calls: [{ index: 1, function: { arguments: '"ls"}' } }] }), // after finish_reason
      { id: "chatcmpl-1", object: "chat.completion.chunk", created: 1, model: "m", choices: [], usage: { prompt_tokens: 9, completion_tokens: 4, total_tokens: 13 } } as ChatCompletionChunk,
    ].flatMap((c) => a.handle(c));
    const done = a.finish();
    expect(done.message.content).toEqual([
      // The field it came in is kept: it goes back there on a message with tool calls.
      { type: "reasoning", text: "hmm ok", summary: [], chatField: "reasoning" },
      { type: "text", text: "Calling." },
      { type: "toolCall", id: "c0", name: "read_file", arguments: '{"path":"a"}' },
      { type: "toolCall", id: "c1", name: "shell", arguments: '{"cmd":"ls"}' },
    ]);
    expect(done.stopReason).toBe("toolUse");
    expect(done.usage).toMatchObject({ inputTokens: 9, cachedInputTokens: 0, outputTokens: 4, totalTokens: 13 });
    const replay = replayDeltas(events);
    expect(replay.get(0)?.text).toBe("hmm ok");
    expect(replay.get(2)?.args).toBe('{"path":"a"}');
    expect(replay.get(3)?.args).toBe('{"cmd":"ls"}');
  });

  it("gives id-less tool calls a stable id; no finish_reason → streamIncomplete", () => {
    const a = new ChatStreamAssembler();
    a.handle(chunk({ tool_calls: [{ index: 0, function: { name: "shell", arguments: "{}" } }] }));
    a.handle(chunk({}, "stop"));
    const done = a.finish();
    expect(done.message.content).toEqual([{ type: "toolCall", id: "call_0", name: "shell", arguments: "{}" }]);
    expect(done.stopReason).toBe("toolUse");

    const b = new ChatStreamAssembler();
    b.handle(chunk({ content: "partial" }));
    expect(() => b.finish()).toThrow(/without a finish_reason/);
  });

  it("finish_reason length → maxTokens", () => {
    const a = new ChatStreamAssembler();
    a.handle(chunk({ content: "abc" }, "length"));
    expect(a.finish().stopReason).toBe("maxTokens");
  });
});

describe("openai chat: the streams compatible servers really send", () => {
  it("Mistral magistral: delta.content as typed parts — text is text, thinking parts are reasoning, nothing becomes [object Object]", async () => {
    mock.enqueue({ reasoning: { text: ["Let me ", "think."] }, text: ["The answer", " is 4."], chatContentParts: true });
    const { events, done } = await collect(providerFor("openai-chat", mock), baseRequest([user("2+2?")]));
    expect(done.message.content).toEqual([
      { type: "reasoning", text: "Let me think.", summary: [] },
      { type: "text", text: "The answer is 4." },
    ]);
    expect(JSON.stringify(events)).not.toContain("[object Object]");
    // Sent back next turn as plain text, the reasoning (a thinking part, not a server field) not at all.
    mock.enqueue({ text: "ok" });
    await collect(providerFor("openai-chat", mock), baseRequest([user("2+2?"), done.message, user("sure?")]));
    const sent = (mock.requests.at(-1)!.body.messages as any[]).find((m) => m.role === "assistant");
    expect(sent).toEqual({ role: "assistant", content: "The answer is 4." });
  });

  it("an unknown part type is skipped, a bare string part list still works", () => {
    const a = new ChatStreamAssembler();
    a.handle(chunk({ content: [{ type: "image_url", image_url: { url: "x" } }, { type: "text", text: "hi" }] } as any));
    a.handle(chunk({ content: [{ type: "thinking", thinking: "plain string thinking" }] } as any, "stop"));
    expect(a.finish().message.content).toEqual([
      { type: "text", text: "hi" },
      { type: "reasoning", text: "plain string thinking", summary: [] },
    ]);
  });

  it("DeepSeek/Qwen-style reasoning_content goes back on the assistant message with the tool calls, where the server needs it", async () => {
    mock.chatRequiresReasoningContent = true;
    try {
      mock.enqueue({ reasoning: { text: "I should list the files." }, toolCalls: [{ id: "call_ls", name: "shell", arguments: { cmd: "ls" } }] });
      const first = await collect(providerFor("openai-chat", mock), baseRequest([user("what is here?")]));
      expect(first.done.message.content[0]).toEqual({ type: "reasoning", text: "I should list the files.", summary: [], chatField: "reasoning_content" });
      mock.enqueue({ text: "Two files." });
      const history: Message[] = [user("what is here?"), first.done.message, { role: "toolResult", toolCallId: "call_ls", toolName: "shell", content: [{ type: "text", text: "a b" }], isError: false }];
      const second = await collect(providerFor("openai-chat", mock), baseRequest(history));
      expect(second.done.message.content).toEqual([{ type: "text", text: "Two files." }]);
      const sent = (mock.requests.at(-1)!.body.messages as any[]).find((m) => m.role === "assistant");
      expect(sent).toEqual({
        role: "assistant",
        content: null,
        reasoning_content: "I should list the files.",
        tool_calls: [{ id: "call_ls", type: "function", function: { name: "shell", arguments: '{"cmd":"ls"}' } }],
      });
    } finally {
      mock.chatRequiresReasoningContent = false;
    }
  });

  it("reasoning in `reasoning` (vLLM, OpenRouter, Ollama) goes back in that field; a message without tool calls sends none", () => {
    const msgs = convertMessagesToChat("", [
      { role: "assistant", content: [{ type: "reasoning", text: "r1", summary: [], chatField: "reasoning" }, { type: "toolCall", id: "c", name: "shell", arguments: "{}" }] },
      { role: "toolResult", toolCallId: "c", toolName: "shell", content: [{ type: "text", text: "ok" }], isError: false },
      { role: "assistant", content: [{ type: "reasoning", text: "r2", summary: [], chatField: "reasoning_content" }, { type: "text", text: "done" }] },
    ]);
    expect(msgs[0]).toMatchObject({ role: "assistant", reasoning: "r1" });
    expect(msgs[2]).toEqual({ role: "assistant", content: "done" });
  });

  it("finish_reason content_filter and a refusal delta are refusals, with the provider's words", () => {
    const a = new ChatStreamAssembler();
    a.handle(chunk({ content: "partial" }, "content_filter"));
    expect(a.finish()).toMatchObject({ stopReason: "refusal", stopDetail: 'finish_reason "content_filter"' });
    const b = new ChatStreamAssembler();
    b.handle(chunk({ refusal: "I can't help with that." } as any, "stop"));
    const done = b.finish();
    expect(done).toMatchObject({ stopReason: "refusal", stopDetail: "a refusal delta" });
    expect(done.message.content).toEqual([{ type: "text", text: "I can't help with that." }]);
  });
});
