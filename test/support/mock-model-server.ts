/**
 * A mock model server on 127.0.0.1 that speaks the real wire formats of
 *   - Anthropic Messages      POST /v1/messages          (SDK base URL without /v1)
 *   - OpenAI Responses        POST /v1/responses         (SDK base URL with /v1)
 *   - OpenAI Chat Completions POST /v1/chat/completions  (SDK base URL with /v1)
 * so the real `@anthropic-ai/sdk` and `openai` clients can be driven end to end.
 *
 * Tests script it with a FIFO of steps shared by all endpoints: every model request consumes the
 * next step and the step is rendered in the format of the endpoint that was hit. Everything is
 * deterministic (ids derive from the request's sequence number, timestamps are fixed).
 *
 * How a reply becomes a stream: each API has a pure renderer turning a MockReply into a list of SSE
 * frames; one writer then sends the frames and injects faults (cut, malformed, error, gate) at a
 * given event index, so every fault behaves the same way across the three formats.
 *
 * Fault positions count every SSE frame written, starting at 0, including Anthropic's `ping` and
 * Chat's `data: [DONE]`; "after N events" means frames 0..N-1 went out. Responses sequence_number
 * equals that frame index.
 *
 * Ids when the step gives none (seq is the 1-based request number, reset by reset()):
 *   Anthropic msg_mock_<seq>, toolu_mock_<seq>_<i>; Chat chatcmpl-mock-<seq>, call_mock_<seq>_<i>;
 *   Responses resp_mock_<seq>, items rs_/msg_/fc_mock_<seq>_<outputIndex>, call_id call_mock_<seq>_<i>.
 *
 * Fidelity notes (the real APIs behave like this, so the mock does too):
 *   - A request whose body lacks `stream: true` gets the non-streaming JSON shape.
 *   - Chat Completions only sends the final usage chunk when the request asked for it with
 *     `stream_options: { include_usage: true }`; every chunk then carries `usage: null` until it.
 *   - Anthropic sends a `ping` event after the first content_block_start (SDKs must skip it).
 *   - Anthropic answers 400 to a thinking form the model does not take: `thinking.type: "enabled"`
 *     (budget_tokens) on Claude 5.x, Opus 4.7+ and Mythos, which only think adaptively, and
 *     `"adaptive"` on Claude 4.5 and older, which only know budgets (see anthropicThinkingRefusal).
 */
import http from "node:http";
import type { AddressInfo, Socket } from "node:net";

export interface MockToolCall {
  id?: string;
  name: string;
  /** An object is JSON.stringify'd; a string is sent raw (it may be invalid JSON). */
  arguments: unknown;
}

export interface MockReply {
  kind?: "reply";
  /** Assistant text; an array gives the delta chunks in order (a string is one delta). */
  text?: string | string[];
  reasoning?: { summary?: string[]; text?: string | string[]; signature?: string; encryptedContent?: string };
  /** Reasoning after the text instead of before it (Anthropic interleaved thinking; a Responses reasoning item after the message). */
  reasoningAfterText?: boolean;
  /** Emitted after reasoning and text; arguments are streamed in 2+ delta chunks. */
  toolCalls?: MockToolCall[];
  /**
   * Default "end" (tool_use / tool_calls when toolCalls are present); "maxTokens" → max_tokens /
   * length / response.incomplete (max_output_tokens); "refusal" → Anthropic stop_reason "refusal",
   * Chat finish_reason "content_filter", Responses response.incomplete with `incompleteReason`
   * (default "content_filter"). What the reply streamed before (text, tool calls) still goes out.
   */
  stop?: "end" | "maxTokens" | "refusal";
  /** Responses: incomplete_details.reason of a "refusal" stop. */
  incompleteReason?: string;
  /**
   * Text the model sends before `text` as commentary: Responses gets two message items with
   * `phase: "commentary"` and `phase: "final_answer"` (as gpt-5 codex models send them); Anthropic
   * a text block before the answer's; Chat a delta before the answer's.
   */
  commentary?: string;
  /** Chat: `delta.content` as typed parts (Mistral magistral): text parts, and the reasoning as `thinking` parts. */
  chatContentParts?: boolean;
  /** Chat: the delta field that carries the reasoning (default reasoning_content). */
  chatReasoningField?: "reasoning_content" | "reasoning";
  /** `input` is the total input including cached tokens; each API gets its own split. */
  usage?: { input?: number; output?: number; cached?: number; cacheWrite?: number; reasoning?: number };
  /** Delay between SSE events. */
  chunkDelayMs?: number;
  /**
   * Fault: the stop reason arrives before the tool calls, which still follow before the real end.
   *   - Anthropic: message_delta (stop_reason "end_turn") is sent before the tool_use blocks; message_stop comes last.
   *   - Chat: a chunk with finish_reason "stop" is sent before the tool_call deltas; no later finish_reason.
   *   - Responses: there is no stop reason before the end, so a completed `message` item (empty when
   *     there is no text) is always emitted and finished before the function_call items.
   */
  stopReasonBeforeToolCall?: boolean;
  /** Fault: destroy the socket after N SSE events (no final event, no chunked terminator). */
  cutAfterEvents?: number;
  /** Fault: after N events write a frame whose `data:` is not valid JSON, then end the response cleanly. */
  malformedAfterEvents?: number;
  /** Fault: after N events send the API's in-stream error, then end the response. */
  midStreamError?: { afterEvents: number; type?: string; message?: string };
  /** Pause after N events until `wait` resolves (or the client goes away). */
  gate?: { afterEvents: number; wait: Promise<void> };
  /** Provider message/response id; defaults to one derived from the request seq. */
  id?: string;
}

