/**
 * Anthropic Messages API adapter. Request bodies are built by pure functions (exported for
 * tests) so that the same ModelRequest always gives the same bytes, and the stream is
 * assembled here from raw SSE events rather than by the SDK's MessageStream helper, so the
 * block indices we emit are positions in our own AssistantMessage.content.
 */
import Anthropic, { APIError } from "@anthropic-ai/sdk";
import type {
  ContentBlockParam,
  ImageBlockParam,
  MessageCreateParamsStreaming,
  MessageParam,
  RawContentBlockDelta,
  RawContentBlockStartEvent,
  RawMessageStreamEvent,
  TextBlockParam,
  Tool,
  ToolResultBlockParam,
} from "@anthropic-ai/sdk/resources/messages";
import type { AssistantMessage, ImageBlock, Message, ReasoningBlock, TextBlock, Usage } from "../agent/messages.js";
import { anthropicThinking } from "./anthropic-thinking.js";
import { resolveAuth, type ResolvedAuth } from "./auth.js";
import { toProviderError, type ErrorContext } from "./errors.js";
import { argumentsAsObject, makeUsage, num, parseDataUrl, withoutUndefined } from "./shared.js";
import { SseReader, type SseMessage } from "./sse.js";
import {
  ProviderError,
  type ModelProvider,
  type ModelRequest,
  type ProviderStopReason,
  type ProviderStreamEvent,
} from "./types.js";

export interface AnthropicProviderOptions {
  apiKey?: string;
  baseURL?: string;
  defaultMaxOutputTokens?: number;
  timeoutMs?: number;
}

export const ANTHROPIC_DEFAULT_MAX_TOKENS = 8192;


/** Anthropic allows at most 4 cache breakpoints per request. */
export const MAX_CACHE_BREAKPOINTS = 4;
/** The cache lookup walks back about 20 blocks from a breakpoint, so breakpoints are spaced by that. */
export const CACHE_BREAKPOINT_STRIDE = 20;

/** Anthropic has no developer role: harness context goes on the user side, clearly tagged. */
export function renderDeveloperText(text: string): string {
  return `<developer_message>\n${text}\n</developer_message>`;
}

const EPHEMERAL = { type: "ephemeral" } as const;

type MediaType = "image/jpeg" | "image/png" | "image/gif" | "image/webp";

function imageParam(img: ImageBlock): ImageBlockParam {
  const data = parseDataUrl(img.url);
  if (data) return { type: "image", source: { type: "base64", media_type: data.mediaType as MediaType, data: data.data } };
  return { type: "image", source: { type: "url", url: img.url } };
}

/** Empty text blocks are rejected by the API, so they are dropped on the way out. */
function userSideBlocks(content: ReadonlyArray<TextBlock | ImageBlock>): Array<TextBlockParam | ImageBlockParam> {
  const out: Array<TextBlockParam | ImageBlockParam> = [];
  for (const b of content) {
    if (b.type === "text") {
      if (b.text !== "") out.push({ type: "text", text: b.text });
    } else out.push(imageParam(b));
  }
  return out;
}

function reasoningParam(r: ReasoningBlock): ContentBlockParam | null {
  // Thinking can only be replayed with the signature the API issued for it.
  if (r.signature) return { type: "thinking", thinking: r.text, signature: r.signature };
  if (r.redactedData) return { type: "redacted_thinking", data: r.redactedData };
  return null;
}

interface Turn {
  role: "user" | "assistant";
  blocks: ContentBlockParam[];
}

