/**
 * OpenAI Responses API adapter (stateless: `store: false`, the whole history every call, and
 * reasoning carried forward as encrypted content). The request body is built by a pure function
 * (exported for tests); the stream is assembled from raw events into our AssistantMessage.
 */
import OpenAI, { APIError } from "openai";
import type {
  ResponseCreateParamsStreaming,
  ResponseInputImage,
  ResponseInputItem,
  ResponseInputText,
  ResponseOutputMessage,
  ResponseOutputText,
  ResponseReasoningItem,
  ResponseStreamEvent,
} from "openai/resources/responses/responses";
import type { AssistantMessage, ImageBlock, Message, MessagePhase, ReasoningBlock, TextBlock, ToolCallBlock, Usage } from "../agent/messages.js";
import { resolveAuth, type ResolvedAuth } from "./auth.js";
import { kindFromCode, toProviderError, withKindHint, type ErrorContext } from "./errors.js";
import { joinText, makeUsage, num, withoutUndefined } from "./shared.js";
import { SseReader, type SseMessage } from "./sse.js";
import { ProviderError, type ModelProvider, type ModelRequest, type ProviderStopReason, type ProviderStreamEvent } from "./types.js";

export interface OpenAIResponsesProviderOptions {
  apiKey?: string;
  baseURL?: string;
  defaultMaxOutputTokens?: number;
  timeoutMs?: number;
}

// Wire shapes we send, as the SDK types them. The key order of each item is fixed where the item's
// literal is written (below), which is what the bytes follow.
type InputContent = ResponseInputText | ResponseInputImage;
type OutputText = ResponseOutputText;
/**
 * Assistant text and reasoning go back as the output items they came as. The SDK's input union
 * types those as the API returns them, with fields our items leave out: a message's `id` and
 * `status` (with `store: false` nothing is kept server-side for an id to point to), and a reasoning
 * item's `id` when it was recorded without one. The API takes both as input without those fields,
 * and adding them now would change the bytes of every stored history's replay.
 */
type AssistantReplay = Omit<ResponseOutputMessage, "id" | "status">;
type ReasoningReplay = Omit<ResponseReasoningItem, "id"> & { id?: string };
type InputItem = ResponseInputItem;

/**
 * A replayed output item as the SDK's input item type. Sound: the parameter type checks every field
 * written; what the SDK's type has beyond it is only the fields the API does not need back
 * (see AssistantReplay), which are not sent.
 */
function replay(item: AssistantReplay | ReasoningReplay): InputItem {
  return item as ResponseOutputMessage | ResponseReasoningItem;
}

function inputContent(content: ReadonlyArray<TextBlock | ImageBlock>): InputContent[] {
  return content.map((b) => (b.type === "text" ? { type: "input_text", text: b.text } : { type: "input_image", image_url: b.url, detail: "auto" }));
}

function reasoningItem(r: ReasoningBlock): InputItem | null {
  // Without encrypted content (store:false) the API cannot resolve a reasoning item: omit it.
  if (!r.encryptedContent) return null;
  const summary = r.summary.map((text) => ({ type: "summary_text" as const, text }));
  return replay(
    r.providerId
      ? { type: "reasoning", id: r.providerId, summary, encrypted_content: r.encryptedContent }
      : { type: "reasoning", summary, encrypted_content: r.encryptedContent },
  );
}

/**
 * Internal messages → Responses input items. Consecutive assistant text blocks share one message
 * item unless their `phase` differs: a reply of a commentary message and a final answer goes back
 * as the two messages it was, each with its phase (the API wants it back, as Codex sends it).
 */
export function convertMessagesToResponsesInput(messages: readonly Message[]): InputItem[] {
  const items: InputItem[] = [];
  for (const m of messages) {
    switch (m.role) {
      case "user":
      case "developer":
        items.push({ type: "message", role: m.role, content: inputContent(m.content) });
        break;
      case "toolResult": {
        const textOnly = m.content.every((b) => b.type === "text");
        items.push({ type: "function_call_output", call_id: m.toolCallId, output: textOnly ? joinText(m.content) : inputContent(m.content) });
        break;
      }
      case "assistant": {
        let texts: OutputText[] = [];
        let phase: MessagePhase | undefined;
        const flush = () => {
          if (texts.length > 0) {
            items.push(replay(phase ? { type: "message", role: "assistant", content: texts, phase } : { type: "message", role: "assistant", content: texts }));
          }
          texts = [];
        };
        for (const b of m.content) {
          if (b.type === "text") {
            if (texts.length > 0 && b.phase !== phase) flush();
            phase = b.phase;
            texts.push({ type: "output_text", text: b.text, annotations: [] });
            continue;
          }
          flush();
          if (b.type === "reasoning") {
            const r = reasoningItem(b);
            if (r) items.push(r);
          } else {
            items.push({ type: "function_call", call_id: b.id, name: b.name, arguments: b.arguments });
          }
        }
        flush();
        break;
      }
    }
  }
  return items;
}