export interface MockError {
  kind: "error";
  status: number;
  retryAfterSeconds?: number;
  retryAfterMs?: number;
  message?: string;
  /** The provider's "prompt too long" 400 body. */
  contextOverflow?: boolean;
  /** The error body's type (Anthropic error.type, OpenAI error.type), instead of the one the status implies. */
  type?: string;
  /** OpenAI error.code, instead of the one the status implies (e.g. "insufficient_quota" on a 429). */
  code?: string;
}

/**
 * 200 + SSE headers (Anthropic: plus message_start), then nothing until the client disconnects.
 * `beforeHeaders`: not even the headers (a model that accepted the connection and went silent).
 */
export interface MockHang {
  kind: "hang";
  beforeHeaders?: boolean;
}

export type MockStep = MockReply | MockError | MockHang;

export type MockApi = "anthropic" | "openai-responses" | "openai-chat";

export interface RecordedRequest {
  seq: number;
  api: MockApi;
  path: string;
  headers: Record<string, string>;
  body: any;
  rawBody: string;
  receivedAtMs: number;
}

export interface ChunkSentInfo {
  requestSeq: number;
  api: MockApi;
  eventIndex: number;
  textDelta?: string;
  /** process.hrtime.bigint() right after the write. */
  sentAtNs: bigint;
}

export interface StreamEndInfo {
  requestSeq: number;
  api: MockApi;
  /** Whether the response was ended (all of it written, or a fault that ends it). */
  ended: boolean;
}

export interface MockModelServer {
  /** http://127.0.0.1:PORT */
  url: string;
  /** `url` (no /v1), for `new Anthropic({ baseURL })`. */
  anthropicBaseUrl: string;
  /** `url + "/v1"`, for `new OpenAI({ baseURL })`. */
  openaiBaseUrl: string;
  /** Every POST to a model endpoint, in arrival order. */
  requests: RecordedRequest[];
  enqueue(...steps: MockStep[]): void;
  pending(): number;
  waitForRequests(n: number, timeoutMs?: number): Promise<void>;
  onChunk?: (info: ChunkSentInfo) => void;
  /**
   * Called once a streamed reply is over: nothing more is written for that request afterwards.
   * `ended` is false when the stream stopped without ending the response (the client left, or a
   * cut fault).
   */
  onStreamEnd?: (info: StreamEndInfo) => void;
  /**
   * The model's context window in tokens (null: unlimited). A request whose size — its raw body,
   * at 4 characters per token — exceeds it is rejected with the provider's real overflow error
   * (Anthropic "prompt is too long", OpenAI `context_length_exceeded`) without consuming a step,
   * and a reply without scripted input usage reports that size as its input tokens.
   */
  contextLimit: number | null;
  /** Requests rejected for exceeding `contextLimit`. */
  overflowed: RecordedRequest[];
  /**
   * Chat Completions as DeepSeek's thinking mode behaves: an assistant message with `tool_calls`
   * but no `reasoning_content` is rejected with its 400 (the reasoning of a tool-calling exchange
   * must be sent back). Off by default.
   */
  chatRequiresReasoningContent: boolean;
  /**
   * Decides the reply to a request from its content (tried before the queue; undefined: the queue
   * decides): for concurrent turns, whose requests arrive in no fixed order.
   */
  respond?: (request: RecordedRequest) => MockStep | undefined;
  reset(): void;
  close(): Promise<void>;
}

/** The mock's token count of a request body (see MockModelServer.contextLimit). */
export const mockTokens = (rawBody: string) => Math.ceil(rawBody.length / 4);

export interface MockModelServerOptions {
  /** Used when the queue is empty. Default `{ text: "OK" }`. */
  defaultReply?: MockReply;
  port?: number;
  /** Model ids listed by GET /v1/models. Default ["mock-model"]. */
  models?: string[];
}

/** Fixed timestamps keep recorded outputs reproducible. */
const CREATED_UNIX = 1_700_000_000;
const CREATED_ISO = "2023-11-14T22:13:20Z";

const DEFAULT_USAGE = { input: 10, output: 5, cached: 0, cacheWrite: 0, reasoning: 0 };

/** One SSE frame: `event:` line when `event` is set, then `data:` (objects are JSON-encoded). */
interface Frame {
  event?: string;
  data: unknown;
  /** Assistant text carried by this frame, reported to onChunk. */
  textDelta?: string;
}

/** What a renderer needs to know about the request. */
interface RenderCtx {
  seq: number;
  model: string;
  body: any;
}

interface ToolCallPlan {
  id: string;
  name: string;
  args: string;
  argChunks: string[];
}

// ---------------------------------------------------------------------------------------------
// Shared helpers

function chunksOf(value: string | string[] | undefined): string[] {
  if (value === undefined) return [];
  return Array.isArray(value) ? value : [value];
}

/** Splits on code points (never inside a surrogate pair) into 2 chunks, or 3 when long enough. */
function splitArgs(s: string): string[] {
  const cps = Array.from(s);
  const parts = cps.length >= 12 ? 3 : 2;
  const size = Math.ceil(cps.length / parts);
  const out: string[] = [];
  for (let i = 0; i < parts; i++) out.push(cps.slice(i * size, (i + 1) * size).join(""));
  return out;
}

function planToolCalls(reply: MockReply, idPrefix: string, seq: number): ToolCallPlan[] {
  return (reply.toolCalls ?? []).map((tc, i) => {
    const args = typeof tc.arguments === "string" ? tc.arguments : JSON.stringify(tc.arguments ?? {});
    return { id: tc.id ?? `${idPrefix}_mock_${seq}_${i}`, name: tc.name, args, argChunks: splitArgs(args) };
  });
}