function toTurn(m: Message): Turn {
  switch (m.role) {
    case "user":
      return { role: "user", blocks: userSideBlocks(m.content) };
    case "developer":
      return { role: "user", blocks: [{ type: "text", text: renderDeveloperText(m.content.map((b) => b.text).join("\n")) }] };
    case "toolResult": {
      const block: ToolResultBlockParam = { type: "tool_result", tool_use_id: m.toolCallId };
      const content = userSideBlocks(m.content);
      if (content.length > 0) block.content = content;
      if (m.isError) block.is_error = true;
      return { role: "user", blocks: [block] };
    }
    case "assistant": {
      const blocks: ContentBlockParam[] = [];
      for (const b of m.content) {
        if (b.type === "text") {
          if (b.text !== "") blocks.push({ type: "text", text: b.text });
        } else if (b.type === "reasoning") {
          const r = reasoningParam(b);
          if (r) blocks.push(r);
        } else {
          blocks.push({ type: "tool_use", id: b.id, name: b.name, input: argumentsAsObject(b.arguments) });
        }
      }
      return { role: "assistant", blocks };
    }
  }
}

/**
 * Internal messages → Anthropic messages, without cache hints. Consecutive user-side messages
 * (user, developer, toolResult) are merged into one user message so roles alternate, with the
 * tool_result blocks first: the API requires them to lead the message after the tool_use.
 * Messages that end up empty (e.g. an assistant message holding only unsigned reasoning) are
 * skipped, since the API rejects empty content.
 */
export function convertMessagesToAnthropic(messages: readonly Message[]): MessageParam[] {
  const turns: Turn[] = [];
  for (const m of messages) {
    const t = toTurn(m);
    if (t.blocks.length === 0) continue;
    const prev = turns[turns.length - 1];
    if (prev && prev.role === t.role) prev.blocks.push(...t.blocks);
    else turns.push(t);
  }
  return turns.map((t) => {
    if (t.role === "user") {
      const results = t.blocks.filter((b) => b.type === "tool_result");
      const rest = t.blocks.filter((b) => b.type !== "tool_result");
      return { role: "user", content: [...results, ...rest] };
    }
    return { role: "assistant", content: t.blocks };
  });
}

/** Thinking blocks cannot carry cache_control. */
function cacheable(b: ContentBlockParam): boolean {
  return b.type !== "thinking" && b.type !== "redacted_thinking";
}

/**
 * Puts up to `budget` cache breakpoints on the messages: on the last block, then every
 * CACHE_BREAKPOINT_STRIDE blocks back (each moved back to the nearest block that can carry one),
 * so a previous request's breakpoint stays within the API's lookback window of a new one.
 * Returns new arrays; the input is not mutated.
 */
export function applyMessageBreakpoints(messages: readonly MessageParam[], budget: number): MessageParam[] {
  const flat: Array<{ m: number; b: number; ok: boolean }> = [];
  messages.forEach((msg, m) => {
    const content = msg.content;
    if (typeof content === "string") return;
    content.forEach((blk, b) => flat.push({ m, b, ok: cacheable(blk) }));
  });
  const chosen = new Set<string>();
  let floor = flat.length; // positions already covered: never pick one at or after a chosen one
  for (let k = 0; k < budget; k++) {
    let pos = flat.length - 1 - k * CACHE_BREAKPOINT_STRIDE;
    if (pos < 0) break;
    pos = Math.min(pos, floor - 1);
    while (pos >= 0 && !flat[pos].ok) pos--;
    if (pos < 0) break;
    chosen.add(`${flat[pos].m}:${flat[pos].b}`);
    floor = pos;
  }
  return messages.map((msg, m) => {
    if (typeof msg.content === "string") return msg;
    const content = msg.content.map((blk, b) => (chosen.has(`${m}:${b}`) ? ({ ...blk, cache_control: EPHEMERAL } as ContentBlockParam) : blk));
    return { role: msg.role, content } as MessageParam;
  });
}

