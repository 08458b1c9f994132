/** OpenAI Responses-specific request conversion and stream assembly. */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { ResponseStreamEvent } from "openai/resources/responses/responses";
import type { Message } from "../../src/agent/messages.js";
import { buildResponsesRequest, convertMessagesToResponsesInput, ResponsesStreamAssembler } from "../../src/providers/openai-responses.js";
import { ProviderError } from "../../src/providers/types.js";
import { startMockModelServer, type MockModelServer } from "../support/mock-model-server.js";
import { baseRequest, collect, developer, providerFor, toolResult, user } from "./helpers.js";

let mock: MockModelServer;
beforeAll(async () => {
  mock = await startMockModelServer();
});
afterAll(async () => {
  await mock.close();
});
beforeEach(() => mock.reset());

async function sentBody(messages: Message[], extra = {}): Promise<Record<string, unknown>> {
  mock.enqueue({ text: "ok" });
  await collect(providerFor("openai", mock), baseRequest(messages, extra));
  const r = mock.requests.at(-1)!;
  expect(r.path).toBe("/v1/responses");
  return r.body as Record<string, unknown>;
}

describe("openai responses request conversion", () => {
  it("sends instructions, input items, function tools, store:false and the cache key", async () => {
    const body = await sentBody(
      [
        developer("<environment>cwd=/repo</environment>"),
        user("Do it."),
        {
          role: "assistant",
          content: [
            { type: "reasoning", text: "hidden", summary: ["plan"], providerId: "rs_1", encryptedContent: "enc_1" },
            { type: "reasoning", text: "no replay data", summary: ["dropped"], providerId: "rs_2" },
            { type: "text", text: "On it." },
            { type: "toolCall", id: "call_1", name: "shell", arguments: '{"cmd":"ls"}', providerItemId: "fc_1" },
          ],
        },
        toolResult("call_1", "shell", "a.ts\nb.ts"),
      ],
      { cacheKey: "thread-42", maxOutputTokens: 2000, reasoningEffort: "high" },
    );
    expect(Object.keys(body)).toEqual([
      "model",
      "instructions",
      "input",
      "tools",
      "store",
      "stream",
      "prompt_cache_key",
      "max_output_tokens",
      "reasoning",
      "include",
    ]);
    expect(body.instructions).toBe("You are a careful coding agent.");
    expect(body.input).toEqual([
      { type: "message", role: "developer", content: [{ type: "input_text", text: "<environment>cwd=/repo</environment>" }] },
      { type: "message", role: "user", content: [{ type: "input_text", text: "Do it." }] },
      { type: "reasoning", id: "rs_1", summary: [{ type: "summary_text", text: "plan" }], encrypted_content: "enc_1" },
      { type: "message", role: "assistant", content: [{ type: "output_text", text: "On it.", annotations: [] }] },
      { type: "function_call", call_id: "call_1", name: "shell", arguments: '{"cmd":"ls"}' },
      { type: "function_call_output", call_id: "call_1", output: "a.ts\nb.ts" },
    ]);
    expect((body.tools as unknown[])[0]).toEqual({
      type: "function",
      name: "read_file",
      description: "Read a file",
      parameters: { type: "object", properties: { path: { type: "string" } }, required: ["path"], additionalProperties: false },
      strict: false,
    });
    expect(body.store).toBe(false);
    expect(body.stream).toBe(true);
    expect(body.prompt_cache_key).toBe("thread-42");
    expect(body.max_output_tokens).toBe(2000);
    expect(body.reasoning).toEqual({ effort: "high", summary: "auto" });
    expect(body.include).toEqual(["reasoning.encrypted_content"]);
  });

  it("omits reasoning, include, cache key and max_output_tokens when not asked for", async () => {
    for (const reasoningEffort of [undefined, null, "none"] as const) {
      const body = await sentBody([user("x")], { reasoningEffort });
      expect(Object.keys(body)).toEqual(["model", "instructions", "input", "tools", "store", "stream"]);
    }
  });

  it("sends images as input_image, and tool results with images as a content list", () => {
    const input = convertMessagesToResponsesInput([
      { role: "user", content: [{ type: "image", url: "data:image/png;base64,AAAA" }] },
      { role: "toolResult", toolCallId: "c", toolName: "screenshot", isError: false, content: [{ type: "text", text: "shot" }, { type: "image", url: "https://x/y.png" }] },
    ]);
    expect(input).toEqual([
      { type: "message", role: "user", content: [{ type: "input_image", image_url: "data:image/png;base64,AAAA", detail: "auto" }] },
      {
        type: "function_call_output",
        call_id: "c",
        output: [
          { type: "input_text", text: "shot" },
          { type: "input_image", image_url: "https://x/y.png", detail: "auto" },
        ],
      },
    ]);
  });

  it("uses the default max output tokens option", () => {
    expect(buildResponsesRequest(baseRequest([user("x")]), { defaultMaxOutputTokens: 777 }).max_output_tokens).toBe(777);
  });
});

const ev = (e: object) => e as ResponseStreamEvent;