/** Anthropic and Chat have no separate summary: the reasoning text, or else the summary parts joined. */
function thinkingChunks(reply: MockReply): string[] {
  const r = reply.reasoning;
  if (!r) return [];
  if (r.text !== undefined) return chunksOf(r.text);
  return (r.summary ?? []).map((part, i) => (i === 0 ? part : `\n\n${part}`));
}

function usageOf(reply: MockReply) {
  return { ...DEFAULT_USAGE, ...reply.usage };
}

function parseArgsObject(args: string): unknown {
  try {
    return JSON.parse(args);
  } catch {
    return args; // deliberately not an object: the caller asked for invalid JSON
  }
}

// ---------------------------------------------------------------------------------------------
// Anthropic Messages

function anthropicStopReason(reply: MockReply): string {
  if (reply.stop === "maxTokens") return "max_tokens";
  if (reply.stop === "refusal") return "refusal";
  return reply.toolCalls?.length ? "tool_use" : "end_turn";
}

function anthropicUsage(reply: MockReply) {
  const u = usageOf(reply);
  return {
    input_tokens: Math.max(0, u.input - u.cached - u.cacheWrite),
    cache_creation_input_tokens: u.cacheWrite,
    cache_read_input_tokens: u.cached,
    output_tokens: u.output,
  };
}

function anthropicMessageStart(ctx: RenderCtx, reply: MockReply): Frame {
  return {
    event: "message_start",
    data: {
      type: "message_start",
      message: {
        id: reply.id ?? `msg_mock_${ctx.seq}`,
        type: "message",
        role: "assistant",
        model: ctx.model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { ...anthropicUsage(reply), output_tokens: 1 },
      },
    },
  };
}

function renderAnthropic(ctx: RenderCtx, reply: MockReply): Frame[] {
  const frames: Frame[] = [anthropicMessageStart(ctx, reply)];
  const ev = (type: string, rest: object, textDelta?: string): Frame => ({ event: type, data: { type, ...rest }, textDelta });
  let index = 0;
  let pinged = false;
  const startBlock = (block: object) => {
    frames.push(ev("content_block_start", { index, content_block: block }));
    // Real streams carry a ping right after the first block starts.
    if (!pinged) frames.push(ev("ping", {}));
    pinged = true;
  };
  const delta = (d: object, textDelta?: string) => frames.push(ev("content_block_delta", { index, delta: d }, textDelta));
  const stopBlock = () => frames.push(ev("content_block_stop", { index: index++ }));

  const thinking = () => {
    if (!reply.reasoning) return;
    startBlock({ type: "thinking", thinking: "", signature: "" });
    for (const t of thinkingChunks(reply)) delta({ type: "thinking_delta", thinking: t });
    delta({ type: "signature_delta", signature: reply.reasoning.signature ?? `sig_mock_${ctx.seq}` });
    stopBlock();
  };
  if (!reply.reasoningAfterText) thinking();
  for (const text of [chunksOf(reply.commentary), chunksOf(reply.text)]) {
    if (!text.length) continue;
    startBlock({ type: "text", text: "" });
    for (const t of text) delta({ type: "text_delta", text: t }, t);
    stopBlock();
  }
  if (reply.reasoningAfterText) thinking();
  const messageDelta = ev("message_delta", {
    delta: { stop_reason: reply.stopReasonBeforeToolCall ? "end_turn" : anthropicStopReason(reply), stop_sequence: null },
    usage: { output_tokens: usageOf(reply).output },
  });
  if (reply.stopReasonBeforeToolCall) frames.push(messageDelta);
  for (const tc of planToolCalls(reply, "toolu", ctx.seq)) {
    startBlock({ type: "tool_use", id: tc.id, name: tc.name, input: {} });
    for (const c of tc.argChunks) delta({ type: "input_json_delta", partial_json: c });
    stopBlock();
  }
  if (!pinged) frames.push(ev("ping", {}));
  if (!reply.stopReasonBeforeToolCall) frames.push(messageDelta);
  frames.push(ev("message_stop", {}));
  return frames;
}

function anthropicMessageJson(ctx: RenderCtx, reply: MockReply): object {
  const content: object[] = [];
  if (reply.reasoning) {
    content.push({ type: "thinking", thinking: thinkingChunks(reply).join(""), signature: reply.reasoning.signature ?? `sig_mock_${ctx.seq}` });
  }
  if (reply.commentary) content.push({ type: "text", text: reply.commentary });
  const text = chunksOf(reply.text);
  if (text.length) content.push({ type: "text", text: text.join("") });
  for (const tc of planToolCalls(reply, "toolu", ctx.seq)) {
    content.push({ type: "tool_use", id: tc.id, name: tc.name, input: parseArgsObject(tc.args) });
  }
  return {
    id: reply.id ?? `msg_mock_${ctx.seq}`,
    type: "message",
    role: "assistant",
    model: ctx.model,
    content,
    stop_reason: anthropicStopReason(reply),
    stop_sequence: null,
    usage: anthropicUsage(reply),
  };
}

function anthropicErrorType(status: number): string {
  const byStatus: Record<number, string> = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    504: "timeout_error",
    529: "overloaded_error",
  };
  return byStatus[status] ?? (status >= 500 ? "api_error" : "invalid_request_error");
}

// ---------------------------------------------------------------------------------------------
// OpenAI Responses