/** The exact request body for a ModelRequest. Key order is fixed by construction. */
export function buildAnthropicRequest(req: ModelRequest, opts: AnthropicProviderOptions = {}): MessageCreateParamsStreaming {
  let maxTokens = req.maxOutputTokens ?? opts.defaultMaxOutputTokens ?? ANTHROPIC_DEFAULT_MAX_TOKENS;
  const thinking = anthropicThinking(req.model, req.reasoningEffort);
  // Thinking tokens count toward max_tokens and the API wants max_tokens > budget_tokens:
  // keep the caller's visible-output allowance on top of the budget.
  if (thinking.form === "budget" && maxTokens <= thinking.budgetTokens) maxTokens = thinking.budgetTokens + maxTokens;

  const tools: Tool[] = req.tools.map((t) => ({ name: t.name, description: t.description, input_schema: t.inputSchema as Tool["input_schema"] }));
  let prefixBreakpoints = 0;
  let system: TextBlockParam[] | undefined;
  if (req.system !== "") {
    // Tools render before system, so one breakpoint here caches tools + system.
    system = [{ type: "text", text: req.system, cache_control: EPHEMERAL }];
    prefixBreakpoints = 1;
  } else if (tools.length > 0) {
    tools[tools.length - 1] = { ...tools[tools.length - 1], cache_control: EPHEMERAL };
    prefixBreakpoints = 1;
  }
  const messages = applyMessageBreakpoints(convertMessagesToAnthropic(req.messages), MAX_CACHE_BREAKPOINTS - prefixBreakpoints);

  // One literal in wire order, an absent field `undefined` (then deleted): the bytes never depend
  // on which branches ran, and every field is checked against the SDK's type.
  const body: MessageCreateParamsStreaming = {
    model: req.model,
    max_tokens: maxTokens,
    system,
    tools: tools.length > 0 ? tools : undefined,
    messages,
    thinking: thinking.form !== "none" ? thinking.thinking : undefined,
    output_config: thinking.form === "adaptive" ? thinking.outputConfig : undefined,
    stream: true,
  };
  return withoutUndefined(body);
}

function mapStopReason(r: string | null): ProviderStopReason {
  switch (r) {
    case "end_turn":
      return "endTurn";
    case "tool_use":
      return "toolUse";
    case "max_tokens":
    case "model_context_window_exceeded": // output cut by the context window: truncated all the same
      return "maxTokens";
    case "refusal":
      return "refusal";
    default:
      return "other";
  }
}

interface RawUsage {
  input_tokens?: number | null;
  output_tokens?: number | null;
  cache_read_input_tokens?: number | null;
  cache_creation_input_tokens?: number | null;
  output_tokens_details?: { thinking_tokens?: number | null } | null;
}