/** The exact request body for a ModelRequest. Key order is fixed by construction. */
export function buildResponsesRequest(req: ModelRequest, opts: OpenAIResponsesProviderOptions = {}): ResponseCreateParamsStreaming {
  const maxOut = req.maxOutputTokens ?? opts.defaultMaxOutputTokens;
  const effort = req.reasoningEffort != null && req.reasoningEffort !== "none" ? req.reasoningEffort : undefined;
  // One literal in wire order, an absent field `undefined` (then deleted): the bytes never depend
  // on which branches ran, and every field is checked against the SDK's type.
  const body: ResponseCreateParamsStreaming = {
    model: req.model,
    instructions: req.system !== "" ? req.system : undefined,
    input: convertMessagesToResponsesInput(req.messages),
    tools:
      req.tools.length > 0
        ? req.tools.map((t) => ({ type: "function", name: t.name, description: t.description, parameters: t.inputSchema, strict: false }))
        : undefined,
    store: false,
    stream: true,
    prompt_cache_key: req.cacheKey ? req.cacheKey : undefined,
    max_output_tokens: maxOut,
    reasoning: effort ? { effort, summary: "auto" } : undefined,
    // store:false means reasoning must travel with the request: ask for it back encrypted.
    include: effort ? ["reasoning.encrypted_content"] : undefined,
  };
  return withoutUndefined(body);
}

interface RawResponse {
  id?: string;
  status?: string;
  error?: { code?: string | null; message?: string } | null;
  incomplete_details?: { reason?: string | null } | null;
  output?: RawItem[];
  usage?: {
    input_tokens?: number;
    input_tokens_details?: { cached_tokens?: number; cache_write_tokens?: number } | null;
    output_tokens?: number;
    output_tokens_details?: { reasoning_tokens?: number } | null;
    total_tokens?: number;
  } | null;
}

interface RawItem {
  id?: string;
  type: string;
  // message: who wrote it (gpt-5 codex models: "commentary" or "final_answer")
  phase?: string | null;
  // message
  content?: Array<{ type: string; text?: string; refusal?: string }>;
  // reasoning
  summary?: Array<{ type: string; text: string }>;
  encrypted_content?: string | null;
  // function_call
  call_id?: string;
  name?: string;
  arguments?: string;
}

/** Turns raw Responses events into ProviderStreamEvents and the final message. */
export class ResponsesStreamAssembler {
  private readonly content: AssistantMessage["content"] = [];
  /** output_index → our content index for reasoning / function_call items. */
  private readonly itemBlock = new Map<number, number>();
  /** `${output_index}:${content_index}` → our content index for message text parts. */
  private readonly partBlock = new Map<string, number>();
  private readonly seenOutput = new Set<number>();
  private responseId: string | undefined;
  private messageItemId: string | undefined;
  /** output_index → the phase of that message item, when the model labelled it. */
  private readonly phases = new Map<number, MessagePhase>();
  private refused = false;
  private final: RawResponse | null = null;
  private finalStatus: "completed" | "incomplete" | null = null;