function responsesUsage(reply: MockReply) {
  const u = usageOf(reply);
  return {
    input_tokens: u.input,
    input_tokens_details: { cached_tokens: u.cached },
    output_tokens: u.output,
    output_tokens_details: { reasoning_tokens: u.reasoning },
    total_tokens: u.input + u.output,
  };
}

function responseObject(ctx: RenderCtx, reply: MockReply, fields: object): Record<string, unknown> {
  const b = ctx.body ?? {};
  return {
    id: reply.id ?? `resp_mock_${ctx.seq}`,
    object: "response",
    created_at: CREATED_UNIX,
    status: "in_progress",
    background: false,
    error: null,
    incomplete_details: null,
    instructions: b.instructions ?? null,
    max_output_tokens: b.max_output_tokens ?? null,
    model: ctx.model,
    output: [],
    parallel_tool_calls: b.parallel_tool_calls ?? true,
    previous_response_id: b.previous_response_id ?? null,
    prompt_cache_key: b.prompt_cache_key ?? null,
    reasoning: { effort: b.reasoning?.effort ?? null, summary: b.reasoning?.summary ?? null },
    store: b.store ?? true,
    temperature: 1,
    text: { format: { type: "text" } },
    tool_choice: b.tool_choice ?? "auto",
    tools: b.tools ?? [],
    top_p: 1,
    truncation: "disabled",
    usage: null,
    user: null,
    metadata: {},
    ...fields,
  };
}

/**
 * The Responses stream, plus the finished output items (for response.completed and for the
 * non-streaming JSON). Sequence numbers start at 0 and are assigned here, in order.
 */
function renderResponses(ctx: RenderCtx, reply: MockReply): { frames: Frame[]; output: Record<string, unknown>[]; final: Record<string, unknown> } {
  const frames: Frame[] = [];
  let seqNo = 0;
  const ev = (type: string, rest: object, textDelta?: string) =>
    frames.push({ event: type, data: { type, sequence_number: seqNo++, ...rest }, textDelta });
  const output: Record<string, unknown>[] = [];
  const truncated = reply.stop === "maxTokens" || reply.stop === "refusal";
  const incompleteReason = reply.stop === "refusal" ? (reply.incompleteReason ?? "content_filter") : "max_output_tokens";

  ev("response.created", { response: responseObject(ctx, reply, {}) });
  ev("response.in_progress", { response: responseObject(ctx, reply, {}) });

  const r = reply.reasoning;
  const reasoningItem = () => {
    if (!r) return;
    const output_index = output.length;
    const item_id = `rs_mock_${ctx.seq}_${output_index}`;
    ev("response.output_item.added", { output_index, item: { id: item_id, type: "reasoning", summary: [] } });
    const summary = (r.summary ?? []).map((part, summary_index) => {
      ev("response.reasoning_summary_part.added", { item_id, output_index, summary_index, part: { type: "summary_text", text: "" } });
      for (const d of splitArgs(part)) ev("response.reasoning_summary_text.delta", { item_id, output_index, summary_index, delta: d });
      ev("response.reasoning_summary_text.done", { item_id, output_index, summary_index, text: part });
      ev("response.reasoning_summary_part.done", { item_id, output_index, summary_index, part: { type: "summary_text", text: part } });
      return { type: "summary_text", text: part };
    });
    const item: Record<string, unknown> = { id: item_id, type: "reasoning", summary };
    if (r.text !== undefined) {
      const full = chunksOf(r.text).join("");
      const at = { item_id, output_index, content_index: 0 };
      ev("response.content_part.added", { ...at, part: { type: "reasoning_text", text: "" } });
      for (const d of chunksOf(r.text)) ev("response.reasoning_text.delta", { ...at, delta: d });
      ev("response.reasoning_text.done", { ...at, text: full });
      ev("response.content_part.done", { ...at, part: { type: "reasoning_text", text: full } });
      item.content = [{ type: "reasoning_text", text: full }];
    }
    if (r.encryptedContent !== undefined) item.encrypted_content = r.encryptedContent;
    ev("response.output_item.done", { output_index, item });
    output.push(item);
  };
  if (!reply.reasoningAfterText) reasoningItem();

  const toolCalls = planToolCalls(reply, "call", ctx.seq);
  const message = (text: string[], phase: string | null, last: boolean) => {
    const output_index = output.length;
    const item_id = `msg_mock_${ctx.seq}_${output_index}`;
    const full = text.join("");
    const at = { item_id, output_index, content_index: 0 };
    const phased = phase ? { phase } : {};
    ev("response.output_item.added", {
      output_index,
      item: { id: item_id, type: "message", status: "in_progress", content: [], role: "assistant", ...phased },
    });
    ev("response.content_part.added", { ...at, part: { type: "output_text", annotations: [], logprobs: [], text: "" } });
    for (const d of text) ev("response.output_text.delta", { ...at, delta: d, logprobs: [] }, d);
    ev("response.output_text.done", { ...at, text: full, logprobs: [] });
    const part = { type: "output_text", annotations: [], logprobs: [], text: full };
    ev("response.content_part.done", { ...at, part });
    const item = { id: item_id, type: "message", status: truncated && last ? "incomplete" : "completed", content: [part], role: "assistant", ...phased };
    ev("response.output_item.done", { output_index, item });
    output.push(item);
  };
  const text = chunksOf(reply.text);
  if (reply.commentary) message(chunksOf(reply.commentary), "commentary", false);
  if (text.length || (reply.stopReasonBeforeToolCall && toolCalls.length)) message(text, reply.commentary ? "final_answer" : null, toolCalls.length === 0);
  if (reply.reasoningAfterText) reasoningItem();

  toolCalls.forEach((tc, i) => {
    const output_index = output.length;
    const item_id = `fc_mock_${ctx.seq}_${output_index}`;
    const base = { id: item_id, type: "function_call", call_id: tc.id, name: tc.name };
    ev("response.output_item.added", { output_index, item: { ...base, status: "in_progress", arguments: "" } });
    for (const d of tc.argChunks) ev("response.function_call_arguments.delta", { item_id, output_index, delta: d });
    ev("response.function_call_arguments.done", { item_id, output_index, name: tc.name, arguments: tc.args });
    const last = i === toolCalls.length - 1;
    const item = { ...base, status: truncated && last ? "incomplete" : "completed", arguments: tc.args };
    ev("response.output_item.done", { output_index, item });
    output.push(item);
  });

  const final = responseObject(ctx, reply, {
    status: truncated ? "incomplete" : "completed",
    incomplete_details: truncated ? { reason: incompleteReason } : null,
    output,
    usage: responsesUsage(reply),
  });
  ev(truncated ? "response.incomplete" : "response.completed", { response: final });
  return { frames, output, final };
}

