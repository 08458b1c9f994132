/**
 * Chat Completions adapter, for OpenAI-compatible servers (Ollama, vLLM, llama.cpp, DeepSeek,
 * Mistral, Qwen, ...). Reasoning is read from the de-facto `reasoning_content` / `reasoning` delta
 * fields and from `thinking` content parts (Mistral's magistral models send `delta.content` as a
 * list of typed parts). It is sent back only on an assistant message with tool calls, in the field
 * it came in: DeepSeek's thinking mode rejects a tool-calling exchange without it, and nothing
 * needs it elsewhere. Tool calls are assembled by their `index`, and the stream is read to its real
 * end: a finish_reason may arrive before the last tool-call delta.
 */
import OpenAI from "openai";
import type {
  ChatCompletionAssistantMessageParam,
  ChatCompletionChunk,
  ChatCompletionContentPartImage,
  ChatCompletionContentPartText,
  ChatCompletionCreateParamsStreaming,
  ChatCompletionDeveloperMessageParam,
  ChatCompletionSystemMessageParam,
  ChatCompletionToolMessageParam,
  ChatCompletionUserMessageParam,
} from "openai/resources/chat/completions";
import type { AssistantMessage, ImageBlock, Message, ReasoningBlock, TextBlock, ToolCallBlock, Usage } from "../agent/messages.js";
import type { ResolvedAuth } from "./auth.js";
import { toProviderError, type ErrorContext } from "./errors.js";
import { OpenAIEventData, openAIConnection } from "./openai-responses.js";
import { joinText, makeUsage, num, withoutUndefined } from "./shared.js";
import { SseReader } from "./sse.js";
import { ProviderError, type ModelProvider, type ModelRequest, type ProviderStopReason, type ProviderStreamEvent } from "./types.js";

export interface OpenAIChatProviderOptions {
  apiKey?: string;
  baseURL?: string;
  /** Role for developer messages: many local chat templates only know `system`. Default "developer". */
  chatDeveloperRole?: "developer" | "system";
  /** Send `prompt_cache_key` (OpenAI itself accepts it; some compatible servers reject unknown fields). */
  sendPromptCacheKeyToChat?: boolean;
  defaultMaxOutputTokens?: number;
  timeoutMs?: number;
}

type ChatPart = ChatCompletionContentPartText | ChatCompletionContentPartImage;
/**
 * The assistant message as sent: the SDK's type plus the reasoning fields of compatible servers
 * (DeepSeek and Qwen-style `reasoning_content`, vLLM/OpenRouter/Ollama `reasoning`), which OpenAI's
 * own API does not have and so the SDK does not type.
 */
type ChatAssistantMessage = ChatCompletionAssistantMessageParam & { reasoning_content?: string; reasoning?: string };
type ChatMessage =
  | ChatCompletionSystemMessageParam
  | ChatCompletionDeveloperMessageParam
  | ChatCompletionUserMessageParam
  | ChatAssistantMessage
  | ChatCompletionToolMessageParam;

/** Plain string when the message is text only: the most widely supported form on local servers. */
function userContent(content: ReadonlyArray<TextBlock | ImageBlock>): string | ChatPart[] {
  if (content.every((b) => b.type === "text")) return joinText(content);
  return content.map((b) => (b.type === "text" ? { type: "text", text: b.text } : { type: "image_url", image_url: { url: b.url } }));
}

export function convertMessagesToChat(system: string, messages: readonly Message[], developerRole: "developer" | "system" = "developer"): ChatMessage[] {
  const out: ChatMessage[] = [];
  if (system !== "") out.push({ role: "system", content: system });
  for (const m of messages) {
    switch (m.role) {
      case "user":
        out.push({ role: "user", content: userContent(m.content) });
        break;
      case "developer":
        out.push({ role: developerRole, content: joinText(m.content) });
        break;
      case "toolResult":
        out.push({ role: "tool", tool_call_id: m.toolCallId, content: joinText(m.content) });
        break;
      case "assistant": {
        const text = m.content.filter((b): b is TextBlock => b.type === "text").map((b) => b.text).join("");
        const calls = m.content.filter((b): b is ToolCallBlock => b.type === "toolCall");
        const msg: ChatAssistantMessage = { role: "assistant", content: text === "" && calls.length > 0 ? null : text };
        if (calls.length > 0) {
          for (const r of m.content) if (r.type === "reasoning" && r.chatField && r.text) msg[r.chatField] = (msg[r.chatField] ?? "") + r.text;
          msg.tool_calls = calls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: c.arguments } }));
        }
        out.push(msg);
        break;
      }
    }
  }
  return out;
}