  handle(ev: ResponseStreamEvent): ProviderStreamEvent[] {
    switch (ev.type) {
      case "response.created":
      case "response.in_progress":
        this.responseId ??= ev.response.id;
        return [];
      case "response.output_item.added":
        return this.itemAdded(ev.output_index, ev.item as RawItem);
      case "response.content_part.added":
        // Text blocks are created on their first non-empty delta, so an empty part (e.g. an empty
        // message item before function calls) leaves no empty block behind.
        return [];
      case "response.output_text.delta":
        return this.textDelta(ev.output_index, ev.content_index, ev.delta);
      case "response.refusal.delta":
        this.refused = true;
        return this.textDelta(ev.output_index, ev.content_index, ev.delta);
      case "response.reasoning_summary_part.added": {
        const r = this.reasoningBlock(ev.output_index, ev.item_id);
        while (r.block.summary.length <= ev.summary_index) r.block.summary.push("");
        return [];
      }
      case "response.reasoning_summary_text.delta": {
        const r = this.reasoningBlock(ev.output_index, ev.item_id);
        while (r.block.summary.length <= ev.summary_index) r.block.summary.push("");
        r.block.summary[ev.summary_index] += ev.delta;
        return ev.delta ? [{ type: "reasoningSummaryDelta", index: r.index, summaryIndex: ev.summary_index, delta: ev.delta }] : [];
      }
      case "response.reasoning_text.delta": {
        const r = this.reasoningBlock(ev.output_index, ev.item_id);
        r.block.text += ev.delta;
        return ev.delta ? [{ type: "reasoningTextDelta", index: r.index, delta: ev.delta }] : [];
      }
      case "response.function_call_arguments.delta": {
        const i = this.itemBlock.get(ev.output_index);
        const blk = i === undefined ? undefined : this.content[i];
        if (i === undefined || blk?.type !== "toolCall") return [];
        blk.arguments += ev.delta;
        return ev.delta ? [{ type: "toolCallDelta", index: i, delta: ev.delta }] : [];
      }
      case "response.function_call_arguments.done": {
        const i = this.itemBlock.get(ev.output_index);
        const blk = i === undefined ? undefined : this.content[i];
        if (blk?.type === "toolCall") blk.arguments = ev.arguments; // authoritative full text
        return [];
      }
      case "response.output_item.done":
        return this.itemDone(ev.output_index, ev.item as RawItem);
      case "response.completed":
      case "response.incomplete":
        this.final = ev.response as RawResponse;
        this.finalStatus = ev.type === "response.completed" ? "completed" : "incomplete";
        this.responseId ??= ev.response.id;
        return this.absorbUnseenOutput(this.final.output ?? []);
      case "response.failed": {
        const e = (ev.response as RawResponse).error;
        throw responsesError(e?.code ?? null, e?.message ?? "response failed");
      }
      case "error":
        throw responsesError(ev.code, ev.message);
      default:
        return [];
    }
  }

  private itemAdded(outputIndex: number, item: RawItem): ProviderStreamEvent[] {
    this.seenOutput.add(outputIndex);
    if (item.type === "reasoning") {
      this.reasoningBlock(outputIndex, item.id);
      return [];
    }
    if (item.type === "function_call") {
      const index = this.content.length;
      const block: ToolCallBlock = { type: "toolCall", id: item.call_id ?? "", name: item.name ?? "", arguments: item.arguments ?? "" };
      if (item.id) block.providerItemId = item.id;
      this.content.push(block);
      this.itemBlock.set(outputIndex, index);
      const out: ProviderStreamEvent[] = [{ type: "toolCallStart", index, id: block.id, name: block.name }];
      if (block.arguments) out.push({ type: "toolCallDelta", index, delta: block.arguments });
      return out;
    }
    if (item.type === "message") {
      if (item.id) this.messageItemId ??= item.id;
      this.notePhase(outputIndex, item.phase);
    }
    return [];
  }

  private notePhase(outputIndex: number, phase: string | null | undefined): void {
    if (phase !== "commentary" && phase !== "final_answer") return;
    this.phases.set(outputIndex, phase);
    // Blocks created before the phase was known (it may only come with output_item.done).
    for (const [key, index] of this.partBlock) if (key.startsWith(`${outputIndex}:`)) (this.content[index] as TextBlock).phase = phase;
  }

