/**
 * Drives the real @anthropic-ai/sdk and openai clients against the mock model server, so the mock
 * is proven to speak each wire format well enough for the SDKs' own accumulators, and so the
 * SDKs' behaviour under each fault is pinned down (the provider adapters depend on it).
 */
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { startMockModelServer, type ChunkSentInfo, type MockModelServer, type StreamEndInfo } from "./support/mock-model-server.js";

let mock: MockModelServer;
let anthropic: Anthropic;
let openai: OpenAI;
// Malformed-chunk tests make the SDKs log the bad chunk at error level; these clients stay quiet.
let quietAnthropic: Anthropic;
let quietOpenai: OpenAI;

beforeAll(async () => {
  mock = await startMockModelServer();
  anthropic = new Anthropic({ baseURL: mock.anthropicBaseUrl, apiKey: "test", maxRetries: 0 });
  openai = new OpenAI({ baseURL: mock.openaiBaseUrl, apiKey: "test", maxRetries: 0 });
  quietAnthropic = new Anthropic({ baseURL: mock.anthropicBaseUrl, apiKey: "test", maxRetries: 0, logLevel: "off" });
  quietOpenai = new OpenAI({ baseURL: mock.openaiBaseUrl, apiKey: "test", maxRetries: 0, logLevel: "off" });
});
afterAll(() => mock.close());
beforeEach(() => {
  mock.reset();
  mock.onChunk = undefined;
  mock.onStreamEnd = undefined;
});

const userMsg = [{ role: "user" as const, content: "hi" }];
const anthropicStream = (client = anthropic, signal?: AbortSignal) =>
  client.messages.stream({ model: "claude-mock", max_tokens: 100, messages: userMsg }, { signal });
const responsesStream = (client = openai, signal?: AbortSignal) => client.responses.stream({ model: "gpt-mock", input: "hi" }, { signal });
const chatStream = (client = openai, opts: { usage?: boolean; signal?: AbortSignal } = {}) =>
  client.chat.completions.stream(
    { model: "gpt-mock", messages: userMsg, ...(opts.usage === false ? {} : { stream_options: { include_usage: true } }) },
    { signal: opts.signal },
  );

/** Collects an async iterable, returning what arrived and what (if anything) it threw. */
async function drain<T>(it: AsyncIterable<T>): Promise<{ items: T[]; error: unknown }> {
  const items: T[] = [];
  try {
    for await (const x of it) items.push(x);
    return { items, error: undefined };
  } catch (error) {
    return { items, error };
  }
}