// ---------------------------------------------------------------------------------------------
// OpenAI Chat Completions

function chatFinishReason(reply: MockReply): string {
  if (reply.stop === "maxTokens") return "length";
  if (reply.stop === "refusal") return "content_filter";
  return reply.toolCalls?.length ? "tool_calls" : "stop";
}

function chatUsage(reply: MockReply) {
  const u = usageOf(reply);
  return {
    prompt_tokens: u.input,
    completion_tokens: u.output,
    total_tokens: u.input + u.output,
    prompt_tokens_details: { cached_tokens: u.cached, audio_tokens: 0 },
    completion_tokens_details: { reasoning_tokens: u.reasoning, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 },
  };
}

function renderChat(ctx: RenderCtx, reply: MockReply): Frame[] {
  const includeUsage = ctx.body?.stream_options?.include_usage === true;
  const base = {
    id: reply.id ?? `chatcmpl-mock-${ctx.seq}`,
    object: "chat.completion.chunk",
    created: CREATED_UNIX,
    model: ctx.model,
    system_fingerprint: "fp_mock",
    // With include_usage every chunk carries `usage: null` until the final usage chunk.
    ...(includeUsage ? { usage: null } : {}),
  };
  const frames: Frame[] = [];
  const chunk = (delta: object, finish_reason: string | null = null, textDelta?: string) =>
    frames.push({ data: { ...base, choices: [{ index: 0, delta, logprobs: null, finish_reason }] }, textDelta });

  chunk({ role: "assistant", content: "", refusal: null });
  const parts = reply.chatContentParts === true;
  const thinking = () => {
    for (const t of thinkingChunks(reply)) {
      if (parts) chunk({ content: [{ type: "thinking", thinking: [{ type: "text", text: t }] }] });
      else chunk({ [reply.chatReasoningField ?? "reasoning_content"]: t });
    }
  };
  if (!reply.reasoningAfterText) thinking();
  for (const t of [...chunksOf(reply.commentary), ...chunksOf(reply.text)]) chunk({ content: parts ? [{ type: "text", text: t }] : t }, null, t);
  if (reply.reasoningAfterText) thinking();
  if (reply.stopReasonBeforeToolCall) chunk({}, "stop");
  planToolCalls(reply, "call", ctx.seq).forEach((tc, index) => {
    chunk({ tool_calls: [{ index, id: tc.id, type: "function", function: { name: tc.name, arguments: "" } }] });
    for (const c of tc.argChunks) chunk({ tool_calls: [{ index, function: { arguments: c } }] });
  });
  if (!reply.stopReasonBeforeToolCall) chunk({}, chatFinishReason(reply));
  if (includeUsage) frames.push({ data: { ...base, choices: [], usage: chatUsage(reply) } });
  frames.push({ data: "[DONE]" });
  return frames;
}

function chatCompletionJson(ctx: RenderCtx, reply: MockReply): object {
  const tools = planToolCalls(reply, "call", ctx.seq);
  const text = [...chunksOf(reply.commentary), ...chunksOf(reply.text)];
  const reasoning = thinkingChunks(reply);
  const message: Record<string, unknown> = { role: "assistant", content: text.length ? text.join("") : null, refusal: null };
  if (reasoning.length) message[reply.chatReasoningField ?? "reasoning_content"] = reasoning.join("");
  if (tools.length) message.tool_calls = tools.map((tc) => ({ id: tc.id, type: "function", function: { name: tc.name, arguments: tc.args } }));
  return {
    id: reply.id ?? `chatcmpl-mock-${ctx.seq}`,
    object: "chat.completion",
    created: CREATED_UNIX,
    model: ctx.model,
    system_fingerprint: "fp_mock",
    choices: [{ index: 0, message, logprobs: null, finish_reason: chatFinishReason(reply) }],
    usage: chatUsage(reply),
  };
}

function openaiErrorTypeAndCode(status: number): { type: string; code: string | null } {
  if (status === 401) return { type: "invalid_request_error", code: "invalid_api_key" };
  if (status === 403) return { type: "permission_error", code: null };
  if (status === 404) return { type: "invalid_request_error", code: "model_not_found" };
  if (status === 429) return { type: "requests", code: "rate_limit_exceeded" };
  if (status >= 500) return { type: "server_error", code: null };
  return { type: "invalid_request_error", code: null };
}

// ---------------------------------------------------------------------------------------------
// The server