/** The exact request body for a ModelRequest. Key order is fixed by construction. */
export function buildChatRequest(req: ModelRequest, opts: OpenAIChatProviderOptions = {}): ChatCompletionCreateParamsStreaming {
  const maxOut = req.maxOutputTokens ?? opts.defaultMaxOutputTokens;
  // One literal in wire order, an absent field `undefined` (then deleted): the bytes never depend
  // on which branches ran, and every field is checked against the SDK's type.
  const body: ChatCompletionCreateParamsStreaming = {
    model: req.model,
    messages: convertMessagesToChat(req.system, req.messages, opts.chatDeveloperRole),
    tools:
      req.tools.length > 0
        ? req.tools.map((t) => ({ type: "function", function: { name: t.name, description: t.description, parameters: t.inputSchema } }))
        : undefined,
    // `max_tokens`, not `max_completion_tokens`: it is what Ollama, vLLM and llama.cpp all accept.
    max_tokens: maxOut,
    reasoning_effort: req.reasoningEffort != null && req.reasoningEffort !== "none" ? req.reasoningEffort : undefined,
    prompt_cache_key: opts.sendPromptCacheKeyToChat && req.cacheKey ? req.cacheKey : undefined,
    stream: true,
    stream_options: { include_usage: true },
  };
  return withoutUndefined(body);
}

/**
 * The delta as compatible servers send it: reasoning in `reasoning_content` or `reasoning`, and
 * `content` either a string or (Mistral magistral) a list of typed parts.
 */
type ChunkDelta = Omit<ChatCompletionChunk.Choice.Delta, "content"> & { content?: string | ContentPart[] | null; reasoning_content?: string | null; reasoning?: string | null };

/** A typed content part: `{type: "text", text}` or `{type: "thinking", thinking: string | [{type: "text", text}]}`. */
interface ContentPart {
  type?: unknown;
  text?: unknown;
  thinking?: unknown;
}

/** The text and reasoning of `delta.content`, whichever form it takes; unknown parts are skipped (never "[object Object]"). */
export function contentParts(content: unknown): Array<{ kind: "text" | "reasoning"; text: string }> {
  if (typeof content === "string") return content ? [{ kind: "text", text: content }] : [];
  if (!Array.isArray(content)) return [];
  const out: Array<{ kind: "text" | "reasoning"; text: string }> = [];
  for (const part of content as ContentPart[]) {
    if (part?.type === "text" && typeof part.text === "string" && part.text) out.push({ kind: "text", text: part.text });
    else if (part?.type === "thinking") {
      const text = typeof part.thinking === "string" ? part.thinking : contentParts(part.thinking).map((p) => p.text).join("");
      if (text) out.push({ kind: "reasoning", text });
    }
  }
  return out;
}

/** Turns chat chunks into ProviderStreamEvents and the final message. */
export class ChatStreamAssembler {
  private readonly content: AssistantMessage["content"] = [];
  /** tool_calls[].index → our content index. */
  private readonly toolIndex = new Map<number, number>();
  private id: string | undefined;
  private finishReason: string | null = null;
  private refused = false;
  private usage: ChatCompletionChunk["usage"] = null;

  handle(chunk: ChatCompletionChunk): ProviderStreamEvent[] {
    this.id ??= chunk.id || undefined;
    if (chunk.usage) this.usage = chunk.usage;
    const out: ProviderStreamEvent[] = [];
    for (const choice of chunk.choices ?? []) {
      if (choice.index !== 0 && choice.index !== undefined) continue; // we never ask for n > 1
      const d = (choice.delta ?? {}) as ChunkDelta;
      if (d.reasoning_content) out.push(this.appendReasoning(d.reasoning_content, "reasoning_content"));
      else if (d.reasoning) out.push(this.appendReasoning(d.reasoning, "reasoning"));
      for (const part of contentParts(d.content)) out.push(part.kind === "text" ? this.appendText(part.text) : this.appendReasoning(part.text));
      // OpenAI's structured refusal: text the user should see, and a refusal all the same.
      if (typeof d.refusal === "string" && d.refusal) {
        this.refused = true;
        out.push(this.appendText(d.refusal));
      }
      for (const tc of d.tool_calls ?? []) out.push(...this.toolCallDelta(tc));
      // Recorded, not acted upon: tool-call deltas may still follow.
      if (choice.finish_reason) this.finishReason = choice.finish_reason;
    }
    return out;
  }

  private appendText(delta: string): ProviderStreamEvent {
    let index = this.content.length - 1;
    const last = this.content[index];
    if (last?.type === "text") last.text += delta;
    else {
      index = this.content.length;
      this.content.push({ type: "text", text: delta });
    }
    return { type: "textDelta", index, delta };
  }