describe("openai responses stream assembly", () => {
  const completed = (output: object[], extra: object = {}) =>
    ev({
      type: "response.completed",
      response: {
        id: "resp_1",
        status: "completed",
        output,
        usage: { input_tokens: 50, input_tokens_details: { cached_tokens: 30, cache_write_tokens: 5 }, output_tokens: 10, output_tokens_details: { reasoning_tokens: 3 }, total_tokens: 60 },
        ...extra,
      },
    });

  it("falls back to the final response's output when items were not streamed", () => {
    const a = new ResponsesStreamAssembler();
    const out = a.handle(
      completed([
        { id: "rs_9", type: "reasoning", summary: [{ type: "summary_text", text: "s" }], encrypted_content: "enc" },
        { id: "msg_9", type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: "final", annotations: [] }] },
        { id: "fc_9", type: "function_call", call_id: "call_9", name: "shell", arguments: '{"cmd":"x"}', status: "completed" },
      ]),
    );
    expect(out.map((e) => e.type)).toEqual(["textDelta", "toolCallStart", "toolCallDelta"]);
    const done = a.finish();
    expect(done.message).toEqual({
      role: "assistant",
      content: [
        { type: "reasoning", text: "", summary: ["s"], providerId: "rs_9", encryptedContent: "enc" },
        { type: "text", text: "final" },
        { type: "toolCall", id: "call_9", name: "shell", arguments: '{"cmd":"x"}', providerItemId: "fc_9" },
      ],
      providerMessageId: "resp_1",
      providerItemId: "msg_9",
    });
    expect(done.stopReason).toBe("toolUse");
    expect(done.usage).toEqual({ inputTokens: 50, cachedInputTokens: 30, cacheWriteInputTokens: 5, outputTokens: 10, reasoningOutputTokens: 3, totalTokens: 60 });
  });

  it("maps in-stream failures by code", () => {
    const kinds = [
      ["context_length_exceeded", "Your input exceeds the context window of this model."],
      ["rate_limit_exceeded", "Slow down"],
      ["server_error", "oops"],
      ["invalid_prompt", "bad"],
    ].map(([code, message]) => {
      try {
        new ResponsesStreamAssembler().handle(ev({ type: "response.failed", response: { id: "r", status: "failed", error: { code, message } } }));
      } catch (e) {
        return (e as ProviderError).kind;
      }
      return "none";
    });
    expect(kinds).toEqual(["contextOverflow", "rateLimited", "server", "badRequest"]);
    expect(() => new ResponsesStreamAssembler().handle(ev({ type: "error", code: null, message: "boom", param: null, sequence_number: 1 }))).toThrow(
      ProviderError,
    );
  });

  it("incomplete responses: max_output_tokens → maxTokens, content_filter → refusal; no final event → streamIncomplete", () => {
    const a = new ResponsesStreamAssembler();
    a.handle(ev({ type: "response.incomplete", response: { id: "r", status: "incomplete", incomplete_details: { reason: "content_filter" }, output: [] } }));
    expect(a.finish().stopReason).toBe("refusal");
    const b = new ResponsesStreamAssembler();
    b.handle(ev({ type: "response.created", response: { id: "r", status: "in_progress", output: [] } }));
    expect(() => b.finish()).toThrow(/stream ended before response.completed/);
  });
});

describe("openai responses: phase", () => {
  it("a commentary message and a final answer keep their phase on the blocks and go back as two messages with it", async () => {
    mock.enqueue({ commentary: "Checking the files first.", text: "Done: two files." });
    const { events, done } = await collect(providerFor("openai", mock), baseRequest([user("look")]));
    expect(done.message.content).toEqual([
      { type: "text", text: "Checking the files first.", phase: "commentary" },
      { type: "text", text: "Done: two files.", phase: "final_answer" },
    ]);
    expect(events.filter((e) => e.type === "textDelta").map((e) => (e as { phase?: string }).phase)).toEqual(["commentary", "final_answer"]);
    mock.enqueue({ text: "ok" });
    await collect(providerFor("openai", mock), baseRequest([user("look"), done.message, user("and?")]));
    const assistant = (mock.requests.at(-1)!.body.input as any[]).filter((i) => i.role === "assistant");
    expect(assistant).toEqual([
      { type: "message", role: "assistant", content: [{ type: "output_text", text: "Checking the files first.", annotations: [] }], phase: "commentary" },
      { type: "message", role: "assistant", content: [{ type: "output_text", text: "Done: two files.", annotations: [] }], phase: "final_answer" },
    ]);
  });

  it("text without a phase goes back as before (no phase key, consecutive texts in one message)", () => {
    const items = convertMessagesToResponsesInput([{ role: "assistant", content: [{ type: "text", text: "a" }, { type: "text", text: "b" }] }]);
    expect(items).toEqual([{ type: "message", role: "assistant", content: [{ type: "output_text", text: "a", annotations: [] }, { type: "output_text", text: "b", annotations: [] }] }]);
  });

  it("incomplete for any reason but max_output_tokens is a refusal with the reason; a refusal part too", () => {
    const a = new ResponsesStreamAssembler();
    a.handle(ev({ type: "response.incomplete", response: { id: "r", status: "incomplete", incomplete_details: { reason: "max_tool_calls" }, output: [] } }));
    expect(a.finish()).toMatchObject({ stopReason: "refusal", stopDetail: 'incomplete (reason "max_tool_calls")' });
  });
});