const ROUTES: Record<string, MockApi> = {
  "/v1/messages": "anthropic",
  "/v1/responses": "openai-responses",
  "/v1/chat/completions": "openai-chat",
};

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** A gate that rejects opens the same as one that resolves (a test's failure should not hang the stream). */
function settled(p: Promise<void>): Promise<void> {
  return p.then(
    () => undefined,
    () => undefined,
  );
}

function flatHeaders(h: http.IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(h)) if (v !== undefined) out[k] = Array.isArray(v) ? v.join(", ") : v;
  return out;
}

function readBody(req: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

function sendJson(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  if (res.destroyed) return;
  res.writeHead(status, { "content-type": "application/json", ...headers });
  res.end(JSON.stringify(body));
}

function requestIdHeader(api: MockApi, seq: number): Record<string, string> {
  return api === "anthropic" ? { "request-id": `req_mock_${seq}` } : { "x-request-id": `req_mock_${seq}` };
}

class MockModelServerImpl implements MockModelServer {
  url = "";
  anthropicBaseUrl = "";
  openaiBaseUrl = "";
  readonly requests: RecordedRequest[] = [];
  onChunk?: (info: ChunkSentInfo) => void;
  onStreamEnd?: (info: StreamEndInfo) => void;
  contextLimit: number | null = null;
  readonly overflowed: RecordedRequest[] = [];
  chatRequiresReasoningContent = false;
  respond?: (request: RecordedRequest) => MockStep | undefined;

  private readonly queue: MockStep[] = [];
  private readonly sockets = new Set<Socket>();
  private readonly waiters = new Set<() => void>();
  private nextSeq = 1;
  private readonly server: http.Server;

  constructor(
    private readonly defaultReply: MockReply,
    private readonly models: string[],
  ) {
    this.server = http.createServer((req, res) => {
      this.handle(req, res).catch((err: unknown) => {
        // A bug here (or a throwing onChunk hook) must not take the test process down.
        console.error("mock-model-server: handler failed", err);
        res.destroy();
      });
    });
    this.server.on("connection", (socket) => {
      this.sockets.add(socket);
      socket.on("close", () => this.sockets.delete(socket));
    });
  }

  async listen(port: number): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.server.once("error", reject);
      this.server.listen(port, "127.0.0.1", () => resolve());
    });
    const { port: actual } = this.server.address() as AddressInfo;
    this.url = `http://127.0.0.1:${actual}`;
    this.anthropicBaseUrl = this.url;
    this.openaiBaseUrl = `${this.url}/v1`;
  }

  enqueue(...steps: MockStep[]): void {
    this.queue.push(...steps);
  }

  pending(): number {
    return this.queue.length;
  }

  waitForRequests(n: number, timeoutMs = 5_000): Promise<void> {
    if (this.requests.length >= n) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const check = () => {
        if (this.requests.length < n) return;
        this.waiters.delete(check);
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        this.waiters.delete(check);
        reject(new Error(`mock-model-server: waited ${timeoutMs} ms for ${n} requests, got ${this.requests.length}`));
      }, timeoutMs);
      this.waiters.add(check);
    });
  }

  reset(): void {
    this.queue.length = 0;
    this.requests.length = 0;
    this.overflowed.length = 0;
    this.nextSeq = 1;
  }

  async close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const s of this.sockets) s.destroy();
    await closed;
  }

  // -------------------------------------------------------------------------------------------

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    // Writes racing a client disconnect may error; the disconnect itself is handled via `close`.
    res.on("error", () => {});
    const path = (req.url ?? "/").split("?")[0];
    const isAnthropicClient = req.headers["anthropic-version"] !== undefined;

    if (req.method === "GET" && path === "/v1/models") {
      await readBody(req);
      return this.sendModels(res, isAnthropicClient);
    }
    const api = ROUTES[path];
    if (req.method !== "POST" || !api) {
      await readBody(req);
      const message = `Unknown route: ${req.method} ${path}`;
      return sendJson(
        res,
        404,
        isAnthropicClient
          ? { type: "error", error: { type: "not_found_error", message } }
          : { error: { message, type: "invalid_request_error", param: null, code: null } },
      );
    }

    const rawBody = await readBody(req);
    let body: any = null;
    try {
      body = JSON.parse(rawBody);
    } catch {
      body = null;
    }
    const seq = this.nextSeq++;
    this.requests.push({ seq, api, path, headers: flatHeaders(req.headers), body, rawBody, receivedAtMs: Date.now() });
    for (const w of [...this.waiters]) w();

    if (body === null || typeof body !== "object") {
      return this.sendError(res, api, seq, { kind: "error", status: 400, message: "The request body is not valid JSON." });
    }
    const tokens = mockTokens(rawBody);
    if (this.contextLimit !== null && tokens > this.contextLimit) {
      this.overflowed.push(this.requests.at(-1)!);
      const limit = this.contextLimit;
      const message =
        api === "anthropic"
          ? `prompt is too long: ${tokens} tokens > ${limit} maximum`
          : api === "openai-chat"
            ? `This model's maximum context length is ${limit} tokens. However, your messages resulted in ${tokens} tokens. Please reduce the length of the messages.`
            : "Your input exceeds the context window of this model. Please adjust your input and try again.";
      return this.sendError(res, api, seq, { kind: "error", status: 400, contextOverflow: true, message });
    }
    if (api === "openai-chat" && this.chatRequiresReasoningContent && Array.isArray(body.messages)) {
      const at = body.messages.findIndex((m: any) => m?.role === "assistant" && Array.isArray(m.tool_calls) && m.tool_calls.length > 0 && typeof m.reasoning_content !== "string");
      if (at >= 0) {
        const message = `Missing \`reasoning_content\` field in the assistant message at message index ${at}. For more information, please refer to https://api-docs.deepseek.com/guides/thinking_mode#tool-calls`;
        return this.sendError(res, api, seq, { kind: "error", status: 400, message });
      }
    }
    const refusal = api === "anthropic" ? anthropicThinkingRefusal(body) : null;
    if (refusal !== null) return this.sendError(res, api, seq, { kind: "error", status: 400, message: refusal });
    let step: MockStep = this.respond?.(this.requests.at(-1)!) ?? this.queue.shift() ?? this.defaultReply;
    if (this.contextLimit !== null && step.kind !== "error" && step.kind !== "hang" && step.usage?.input === undefined) step = { ...step, usage: { ...step.usage, input: tokens } };
    const ctx: RenderCtx = { seq, model: typeof body.model === "string" ? body.model : "mock-model", body };
    const streaming = body.stream === true;

    // Resolves when the client goes away (or after we finish); used to stop hangs and gates.
    const gone = new Promise<void>((resolve) => res.on("close", () => resolve()));

    if (step.kind === "error") return this.sendError(res, api, seq, step);
    if (step.kind === "hang") {
      if (step.beforeHeaders) {
        await gone;
        return;
      }
      if (streaming) {
        this.writeSseHead(res, api, seq);
        if (api === "anthropic") this.writeFrame(res, anthropicMessageStart(ctx, {}), { requestSeq: seq, api, eventIndex: 0 });
      }
      await gone;
      return;
    }
    if (streaming) {
      await this.stream(res, api, ctx, step, gone);
      this.onStreamEnd?.({ requestSeq: seq, api, ended: res.writableEnded });
      return;
    }
    return this.respondJson(res, api, ctx, step, gone);
  }

  private sendModels(res: http.ServerResponse, anthropicFormat: boolean): void {
    if (anthropicFormat) {
      const data = this.models.map((id) => ({ type: "model", id, display_name: id, created_at: CREATED_ISO }));
      return sendJson(res, 200, { data, has_more: false, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null });
    }
    const data = this.models.map((id) => ({ id, object: "model", created: CREATED_UNIX, owned_by: "mock" }));
    return sendJson(res, 200, { object: "list", data });
  }

  private sendError(res: http.ServerResponse, api: MockApi, seq: number, step: MockError): void {
    const headers: Record<string, string> = requestIdHeader(api, seq);
    if (step.retryAfterSeconds !== undefined) headers["retry-after"] = String(step.retryAfterSeconds);
    if (step.retryAfterMs !== undefined) headers["retry-after-ms"] = String(step.retryAfterMs);
    if (api === "anthropic") {
      const type = step.type ?? (step.contextOverflow ? "invalid_request_error" : anthropicErrorType(step.status));
      const message = step.message ?? (step.contextOverflow ? "prompt is too long: 250000 tokens > 200000 maximum" : `mock ${type}`);
      return sendJson(res, step.status, { type: "error", error: { type, message }, request_id: `req_mock_${seq}` }, headers);
    }
    const error = step.contextOverflow
      ? {
          message: step.message ?? "Your input exceeds the context window of this model. Please adjust your input and try again.",
          type: "invalid_request_error",
          param: api === "openai-chat" ? "messages" : "input",
          code: "context_length_exceeded",
        }
      : {
          message: step.message ?? `mock error ${step.status}`,
          param: null,
          ...openaiErrorTypeAndCode(step.status),
          ...(step.type !== undefined ? { type: step.type } : {}),
          ...(step.code !== undefined ? { code: step.code } : {}),
        };
    return sendJson(res, step.status, { error }, headers);
  }

  private writeSseHead(res: http.ServerResponse, api: MockApi, seq: number): void {
    res.writeHead(200, {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache",
      ...requestIdHeader(api, seq),
    });
    res.flushHeaders();
  }

  /** Writes one SSE frame and reports it; returns false when the client is already gone. */
  private writeFrame(res: http.ServerResponse, frame: Frame, info: Omit<ChunkSentInfo, "sentAtNs" | "textDelta">): boolean {
    if (res.destroyed || res.writableEnded) return false;
    const data = typeof frame.data === "string" ? frame.data : JSON.stringify(frame.data);
    res.write((frame.event ? `event: ${frame.event}\n` : "") + `data: ${data}\n\n`);
    const sentAtNs = process.hrtime.bigint();
    this.onChunk?.({ ...info, ...(frame.textDelta !== undefined ? { textDelta: frame.textDelta } : {}), sentAtNs });
    return true;
  }

  private async stream(res: http.ServerResponse, api: MockApi, ctx: RenderCtx, reply: MockReply, gone: Promise<void>): Promise<void> {
    const frames = api === "anthropic" ? renderAnthropic(ctx, reply) : api === "openai-chat" ? renderChat(ctx, reply) : renderResponses(ctx, reply).frames;
    this.writeSseHead(res, api, ctx.seq);
    const info = (eventIndex: number) => ({ requestSeq: ctx.seq, api, eventIndex });

    // i is the number of events already written; faults fire "after i events".
    for (let i = 0; i <= frames.length; i++) {
      if (res.destroyed) return; // client disconnected: stop writing
      if (reply.gate && reply.gate.afterEvents === i) await Promise.race([settled(reply.gate.wait), gone]);
      if (res.destroyed) return;
      if (reply.cutAfterEvents === i) return cutConnection(res);
      if (reply.malformedAfterEvents === i) {
        this.writeFrame(res, malformedFrame(api), info(i));
        res.end();
        return;
      }
      if (reply.midStreamError && reply.midStreamError.afterEvents === i) {
        midStreamErrorFrames(api, ctx, reply, i).forEach((f, k) => this.writeFrame(res, f, info(i + k)));
        res.end();
        return;
      }
      if (i === frames.length) break;
      if (i > 0 && reply.chunkDelayMs) await sleep(reply.chunkDelayMs);
      if (!this.writeFrame(res, frames[i], info(i))) return;
    }
    res.end();
  }

  /** Non-streaming replies. Stream faults map to their nearest JSON equivalent. */
  private async respondJson(res: http.ServerResponse, api: MockApi, ctx: RenderCtx, reply: MockReply, gone: Promise<void>): Promise<void> {
    if (reply.gate) await Promise.race([settled(reply.gate.wait), gone]);
    if (reply.chunkDelayMs) await sleep(reply.chunkDelayMs);
    if (res.destroyed) return;
    if (reply.cutAfterEvents !== undefined) return cutConnection(res);
    if (reply.midStreamError) {
      const status = api === "anthropic" ? 529 : 500;
      return this.sendError(res, api, ctx.seq, { kind: "error", status, message: reply.midStreamError.message });
    }
    const body =
      api === "anthropic" ? anthropicMessageJson(ctx, reply) : api === "openai-chat" ? chatCompletionJson(ctx, reply) : renderResponses(ctx, reply).final;
    const json = JSON.stringify(body);
    if (reply.malformedAfterEvents !== undefined) {
      res.writeHead(200, { "content-type": "application/json", ...requestIdHeader(api, ctx.seq) });
      res.end(json.slice(0, Math.floor(json.length / 2)));
      return;
    }
    sendJson(res, 200, body, requestIdHeader(api, ctx.seq));
  }
}