describe("Anthropic Messages", () => {
  it("streams the text chunks and records the request with its raw body", async () => {
    mock.enqueue({ text: ["Hel", "lo ", "world"] });
    const stream = anthropicStream();
    const deltas: string[] = [];
    stream.on("text", (d) => deltas.push(d));
    const msg = await stream.finalMessage();

    expect(deltas).toEqual(["Hel", "lo ", "world"]);
    expect(msg).toMatchObject({ id: "msg_mock_1", model: "claude-mock", stop_reason: "end_turn", content: [{ type: "text", text: "Hello world" }] });

    const [req] = mock.requests;
    expect(req).toMatchObject({ seq: 1, api: "anthropic", path: "/v1/messages" });
    // SDK 1.x authenticates with a bearer token, not x-api-key.
    expect(req.headers.authorization).toBe("Bearer test");
    expect(req.headers["anthropic-version"]).toBeTruthy();
    expect(req.body).toMatchObject({ model: "claude-mock", stream: true, messages: userMsg });
    expect(JSON.parse(req.rawBody)).toEqual(req.body);
  });

  it("streams thinking with a signature, text and a tool call, with cache usage split out", async () => {
    mock.enqueue({
      reasoning: { text: ["Let me ", "think."], signature: "sig-abc" },
      text: "Reading.",
      toolCalls: [{ name: "read_file", arguments: { path: "src/a.ts", limit: 20 } }],
      usage: { input: 100, cached: 60, cacheWrite: 10, output: 20 },
    });
    const stream = anthropicStream();
    const { items: events, error } = await drain(stream);
    expect(error).toBeUndefined();
    const msg = await stream.finalMessage();

    expect(msg.content.map((b) => b.type)).toEqual(["thinking", "text", "tool_use"]);
    expect(msg.content[0]).toMatchObject({ type: "thinking", thinking: "Let me think.", signature: "sig-abc" });
    expect(msg.content[2]).toMatchObject({ type: "tool_use", id: "toolu_mock_1_0", name: "read_file", input: { path: "src/a.ts", limit: 20 } });
    expect(msg.stop_reason).toBe("tool_use");
    // Anthropic's input_tokens excludes cache reads and writes.
    expect(msg.usage).toMatchObject({ input_tokens: 30, cache_read_input_tokens: 60, cache_creation_input_tokens: 10, output_tokens: 20 });

    const jsonDeltas = events.filter((e) => e.type === "content_block_delta" && e.delta.type === "input_json_delta");
    expect(jsonDeltas.length).toBeGreaterThanOrEqual(2);
  });

  it("defaults the thinking signature and maps maxTokens to max_tokens", async () => {
    mock.enqueue({ reasoning: { summary: ["Plan"] }, text: "partial", stop: "maxTokens" });
    const msg = await anthropicStream().finalMessage();
    expect(msg.content[0]).toMatchObject({ type: "thinking", thinking: "Plan", signature: "sig_mock_1" });
    expect(msg.stop_reason).toBe("max_tokens");
  });

  it("refuses a thinking form the model does not take with the API's 400, before consuming a step", async () => {
    const ask = (model: string, thinking: Anthropic.Messages.ThinkingConfigParam) =>
      quietAnthropic.messages.create({ model, max_tokens: 4096, messages: userMsg, thinking });
    const budget = { type: "enabled", budget_tokens: 1024 } as const;
    for (const model of ["claude-sonnet-5-5", "claude-opus-4-7", "claude-mythos-preview", "claude-opus-5"]) {
      const err = await ask(model, budget).catch((e: unknown) => e);
      expect(err, model).toBeInstanceOf(Anthropic.BadRequestError);
      expect((err as Error).message).toContain("thinking.type.enabled");
    }
    const adaptiveOnOld = await ask("claude-haiku-4-5-20251001", { type: "adaptive" }).catch((e: unknown) => e);
    expect(adaptiveOnOld).toBeInstanceOf(Anthropic.BadRequestError);
    mock.enqueue({ text: "thought" });
    // Each model's own form is accepted, and the enqueued reply is still there for it.
    const ok = await ask("claude-sonnet-5-5", { type: "adaptive" });
    expect(ok.content[0]).toMatchObject({ type: "text", text: "thought" });
    expect((await ask("claude-sonnet-4-6", budget)).stop_reason).toBe("end_turn");
    expect((await ask("claude-haiku-4-5", budget)).stop_reason).toBe("end_turn");
  });

  it("stopReasonBeforeToolCall: message_delta(end_turn) precedes the tool_use block, which still arrives", async () => {
    mock.enqueue({ text: "x", toolCalls: [{ name: "ls", arguments: { dir: "." } }], stopReasonBeforeToolCall: true });
    const stream = anthropicStream();
    const { items: events } = await drain(stream);
    const types = events.map((e) => (e.type === "content_block_start" ? `start:${e.content_block.type}` : e.type));
    expect(types.indexOf("message_delta")).toBeLessThan(types.indexOf("start:tool_use"));
    expect(types.at(-1)).toBe("message_stop");
    const msg = await stream.finalMessage();
    expect(msg.stop_reason).toBe("end_turn");
    expect(msg.content[1]).toMatchObject({ type: "tool_use", input: { dir: "." } });
  });

  it("429 with Retry-After surfaces as RateLimitError carrying the header", async () => {
    mock.enqueue({ kind: "error", status: 429, retryAfterSeconds: 7 });
    const err = await anthropicStream().finalMessage().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.RateLimitError);
    const e = err as InstanceType<typeof Anthropic.RateLimitError>;
    expect(e.status).toBe(429);
    expect(e.headers?.get("retry-after")).toBe("7");
    expect(e.error).toMatchObject({ type: "error", error: { type: "rate_limit_error" } });
  });

  it("401 → AuthenticationError; contextOverflow → BadRequestError 'prompt is too long'", async () => {
    mock.enqueue({ kind: "error", status: 401 }, { kind: "error", status: 400, contextOverflow: true });
    await expect(anthropicStream().finalMessage()).rejects.toBeInstanceOf(Anthropic.AuthenticationError);
    const err = await anthropicStream().finalMessage().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.BadRequestError);
    expect((err as Error).message).toContain("prompt is too long: 250000 tokens > 200000 maximum");
  });

  it("mid-stream `event: error` makes iteration throw an APIError without a status", async () => {
    mock.enqueue({ text: ["a", "b"], midStreamError: { afterEvents: 4 } });
    const { items, error } = await drain(anthropicStream());
    expect(items.map((e) => e.type)).toEqual(["message_start", "content_block_start", "content_block_delta"]); // ping is skipped
    expect(error).toBeInstanceOf(Anthropic.APIError);
    expect((error as InstanceType<typeof Anthropic.APIError>).status).toBeUndefined();
    expect((error as InstanceType<typeof Anthropic.APIError>).error).toMatchObject({ error: { type: "overloaded_error" } });
  });

  it("a cut stream throws 'terminated' after the events already sent", async () => {
    mock.enqueue({ text: ["a", "b", "c"], cutAfterEvents: 4 });
    const stream = anthropicStream();
    const { items, error } = await drain(stream);
    expect(items).toHaveLength(3); // message_start, content_block_start, delta "a" (ping is skipped)
    expect(error).toBeInstanceOf(Anthropic.AnthropicError);
    expect((error as Error).message).toBe("terminated");
    await expect(stream.finalMessage()).rejects.toThrow("terminated");

    // The low-level iterator surfaces undici's TypeError itself.
    mock.enqueue({ text: ["a"], cutAfterEvents: 2 });
    const raw = await anthropic.messages.create({ model: "m", max_tokens: 5, stream: true, messages: userMsg });
    const { error: rawError } = await drain(raw);
    expect(rawError).toBeInstanceOf(TypeError);
  });

  it("a malformed chunk makes iteration throw the JSON SyntaxError", async () => {
    mock.enqueue({ text: ["a", "b"], malformedAfterEvents: 4 });
    const raw = await quietAnthropic.messages.create({ model: "m", max_tokens: 5, stream: true, messages: userMsg });
    const { items, error } = await drain(raw);
    expect(items).toHaveLength(3);
    expect(error).toBeInstanceOf(SyntaxError);
  });

  it("hang + abort: the stream helper rejects with APIUserAbortError, the raw iterator just ends", async () => {
    mock.enqueue({ kind: "hang" }, { kind: "hang" });
    const ac = new AbortController();
    const stream = anthropicStream(anthropic, ac.signal);
    await mock.waitForRequests(1); // the request is at the mock, which never answers it
    ac.abort();
    await expect(stream.finalMessage()).rejects.toBeInstanceOf(Anthropic.APIUserAbortError);

    const ac2 = new AbortController();
    const raw = await anthropic.messages.create({ model: "m", max_tokens: 5, stream: true, messages: userMsg }, { signal: ac2.signal });
    // Aborted once the hung stream's only event (message_start) has arrived.
    const { items, error } = await drain(
      (async function* () {
        for await (const e of raw) {
          yield e;
          ac2.abort();
        }
      })(),
    );
    expect(error).toBeUndefined(); // the SDK swallows abort errors in its SSE iterator
    expect(items.map((e) => e.type)).toEqual(["message_start"]);

    // The mock survives the disconnects.
    expect(await anthropicStream().finalText()).toBe("OK");
  });

  it("answers non-streaming requests with a Message", async () => {
    mock.enqueue({ text: "summary", toolCalls: [{ name: "t", arguments: { a: 1 } }] });
    const msg = await anthropic.messages.create({ model: "m", max_tokens: 5, messages: userMsg });
    expect(msg).toMatchObject({ id: "msg_mock_1", stop_reason: "tool_use", content: [{ type: "text", text: "summary" }, { type: "tool_use", id: "toolu_mock_1_0", input: { a: 1 } }] });
  });
});