/** Turns raw stream events into ProviderStreamEvents and the final message. */
export class AnthropicStreamAssembler {
  private readonly content: AssistantMessage["content"] = [];
  /** Anthropic block index → our content index (unknown block types get no entry). */
  private readonly indexMap = new Map<number, number>();
  /** tool_use input given in content_block_start, used when no input_json_delta follows. */
  private readonly startInput = new Map<number, unknown>();
  /** Text blocks started but still empty (no content index yet). */
  private readonly pendingText = new Set<number>();
  private messageId: string | undefined;
  private stopReason: string | null = null;
  private sawStop = false;
  private readonly usage = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, thinking: 0 };

  handle(ev: RawMessageStreamEvent): ProviderStreamEvent[] {
    switch (ev.type) {
      case "message_start":
        this.messageId = ev.message.id;
        this.absorbUsage(ev.message.usage);
        return [];
      case "content_block_start":
        return this.startBlock(ev.index, ev.content_block);
      case "content_block_delta":
        return this.delta(ev.index, ev.delta);
      case "content_block_stop": {
        const i = this.indexMap.get(ev.index);
        const blk = i === undefined ? undefined : this.content[i];
        if (i !== undefined && blk?.type === "toolCall" && blk.arguments === "") {
          blk.arguments = JSON.stringify(this.startInput.get(i) ?? {});
        }
        return [];
      }
      case "message_delta":
        if (ev.delta.stop_reason) this.stopReason = ev.delta.stop_reason;
        this.absorbUsage(ev.usage);
        return [];
      case "message_stop":
        this.sawStop = true;
        return [];
      default:
        return [];
    }
  }

  private startBlock(aIndex: number, cb: RawContentBlockStartEvent["content_block"]): ProviderStreamEvent[] {
    const index = this.content.length;
    switch (cb.type) {
      case "text": {
        // The block is created on its first non-empty text, so an empty text block (which the
        // API would reject on replay) never enters the message. `?? ""`: lenient servers omit it.
        this.pendingText.add(aIndex);
        return this.appendText(aIndex, cb.text ?? "");
      }
      case "thinking": {
        const block: ReasoningBlock = { type: "reasoning", text: cb.thinking ?? "", summary: [] };
        if (cb.signature) block.signature = cb.signature;
        this.content.push(block);
        this.indexMap.set(aIndex, index);
        return block.text ? [{ type: "reasoningTextDelta", index, delta: block.text }] : [];
      }
      case "redacted_thinking":
        this.content.push({ type: "reasoning", text: "", summary: [], redactedData: cb.data });
        this.indexMap.set(aIndex, index);
        return [];
      case "tool_use":
        this.content.push({ type: "toolCall", id: cb.id, name: cb.name, arguments: "" });
        this.indexMap.set(aIndex, index);
        this.startInput.set(index, cb.input);
        return [{ type: "toolCallStart", index, id: cb.id, name: cb.name }];
      default:
        // Server tools, code execution results etc. have no place in our model.
        return [];
    }
  }

  private appendText(aIndex: number, text: string): ProviderStreamEvent[] {
    if (!text) return [];
    let index = this.indexMap.get(aIndex);
    if (index === undefined) {
      if (!this.pendingText.delete(aIndex)) return [];
      index = this.content.length;
      this.content.push({ type: "text", text: "" });
      this.indexMap.set(aIndex, index);
    }
    const blk = this.content[index];
    if (blk.type !== "text") return [];
    blk.text += text;
    return [{ type: "textDelta", index, delta: text }];
  }

  private delta(aIndex: number, d: RawContentBlockDelta): ProviderStreamEvent[] {
    if (d.type === "text_delta") return this.appendText(aIndex, d.text);
    const index = this.indexMap.get(aIndex);
    if (index === undefined) return [];
    const blk = this.content[index];
    if (d.type === "thinking_delta" && blk.type === "reasoning") {
      blk.text += d.thinking;
      return d.thinking ? [{ type: "reasoningTextDelta", index, delta: d.thinking }] : [];
    }
    if (d.type === "signature_delta" && blk.type === "reasoning") {
      blk.signature = (blk.signature ?? "") + d.signature;
      return [];
    }
    if (d.type === "input_json_delta" && blk.type === "toolCall") {
      blk.arguments += d.partial_json;
      return d.partial_json ? [{ type: "toolCallDelta", index, delta: d.partial_json }] : [];
    }
    return [];
  }

  /** Usage fields are cumulative; null/absent means "unchanged". */
  private absorbUsage(u: RawUsage | null | undefined): void {
    if (!u) return;
    if (u.input_tokens != null) this.usage.input = num(u.input_tokens);
    if (u.output_tokens != null) this.usage.output = num(u.output_tokens);
    if (u.cache_read_input_tokens != null) this.usage.cacheRead = num(u.cache_read_input_tokens);
    if (u.cache_creation_input_tokens != null) this.usage.cacheWrite = num(u.cache_creation_input_tokens);
    if (u.output_tokens_details?.thinking_tokens != null) this.usage.thinking = num(u.output_tokens_details.thinking_tokens);
  }

  get complete(): boolean {
    return this.sawStop;
  }

  finish(): Extract<ProviderStreamEvent, { type: "done" }> {
    if (!this.sawStop) throw new ProviderError("streamIncomplete", "anthropic: stream ended before message_stop");
    const message: AssistantMessage = { role: "assistant", content: this.content };
    if (this.messageId) message.providerMessageId = this.messageId;
    const u = this.usage;
    const usage: Usage = makeUsage({
      inputTokens: u.input + u.cacheRead + u.cacheWrite,
      cachedInputTokens: u.cacheRead,
      cacheWriteInputTokens: u.cacheWrite,
      outputTokens: u.output,
      reasoningOutputTokens: u.thinking,
    });
    const stopDetail = this.stopReason === null ? undefined : `stop_reason "${this.stopReason}"`;
    return { type: "done", message, stopReason: mapStopReason(this.stopReason), usage, ...(stopDetail ? { stopDetail } : {}) };
  }
}