  /** Fills in what the deltas may not have carried (ids, encrypted content, un-streamed text). */
  private itemDone(outputIndex: number, item: RawItem): ProviderStreamEvent[] {
    const out = this.seenOutput.has(outputIndex) ? [] : this.itemAdded(outputIndex, item);
    if (item.type === "reasoning") {
      const r = this.reasoningBlock(outputIndex, item.id);
      if (item.encrypted_content) r.block.encryptedContent = item.encrypted_content;
      if (item.summary && item.summary.length > 0 && r.block.summary.every((s) => s === "")) r.block.summary = item.summary.map((s) => s.text);
      if (r.block.text === "" && item.content) r.block.text = item.content.map((c) => c.text ?? "").join("");
    } else if (item.type === "function_call") {
      const i = this.itemBlock.get(outputIndex);
      const blk = i === undefined ? undefined : this.content[i];
      if (blk?.type === "toolCall") {
        if (item.arguments !== undefined) blk.arguments = item.arguments;
        if (item.call_id) blk.id = item.call_id;
      }
    } else if (item.type === "message") {
      if (item.id) this.messageItemId ??= item.id;
      this.notePhase(outputIndex, item.phase);
      (item.content ?? []).forEach((part, ci) => {
        const text = part.type === "output_text" ? part.text : part.type === "refusal" ? part.refusal : undefined;
        if (text === undefined) return;
        if (part.type === "refusal") this.refused = true;
        const key = `${outputIndex}:${ci}`;
        if (!this.partBlock.has(key) && text) {
          const index = this.textBlock(outputIndex, ci);
          const blk = this.content[index] as TextBlock;
          blk.text = text;
          out.push(blk.phase ? { type: "textDelta", index, delta: text, phase: blk.phase } : { type: "textDelta", index, delta: text });
        }
      });
    }
    return out;
  }

  /** Output items present only in the final response (no events seen for them). */
  private absorbUnseenOutput(output: RawItem[]): ProviderStreamEvent[] {
    const out: ProviderStreamEvent[] = [];
    output.forEach((item, i) => {
      if (!this.seenOutput.has(i)) out.push(...this.itemDone(i, item));
    });
    return out;
  }

  private textBlock(outputIndex: number, contentIndex: number): number {
    const key = `${outputIndex}:${contentIndex}`;
    let index = this.partBlock.get(key);
    if (index === undefined) {
      index = this.content.length;
      const phase = this.phases.get(outputIndex);
      this.content.push(phase ? { type: "text", text: "", phase } : { type: "text", text: "" });
      this.partBlock.set(key, index);
    }
    return index;
  }

  private textDelta(outputIndex: number, contentIndex: number, delta: string): ProviderStreamEvent[] {
    if (!delta) return [];
    const index = this.textBlock(outputIndex, contentIndex);
    const block = this.content[index] as TextBlock;
    block.text += delta;
    return [block.phase ? { type: "textDelta", index, delta, phase: block.phase } : { type: "textDelta", index, delta }];
  }

  private reasoningBlock(outputIndex: number, itemId: string | undefined): { index: number; block: ReasoningBlock } {
    let index = this.itemBlock.get(outputIndex);
    if (index === undefined) {
      index = this.content.length;
      const block: ReasoningBlock = { type: "reasoning", text: "", summary: [] };
      if (itemId) block.providerId = itemId;
      this.content.push(block);
      this.itemBlock.set(outputIndex, index);
    }
    return { index, block: this.content[index] as ReasoningBlock };
  }

  finish(): Extract<ProviderStreamEvent, { type: "done" }> {
    if (!this.final || !this.finalStatus) throw new ProviderError("streamIncomplete", "openai: stream ended before response.completed");
    const message: AssistantMessage = { role: "assistant", content: this.content };
    if (this.responseId) message.providerMessageId = this.responseId;
    if (this.messageItemId) message.providerItemId = this.messageItemId;
    const u = this.final.usage;
    const usage: Usage = makeUsage({
      inputTokens: num(u?.input_tokens),
      cachedInputTokens: num(u?.input_tokens_details?.cached_tokens),
      cacheWriteInputTokens: num(u?.input_tokens_details?.cache_write_tokens),
      outputTokens: num(u?.output_tokens),
      reasoningOutputTokens: num(u?.output_tokens_details?.reasoning_tokens),
      totalTokens: u?.total_tokens ?? null,
    });
    const stop = this.stopReason();
    return { type: "done", message, stopReason: stop.reason, usage, ...(stop.detail ? { stopDetail: stop.detail } : {}) };
  }

  /**
   * An incomplete response is truncated only for max_output_tokens; for any other reason
   * (content_filter, or one added later) the output was stopped by the provider: a refusal.
   */
  private stopReason(): { reason: ProviderStopReason; detail?: string } {
    if (this.finalStatus === "incomplete") {
      const reason = this.final?.incomplete_details?.reason ?? "unknown";
      if (reason === "max_output_tokens") return { reason: "maxTokens", detail: `incomplete (reason "${reason}")` };
      return { reason: "refusal", detail: `incomplete (reason "${reason}")` };
    }
    if (this.refused) return { reason: "refusal", detail: "a refusal content part" };
    return { reason: this.content.some((b) => b.type === "toolCall") ? "toolUse" : "endTurn" };
  }
}