/**
 * Drops the connection mid-response. The frames already written still reach the client (a plain
 * destroy() would discard them from the socket buffer); the chunked-encoding terminator never does.
 */
function cutConnection(res: http.ServerResponse): void {
  const socket = res.socket;
  if (!socket) return;
  socket.end(() => socket.destroy());
}

/** A frame whose data is truncated JSON. Anthropic needs an `event:` line or its SDK skips the frame unparsed. */
function malformedFrame(api: MockApi): Frame {
  if (api === "anthropic") return { event: "content_block_delta", data: '{"type":"content_block_delta","index":0,"delta":{"type":"text_' };
  if (api === "openai-responses") return { event: "response.output_text.delta", data: '{"type":"response.output_text.delta","sequence_' };
  return { data: '{"id":"chatcmpl-mock","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"tru' };
}

/**
 * The in-stream error each API really sends.
 *   - Anthropic: `event: error` {type:"error", error:{type, message}} (SDK throws APIError).
 *   - Responses: `event: error` {type:"error", code, message, param, sequence_number}, then
 *     `event: response.failed` carrying the response with status "failed" and `error`.
 *   - Chat: a `data:` chunk {error:{message, type, param, code}} (SDK throws APIError).
 */
function midStreamErrorFrames(api: MockApi, ctx: RenderCtx, reply: MockReply, eventsSent: number): Frame[] {
  const e = reply.midStreamError ?? { afterEvents: eventsSent };
  if (api === "anthropic") {
    const type = e.type ?? "overloaded_error";
    return [{ event: "error", data: { type: "error", error: { type, message: e.message ?? "Overloaded" }, request_id: `req_mock_${ctx.seq}` } }];
  }
  if (api === "openai-chat") {
    return [{ data: { error: { message: e.message ?? "The server had an error while processing your request.", type: e.type ?? "server_error", param: null, code: null } } }];
  }
  const code = e.type ?? "server_error";
  const message = e.message ?? "The server had an error while processing your request.";
  // Responses sequence numbers equal the event index, so the next ones continue from eventsSent.
  return [
    { event: "error", data: { type: "error", code, message, param: null, sequence_number: eventsSent } },
    {
      event: "response.failed",
      data: {
        type: "response.failed",
        sequence_number: eventsSent + 1,
        response: responseObject(ctx, reply, { status: "failed", error: { code, message }, usage: null }),
      },
    },
  ];
}