describe("OpenAI Responses", () => {
  it("streams reasoning summary, reasoning text, output text and a function call; completed carries output + usage", async () => {
    mock.enqueue({
      reasoning: { summary: ["First I look.", "Then I act."], text: ["raw ", "thoughts"], encryptedContent: "enc-xyz" },
      text: ["Hi", " there"],
      toolCalls: [{ name: "read_file", arguments: { path: "a.txt" } }],
      usage: { input: 120, cached: 100, output: 30, reasoning: 12 },
    });
    const stream = responsesStream();
    const { items: events, error } = await drain(stream);
    expect(error).toBeUndefined();
    const res = await stream.finalResponse();

    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    expect(events.filter((e) => e.type === "response.output_text.delta").map((e) => e.delta)).toEqual(["Hi", " there"]);
    expect(events.filter((e) => e.type === "response.function_call_arguments.delta").length).toBeGreaterThanOrEqual(2);

    expect(res).toMatchObject({ id: "resp_mock_1", status: "completed", output_text: "Hi there" });
    expect(res.output.map((o) => o.type)).toEqual(["reasoning", "message", "function_call"]);
    expect(res.output[0]).toMatchObject({
      type: "reasoning",
      summary: [
        { type: "summary_text", text: "First I look." },
        { type: "summary_text", text: "Then I act." },
      ],
      content: [{ type: "reasoning_text", text: "raw thoughts" }],
      encrypted_content: "enc-xyz",
    });
    expect(res.output[2]).toMatchObject({ type: "function_call", call_id: "call_mock_1_0", name: "read_file", arguments: '{"path":"a.txt"}' });
    expect(res.usage).toMatchObject({
      input_tokens: 120,
      output_tokens: 30,
      total_tokens: 150,
      input_tokens_details: { cached_tokens: 100 },
      output_tokens_details: { reasoning_tokens: 12 },
    });
  });

  it("maxTokens → response.incomplete with reason max_output_tokens", async () => {
    mock.enqueue({ text: "cut sh", stop: "maxTokens" });
    const res = await responsesStream().finalResponse();
    expect(res.status).toBe("incomplete");
    expect(res.incomplete_details).toEqual({ reason: "max_output_tokens" });
    expect(res.output_text).toBe("cut sh");
  });

  it("stopReasonBeforeToolCall: a finished (empty) message item precedes the function call", async () => {
    mock.enqueue({ toolCalls: [{ name: "ls", arguments: {} }], stopReasonBeforeToolCall: true });
    const res = await responsesStream().finalResponse();
    expect(res.output.map((o) => `${o.type}:${"status" in o ? o.status : ""}`)).toEqual(["message:completed", "function_call:completed"]);
  });

  it("mid-stream error: stream() rejects with the raw `error` event object; create() yields error + response.failed", async () => {
    mock.enqueue({ text: ["a", "b"], midStreamError: { afterEvents: 5, type: "server_error", message: "boom" } });
    const stream = responsesStream();
    const { error: iterError } = await drain(stream);
    // Surprise: the helper's iterator ends quietly, and finalResponse() rejects with a plain object, not an Error.
    expect(iterError).toBeUndefined();
    const err = await stream.finalResponse().catch((e: unknown) => e);
    expect(err).not.toBeInstanceOf(Error);
    expect(err).toMatchObject({ type: "error", code: "server_error", message: "boom", sequence_number: 5 });

    mock.enqueue({ text: ["a"], midStreamError: { afterEvents: 3 } });
    const raw = await openai.responses.create({ model: "m", input: "hi", stream: true });
    const { items, error } = await drain(raw);
    expect(error).toBeUndefined();
    expect(items.slice(-2).map((e) => e.type)).toEqual(["error", "response.failed"]);
    expect(items.at(-1)).toMatchObject({ response: { status: "failed", error: { code: "server_error" } } });
  });

  it("a cut stream throws 'terminated'; a malformed chunk throws the JSON SyntaxError", async () => {
    mock.enqueue({ text: ["a", "b"], cutAfterEvents: 4 }, { text: ["a", "b"], malformedAfterEvents: 4 });
    const cut = responsesStream();
    const { items, error } = await drain(cut);
    expect(items).toHaveLength(4);
    expect((error as Error).message).toBe("terminated");
    await expect(cut.finalResponse()).rejects.toThrow("terminated");

    const raw = await quietOpenai.responses.create({ model: "m", input: "hi", stream: true });
    const malformed = await drain(raw);
    expect(malformed.items).toHaveLength(4);
    expect(malformed.error).toBeInstanceOf(SyntaxError);
  });

  it("errors: 429 with retry-after-ms, 401, context overflow", async () => {
    mock.enqueue({ kind: "error", status: 429, retryAfterMs: 1500, retryAfterSeconds: 2 }, { kind: "error", status: 401 }, { kind: "error", status: 400, contextOverflow: true });
    const rate = await responsesStream().finalResponse().catch((e: unknown) => e);
    expect(rate).toBeInstanceOf(OpenAI.RateLimitError);
    const r = rate as InstanceType<typeof OpenAI.RateLimitError>;
    expect(r.headers?.get("retry-after-ms")).toBe("1500");
    expect(r.headers?.get("retry-after")).toBe("2");
    expect(r.code).toBe("rate_limit_exceeded");

    await expect(responsesStream().finalResponse()).rejects.toBeInstanceOf(OpenAI.AuthenticationError);

    const overflow = await responsesStream().finalResponse().catch((e: unknown) => e);
    expect(overflow).toBeInstanceOf(OpenAI.BadRequestError);
    expect(overflow).toMatchObject({ status: 400, code: "context_length_exceeded", type: "invalid_request_error" });
  });

  it("hang + abort rejects with APIUserAbortError", async () => {
    mock.enqueue({ kind: "hang" });
    const ac = new AbortController();
    const stream = responsesStream(openai, ac.signal);
    await mock.waitForRequests(1); // the request is at the mock, which never answers it
    ac.abort();
    await expect(stream.finalResponse()).rejects.toBeInstanceOf(OpenAI.APIUserAbortError);
  });

  it("answers non-streaming requests with the final Response", async () => {
    mock.enqueue({ text: "sum", usage: { input: 3, output: 2 } });
    const res = await openai.responses.create({ model: "m", input: "hi" });
    expect(res).toMatchObject({ status: "completed", output_text: "sum", usage: { total_tokens: 5 } });
  });
});