/** A failure reported inside the stream (`error` event or `response.failed`). */
function responsesError(code: string | null | undefined, message: string): ProviderError {
  const kind = kindFromCode(code, message);
  return new ProviderError(kind, withKindHint(kind, `openai: stream error${code ? ` ${code}` : ""}: ${message}`));
}

export class OpenAIResponsesProvider implements ModelProvider {
  readonly id = "openai";
  private readonly auth: ResolvedAuth;
  private readonly client: OpenAI | null;

  constructor(private readonly opts: OpenAIResponsesProviderOptions = {}) {
    ({ auth: this.auth, client: this.client } = openAIConnection(this.id, opts));
  }

  async *stream(request: ModelRequest, signal: AbortSignal): AsyncGenerator<ProviderStreamEvent> {
    const ctx: ErrorContext = { provider: this.id, signal, streamStarted: false, secrets: this.auth.secrets, endpoint: this.client?.baseURL };
    if (!this.client) throw this.auth.missingKeyError ?? new ProviderError("auth", "openai: no credentials");
    const asm = new ResponsesStreamAssembler();
    try {
      const body = buildResponsesRequest(request, this.opts);
      if (signal.aborted) throw new ProviderError("aborted", "openai: request aborted");
      // The SDK makes the request (and turns an HTTP error status into an APIError); the body's
      // events are read here (sse.ts).
      const response = await this.client.responses.create(body, { signal }).asResponse();
      ctx.streamStarted = true;
      const sse = new SseReader(response);
      const data = new OpenAIEventData(response.headers);
      try {
        for (let batch; (batch = await sse.next()) !== null; ) {
          for (const msg of batch) {
            const ev = data.parse(msg) as ResponseStreamEvent | undefined;
            if (ev !== undefined) for (const out of asm.handle(ev)) yield out;
          }
        }
      } finally {
        sse.close();
      }
      if (signal.aborted) throw new ProviderError("aborted", "openai: request aborted");
      yield asm.finish();
    } catch (err) {
      throw toProviderError(err, ctx);
    }
  }
}

/**
 * The data of OpenAI's stream events (Responses and Chat Completions), with the rules of the SDK's
 * Stream iterator (openai/core/streaming.js): nothing after `[DONE]`; a chunk carrying `error`
 * is thrown as the SDK's APIError (no status: errors.ts reads it as a mid-stream error);
 * Assistants' `thread.*` events do not occur on these endpoints and are skipped; JSON that does
 * not parse throws SyntaxError (errors.ts: a malformed chunk, streamIncomplete).
 */
export class OpenAIEventData {
  private done = false;
  constructor(private readonly headers: Headers) {}

  /** The event's parsed data, or undefined for events the caller should not see. */
  parse(msg: SseMessage): unknown {
    if (this.done) return undefined;
    if (msg.data.startsWith("[DONE]")) {
      this.done = true;
      return undefined;
    }
    if (msg.event !== undefined && msg.event.startsWith("thread.")) return undefined;
    const data = JSON.parse(msg.data) as { error?: unknown } | null;
    if (data && data.error) throw new APIError(undefined, data.error as object, undefined, this.headers);
    return data;
  }
}

/**
 * Credentials and SDK client for the two OpenAI adapters (Responses and Chat Completions share
 * OPENAI_API_KEY / OPENAI_BASE_URL). No client when the key is missing: the first call reports it.
 */
export function openAIConnection(provider: string, opts: { apiKey?: string; baseURL?: string; timeoutMs?: number }): { auth: ResolvedAuth; client: OpenAI | null } {
  const auth = resolveAuth({ provider, apiKey: opts.apiKey, baseURL: opts.baseURL, keyEnvVars: ["OPENAI_API_KEY"], baseURLEnvVar: "OPENAI_BASE_URL" });
  if (auth.missingKeyError) return { auth, client: null };
  const client = new OpenAI({
    ...(auth.apiKey !== undefined ? { apiKey: auth.apiKey } : {}),
    ...(auth.baseURL !== undefined ? { baseURL: auth.baseURL } : {}),
    ...(opts.timeoutMs !== undefined ? { timeout: opts.timeoutMs } : {}),
    maxRetries: 0, // the agent loop owns retries
  });
  return { auth, client };
}