export async function startMockModelServer(opts: MockModelServerOptions = {}): Promise<MockModelServer> {
  const server = new MockModelServerImpl(opts.defaultReply ?? { text: "OK" }, opts.models ?? ["mock-model"]);
  await server.listen(opts.port ?? 0);
  return server;
}

/**
 * The API's 400 message for a thinking form the requested Claude model does not take, or null.
 * Written from the model documentation on its own (not shared with src/providers), so a wrong
 * version rule in the server shows up as a failed request here.
 */
export function anthropicThinkingRefusal(body: { model?: unknown; thinking?: { type?: unknown } }): string | null {
  const model = typeof body.model === "string" ? body.model.toLowerCase() : "";
  const kind = body.thinking?.type;
  if (kind !== "enabled" && kind !== "adaptive") return null;
  const v = /claude-[a-z]+-(\d+)(?:-(\d{1,2}))?(?![\d.])/.exec(model);
  const version = v ? Number(v[1]) + Number(v[2] ?? 0) / 10 : null;
  const adaptiveOnly = model.includes("claude-mythos") || (version !== null && version >= 4.7);
  const budgetOnly = version !== null && version < 4.6;
  if (kind === "enabled" && adaptiveOnly) {
    return '"thinking.type.enabled" is not supported for this model. Use "thinking.type.adaptive" and "output_config.effort" to control thinking behavior.';
  }
  if (kind === "adaptive" && budgetOnly) return '"thinking.type.adaptive" is not supported for this model.';
  return null;
}