/**
 * The data of one Messages stream event, with the rules of the SDK's Stream iterator
 * (@anthropic-ai/sdk/core/streaming.js): `ping`, unnamed and empty events are skipped; an
 * `error` event is thrown as the SDK's APIError carrying its body and type (no status:
 * errors.ts reads it as a mid-stream error); JSON that does not parse throws SyntaxError.
 */
export function anthropicEventData(msg: SseMessage, headers: Headers): RawMessageStreamEvent | undefined {
  if (msg.event === undefined || msg.event === "ping") return undefined;
  if (msg.event === "error") {
    let body: unknown = msg.data;
    try {
      body = JSON.parse(msg.data) ?? msg.data;
    } catch {
      // not JSON: the raw text is the body
    }
    const type = (body as { error?: { type?: string } } | null)?.error?.type as ConstructorParameters<typeof APIError>[4];
    throw new APIError(undefined, body as object, undefined, headers, type);
  }
  if (!msg.data) return undefined;
  return JSON.parse(msg.data) as RawMessageStreamEvent;
}

export class AnthropicProvider implements ModelProvider {
  readonly id = "anthropic";
  private readonly auth: ResolvedAuth;
  private readonly client: Anthropic | null;

  constructor(private readonly opts: AnthropicProviderOptions = {}) {
    this.auth = resolveAuth({
      provider: "anthropic",
      apiKey: opts.apiKey,
      baseURL: opts.baseURL,
      keyEnvVars: ["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"],
      baseURLEnvVar: "ANTHROPIC_BASE_URL",
    });
    this.client = this.auth.missingKeyError
      ? null
      : new Anthropic({
          ...(this.auth.apiKey !== undefined ? { apiKey: this.auth.apiKey } : {}),
          ...(this.auth.baseURL !== undefined ? { baseURL: this.auth.baseURL } : {}),
          ...(opts.timeoutMs !== undefined ? { timeout: opts.timeoutMs } : {}),
          maxRetries: 0, // the agent loop owns retries
        });
  }

  async *stream(request: ModelRequest, signal: AbortSignal): AsyncGenerator<ProviderStreamEvent> {
    const ctx: ErrorContext = { provider: this.id, signal, streamStarted: false, secrets: this.auth.secrets, endpoint: this.client?.baseURL };
    if (!this.client) throw this.auth.missingKeyError ?? new ProviderError("auth", "anthropic: no credentials");
    const asm = new AnthropicStreamAssembler();
    try {
      const body = buildAnthropicRequest(request, this.opts);
      if (signal.aborted) throw new ProviderError("aborted", "anthropic: request aborted");
      // The SDK makes the request (and turns an HTTP error status into an APIError); the body's
      // events are read here (sse.ts).
      const response = await this.client.messages.create(body, { signal }).asResponse();
      ctx.streamStarted = true;
      const sse = new SseReader(response);
      try {
        for (let batch; (batch = await sse.next()) !== null; ) {
          for (const msg of batch) {
            const ev = anthropicEventData(msg, response.headers);
            if (ev !== undefined) for (const out of asm.handle(ev)) yield out;
          }
        }
      } finally {
        sse.close();
      }
      if (signal.aborted) throw new ProviderError("aborted", "anthropic: request aborted");
      yield asm.finish();
    } catch (err) {
      throw toProviderError(err, ctx);
    }
  }
}