  private appendReasoning(delta: string, chatField?: ReasoningBlock["chatField"]): ProviderStreamEvent {
    let index = this.content.length - 1;
    const last = this.content[index];
    // One block per run of reasoning, whichever field each delta used (the first one names it).
    if (last?.type === "reasoning") last.text += delta;
    else {
      index = this.content.length;
      const block: ReasoningBlock = { type: "reasoning", text: delta, summary: [] };
      if (chatField) block.chatField = chatField;
      this.content.push(block);
    }
    return { type: "reasoningTextDelta", index, delta };
  }

  private toolCallDelta(tc: ChatCompletionChunk.Choice.Delta.ToolCall): ProviderStreamEvent[] {
    const out: ProviderStreamEvent[] = [];
    const key = tc.index ?? 0;
    let index = this.toolIndex.get(key);
    if (index === undefined) {
      index = this.content.length;
      this.content.push({ type: "toolCall", id: tc.id ?? "", name: tc.function?.name ?? "", arguments: "" });
      this.toolIndex.set(key, index);
      out.push({ type: "toolCallStart", index, id: tc.id ?? "", name: tc.function?.name ?? "" });
    } else {
      // Some servers send id/name late or repeat them; the first non-empty value wins.
      const blk = this.content[index] as ToolCallBlock;
      if (!blk.id && tc.id) blk.id = tc.id;
      if (!blk.name && tc.function?.name) blk.name = tc.function.name;
    }
    const args = tc.function?.arguments;
    if (args) {
      (this.content[index] as ToolCallBlock).arguments += args;
      out.push({ type: "toolCallDelta", index, delta: args });
    }
    return out;
  }

  finish(): Extract<ProviderStreamEvent, { type: "done" }> {
    if (this.finishReason === null) throw new ProviderError("streamIncomplete", "openai-chat: stream ended without a finish_reason");
    // Servers that omit tool-call ids still need a pairing id for the results.
    this.content.forEach((b, i) => {
      if (b.type === "toolCall" && !b.id) b.id = `call_${i}`;
    });
    const message: AssistantMessage = { role: "assistant", content: this.content };
    if (this.id) message.providerMessageId = this.id;
    const u = this.usage;
    const usage: Usage = makeUsage({
      inputTokens: num(u?.prompt_tokens),
      cachedInputTokens: num(u?.prompt_tokens_details?.cached_tokens),
      cacheWriteInputTokens: 0,
      outputTokens: num(u?.completion_tokens),
      reasoningOutputTokens: num(u?.completion_tokens_details?.reasoning_tokens),
      totalTokens: u?.total_tokens ?? null,
    });
    const stopReason = this.stopReason();
    const stopDetail = this.refused && this.finishReason !== "content_filter" ? "a refusal delta" : `finish_reason "${this.finishReason}"`;
    return { type: "done", message, stopReason, usage, stopDetail };
  }

  private stopReason(): ProviderStopReason {
    if (this.refused) return "refusal";
    switch (this.finishReason) {
      case "length":
        return "maxTokens";
      case "content_filter":
        return "refusal";
      case "tool_calls":
      case "function_call":
        return "toolUse";
      case "stop":
        // Several local servers report "stop" for tool calls; the content is what counts.
        return this.content.some((b) => b.type === "toolCall") ? "toolUse" : "endTurn";
      default:
        return "other";
    }
  }
}

export class OpenAIChatProvider implements ModelProvider {
  readonly id = "openai-chat";
  private readonly auth: ResolvedAuth;
  private readonly client: OpenAI | null;

  constructor(private readonly opts: OpenAIChatProviderOptions = {}) {
    ({ auth: this.auth, client: this.client } = openAIConnection(this.id, opts));
  }

  async *stream(request: ModelRequest, signal: AbortSignal): AsyncGenerator<ProviderStreamEvent> {
    const ctx: ErrorContext = { provider: this.id, signal, streamStarted: false, secrets: this.auth.secrets, endpoint: this.client?.baseURL };
    if (!this.client) throw this.auth.missingKeyError ?? new ProviderError("auth", "openai-chat: no credentials");
    const asm = new ChatStreamAssembler();
    try {
      const body = buildChatRequest(request, this.opts);
      if (signal.aborted) throw new ProviderError("aborted", "openai-chat: request aborted");
      const response = await this.client.chat.completions.create(body, { signal }).asResponse();
      ctx.streamStarted = true;
      const sse = new SseReader(response);
      const data = new OpenAIEventData(response.headers);
      // Read to the real end ([DONE] or connection close), never stop at finish_reason.
      try {
        for (let batch; (batch = await sse.next()) !== null; ) {
          for (const msg of batch) {
            const chunk = data.parse(msg) as ChatCompletionChunk | undefined;
            if (chunk !== undefined) for (const out of asm.handle(chunk)) yield out;
          }
        }
      } finally {
        sse.close();
      }
      if (signal.aborted) throw new ProviderError("aborted", "openai-chat: request aborted");
      yield asm.finish();
    } catch (err) {
      throw toProviderError(err, ctx);
    }
  }
}