describe("OpenAI Chat Completions", () => {
  it("streams reasoning, text and tool calls; usage chunk carries cached tokens", async () => {
    mock.enqueue({
      reasoning: { text: ["think ", "hard"] },
      text: ["Hi", " there"],
      toolCalls: [
        { name: "read", arguments: { path: "a.txt" } },
        { id: "call_custom", name: "ls", arguments: { dir: "src" } },
      ],
      usage: { input: 100, cached: 40, output: 7, reasoning: 3 },
    });
    const stream = chatStream();
    const { items: chunks } = await drain(stream);
    const done = await stream.finalChatCompletion();

    const delta = (c: (typeof chunks)[number]) => c.choices[0]?.delta as { content?: string; reasoning_content?: string } | undefined;
    expect(chunks.map((c) => delta(c)?.content).filter(Boolean)).toEqual(["Hi", " there"]);
    expect(chunks.map((c) => delta(c)?.reasoning_content ?? "").join("")).toBe("think hard");

    const choice = done.choices[0];
    expect(choice.finish_reason).toBe("tool_calls");
    expect(choice.message.content).toBe("Hi there");
    expect(choice.message.tool_calls).toMatchObject([
      { id: "call_mock_1_0", type: "function", function: { name: "read", arguments: '{"path":"a.txt"}' } },
      { id: "call_custom", type: "function", function: { name: "ls", arguments: '{"dir":"src"}' } },
    ]);
    // SDK quirk: unknown delta fields are Object.assign'ed, so the final message keeps only the LAST
    // reasoning_content delta. Adapters must accumulate reasoning from the chunks themselves.
    expect((choice.message as { reasoning_content?: string }).reasoning_content).toBe("hard");
    expect(done.usage).toMatchObject({ prompt_tokens: 100, completion_tokens: 7, total_tokens: 107, prompt_tokens_details: { cached_tokens: 40 } });
    expect(chunks.at(-1)?.choices).toEqual([]);
  });

  it("sends no usage chunk unless stream_options.include_usage is set (like the real API)", async () => {
    const done = await chatStream(openai, { usage: false }).finalChatCompletion();
    expect(done.choices[0].message.content).toBe("OK");
    expect(done.usage).toBeUndefined();
  });

  it("sends string arguments raw (even invalid JSON), split over 2+ deltas", async () => {
    mock.enqueue({ toolCalls: [{ name: "edit", arguments: '{"path": "a' }] });
    const stream = chatStream();
    const { items: chunks } = await drain(stream);
    const argDeltas = chunks.flatMap((c) => c.choices[0]?.delta?.tool_calls ?? []).filter((t) => t.function?.arguments);
    expect(argDeltas.length).toBeGreaterThanOrEqual(2);
    const done = await stream.finalChatCompletion();
    expect(done.choices[0].message.tool_calls?.[0]).toMatchObject({ function: { arguments: '{"path": "a' } });
  });

  it("stopReasonBeforeToolCall: finish_reason 'stop' arrives first and the tool call still follows", async () => {
    mock.enqueue({ text: "x", toolCalls: [{ name: "ls", arguments: {} }], stopReasonBeforeToolCall: true });
    const stream = chatStream();
    const { items: chunks } = await drain(stream);
    const finishAt = chunks.findIndex((c) => c.choices[0]?.finish_reason);
    const toolAt = chunks.findIndex((c) => c.choices[0]?.delta?.tool_calls);
    expect(finishAt).toBeGreaterThanOrEqual(0);
    expect(finishAt).toBeLessThan(toolAt);
    const done = await stream.finalChatCompletion();
    expect(done.choices[0].finish_reason).toBe("stop");
    expect(done.choices[0].message.tool_calls).toHaveLength(1);
  });

  it("maxTokens → finish_reason length", async () => {
    mock.enqueue({ text: "abc", stop: "maxTokens" });
    const done = await chatStream().finalChatCompletion();
    expect(done.choices[0].finish_reason).toBe("length");
  });

  it("faults: mid-stream error chunk → APIError; cut → 'terminated'; malformed → SyntaxError", async () => {
    mock.enqueue(
      { text: ["a", "b"], midStreamError: { afterEvents: 2, type: "server_error", message: "boom" } },
      { text: ["a", "b"], cutAfterEvents: 2 },
      { text: ["a", "b"], malformedAfterEvents: 2 },
    );
    const mid = await drain(chatStream());
    expect(mid.items).toHaveLength(2);
    expect(mid.error).toBeInstanceOf(OpenAI.APIError);
    expect(mid.error).toMatchObject({ status: undefined, message: "boom", type: "server_error" });

    const cut = await drain(chatStream());
    expect(cut.items).toHaveLength(2);
    expect((cut.error as Error).message).toBe("terminated");

    const raw = await quietOpenai.chat.completions.create({ model: "m", stream: true, messages: userMsg });
    const malformed = await drain(raw);
    expect(malformed.items).toHaveLength(2);
    expect(malformed.error).toBeInstanceOf(SyntaxError);
  });

  it("errors: 429 Retry-After, 401, context overflow", async () => {
    mock.enqueue({ kind: "error", status: 429, retryAfterSeconds: 3 }, { kind: "error", status: 401 }, { kind: "error", status: 400, contextOverflow: true });
    const rate = await chatStream().finalChatCompletion().catch((e: unknown) => e);
    expect(rate).toBeInstanceOf(OpenAI.RateLimitError);
    expect((rate as InstanceType<typeof OpenAI.RateLimitError>).headers?.get("retry-after")).toBe("3");
    await expect(chatStream().finalChatCompletion()).rejects.toBeInstanceOf(OpenAI.AuthenticationError);
    await expect(chatStream().finalChatCompletion()).rejects.toMatchObject({ status: 400, code: "context_length_exceeded", param: "messages" });
  });

  it("hang + abort: the stream helper rejects, the raw iterator ends quietly", async () => {
    mock.enqueue({ kind: "hang" }, { kind: "hang" });
    const ac = new AbortController();
    const stream = chatStream(openai, { signal: ac.signal });
    await mock.waitForRequests(1); // the request is at the mock, which never answers it
    ac.abort();
    await expect(stream.finalChatCompletion()).rejects.toBeInstanceOf(OpenAI.APIUserAbortError);

    const ac2 = new AbortController();
    // The hung stream's headers have come (create resolved); its body never will.
    const raw = await openai.chat.completions.create({ model: "m", stream: true, messages: userMsg }, { signal: ac2.signal });
    ac2.abort();
    expect(await drain(raw)).toEqual({ items: [], error: undefined });
  });

  it("answers non-streaming requests with a ChatCompletion", async () => {
    mock.enqueue({ text: "sum", toolCalls: [{ name: "t", arguments: { a: 1 } }] });
    const done = await openai.chat.completions.create({ model: "m", messages: userMsg });
    expect(done.choices[0]).toMatchObject({ finish_reason: "tool_calls", message: { content: "sum", tool_calls: [{ id: "call_mock_1_0", function: { arguments: '{"a":1}' } }] } });
  });
});

describe("the server", () => {
  it("shares one FIFO across endpoints, then falls back to the default reply", async () => {
    mock.enqueue({ text: "one" }, { text: "two" }, { text: "three" });
    expect(mock.pending()).toBe(3);
    const chat = await chatStream().finalChatCompletion();
    const msg = await anthropicStream().finalMessage();
    const res = await responsesStream().finalResponse();
    expect([chat.choices[0].message.content, (msg.content[0] as { text: string }).text, res.output_text]).toEqual(["one", "two", "three"]);
    expect(mock.pending()).toBe(0);
    expect(mock.requests.map((r) => [r.seq, r.api, r.path])).toEqual([
      [1, "openai-chat", "/v1/chat/completions"],
      [2, "anthropic", "/v1/messages"],
      [3, "openai-responses", "/v1/responses"],
    ]);
    expect(await anthropicStream().finalText()).toBe("OK");
  });

  it("a gate pauses the stream after N events until it resolves", async () => {
    let open!: () => void;
    const wait = new Promise<void>((r) => (open = r));
    const sent: ChunkSentInfo[] = [];
    mock.onChunk = (info) => sent.push(info);
    mock.enqueue({ text: ["a", "b", "c"], gate: { afterEvents: 4, wait } });

    const deltas: string[] = [];
    const stream = anthropicStream();
    stream.on("text", (d) => deltas.push(d));
    const finished = stream.finalMessage();
    await expect.poll(() => deltas).toEqual(["a"]);
    // The mock writes the frames before a gate in one go (no chunkDelayMs): had the gate not held,
    // the frames after it would have gone out with "a", before the client could read it.
    expect(sent).toHaveLength(4); // message_start, content_block_start, ping, "a" — then nothing
    open();
    const msg = await finished;
    expect(deltas).toEqual(["a", "b", "c"]);
    expect(msg.stop_reason).toBe("end_turn");
  });

  it("onChunk reports text deltas with hrtime stamps; chunkDelayMs waits that long before each later frame", async () => {
    // What the stream does, in order: frames sent, and the timers of chunkDelayMs (17 ms, a delay
    // nothing else here asks for) set and fired. Ordering, not elapsed time: a timer fires no
    // earlier than its delay, however fast or slow the machine.
    const log: string[] = [];
    const sent: ChunkSentInfo[] = [];
    mock.onChunk = (info) => {
      sent.push(info);
      log.push(`frame ${info.eventIndex}`);
    };
    mock.enqueue({ text: ["x", "y", "z"], chunkDelayMs: 17 });
    const realSetTimeout = globalThis.setTimeout;
    const spy = vi.spyOn(globalThis, "setTimeout").mockImplementation(((fn: (...args: unknown[]) => void, ms?: number, ...args: unknown[]) => {
      if (ms !== 17) return realSetTimeout(fn, ms, ...args);
      log.push("delay set");
      return realSetTimeout(() => {
        log.push("delay over");
        fn(...args);
      }, ms);
    }) as typeof setTimeout);
    try {
      await chatStream().finalChatCompletion();
    } finally {
      spy.mockRestore();
    }
    expect(sent.map((s) => s.eventIndex)).toEqual(sent.map((_, i) => i));
    expect(sent.every((s) => s.requestSeq === 1 && s.api === "openai-chat")).toBe(true);
    const text = sent.filter((s) => s.textDelta !== undefined);
    expect(text.map((s) => s.textDelta)).toEqual(["x", "y", "z"]);
    expect(sent.every((s, i) => i === 0 || s.sentAtNs > sent[i - 1]!.sentAtNs)).toBe(true);
    expect(sent.length).toBeGreaterThan(3);
    expect(log).toEqual(sent.flatMap((_, i) => (i === 0 ? ["frame 0"] : ["delay set", "delay over", `frame ${i}`])));
  });

  it("is deterministic: the same step gives the same bytes", async () => {
    const once = async () => {
      mock.reset();
      mock.enqueue({ reasoning: { summary: ["s"] }, text: ["a", "b"], toolCalls: [{ name: "t", arguments: { k: 1 } }] });
      const res = await fetch(`${mock.openaiBaseUrl}/responses`, { method: "POST", body: JSON.stringify({ model: "m", input: "hi", stream: true }) });
      return res.text();
    };
    const first = await once();
    expect(first).toContain("event: response.completed");
    expect(await once()).toBe(first);
  });

  it("lists models in each provider's format and answers unknown routes with 404 JSON", async () => {
    const openaiModels = [];
    for await (const m of openai.models.list()) openaiModels.push(m);
    expect(openaiModels).toEqual([{ id: "mock-model", object: "model", created: 1_700_000_000, owned_by: "mock" }]);
    const anthropicModels = [];
    for await (const m of anthropic.models.list()) anthropicModels.push(m);
    expect(anthropicModels).toMatchObject([{ type: "model", id: "mock-model" }]);

    const res = await fetch(`${mock.url}/v1/nope`, { method: "POST", body: "{}" });
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ error: { type: "invalid_request_error" } });
    expect(mock.requests).toHaveLength(0);
  });

  it("waitForRequests resolves on arrival and rejects on timeout", async () => {
    const waiting = mock.waitForRequests(1, 2_000);
    await chatStream().finalChatCompletion();
    await waiting;
    await expect(mock.waitForRequests(5, 20)).rejects.toThrow(/5 requests/);
  });

  it("stops writing when the client disconnects mid-stream", async () => {
    const sent: ChunkSentInfo[] = [];
    mock.onChunk = (info) => sent.push(info);
    mock.enqueue({ text: Array.from({ length: 20 }, (_, i) => `t${i}`), chunkDelayMs: 5 });
    const ac = new AbortController();
    const stream = chatStream(openai, { signal: ac.signal });
    const streamEnd = new Promise<StreamEndInfo>((resolve) => (mock.onStreamEnd = resolve));
    stream.on("content", () => ac.abort());
    await expect(stream.finalChatCompletion()).rejects.toBeInstanceOf(OpenAI.APIUserAbortError);
    // The mock stopped without finishing the response (nothing is written after onStreamEnd).
    expect(await streamEnd).toEqual({ requestSeq: 1, api: "openai-chat", ended: false });
    expect(await anthropicStream().finalText()).toBe("OK"); // still serving
  });

  it("close() ends hung streams and resolves promptly", async () => {
    const own = await startMockModelServer({ defaultReply: { text: "unused" } });
    own.enqueue({ kind: "hang" });
    const client = new OpenAI({ baseURL: own.openaiBaseUrl, apiKey: "test", maxRetries: 0 });
    const stream = client.chat.completions.stream({ model: "m", messages: userMsg });
    const outcome = stream.finalChatCompletion().then(
      () => "resolved",
      (e: unknown) => (e as Error).message,
    );
    await own.waitForRequests(1);
    // The hung stream never ends by itself: close() resolves only because it ends it.
    await own.close();
    expect(await outcome).toBe("terminated");
  });
});
