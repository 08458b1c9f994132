import type { AssistantMessage, Message, MessagePhase, Usage } from "../agent/messages.js";

/** A tool as offered to the model. `inputSchema` is a JSON Schema object (already canonicalised by the caller). */
export interface ToolSpec {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
}

export type ReasoningEffort = "none" | "minimal" | "low" | "medium" | "high" | "xhigh";

/** One model call, provider-neutral. The adapters must turn this into bytes deterministically. */
export interface ModelRequest {
  model: string;
  /** Static system prompt for the thread. */
  system: string;
  /** Tools in the order to send them (the prompt assembler sorts them). */
  tools: ToolSpec[];
  messages: Message[];
  maxOutputTokens?: number;
  reasoningEffort?: ReasoningEffort | null;
  /** Stable per-thread key: OpenAI `prompt_cache_key`. */
  cacheKey?: string;
}

/**
 * Why the provider says it stopped. Informational only: the loop decides whether to continue
 * from the message content (DESIGN.md §3.1), except for two stops that make the message
 * incomplete: `maxTokens` (cut by the output limit) and `refusal` (the provider refused or
 * filtered the output: Anthropic `stop_reason: "refusal"`, Chat `finish_reason: "content_filter"`
 * or a `refusal` delta, Responses `incomplete` for any reason but `max_output_tokens`, or a
 * `refusal` content part). Tool calls of either are never run.
 */
export type ProviderStopReason = "endTurn" | "toolUse" | "maxTokens" | "refusal" | "other";

/**
 * Streamed events, normalised. `index` is the position of the block in the final
 * `AssistantMessage.content`, so deltas can be routed to the right item.
 */
export type ProviderStreamEvent =
  | { type: "textDelta"; index: number; delta: string; phase?: MessagePhase }
  | { type: "reasoningSummaryDelta"; index: number; summaryIndex: number; delta: string }
  | { type: "reasoningTextDelta"; index: number; delta: string }
  | { type: "toolCallStart"; index: number; id: string; name: string }
  | { type: "toolCallDelta"; index: number; delta: string }
  | {
      type: "done";
      message: AssistantMessage;
      stopReason: ProviderStopReason;
      usage: Usage;
      /** The provider's own words for the stop, for messages (e.g. `stop_reason "refusal"`, `incomplete (reason "content_filter")`). */
      stopDetail?: string;
    };

export type ProviderErrorKind =
  | "rateLimited" // 429
  | "overloaded" // 529 / 503
  | "server" // other 5xx
  | "auth" // 401 / 403
  | "badRequest" // 400 (not overflow)
  | "notFound" // 404 (e.g. unknown model)
  | "contextOverflow" // prompt too long for the model
  | "network" // connection refused/reset before a response
  | "quota" // quota or billing exhausted (insufficient_quota, billing_error, HTTP 402): retrying cannot help
  | "refused" // the provider refused or filtered the answer (set by the loop from a `refusal` stop)
  | "streamIncomplete" // stream ended or was cut before its final event, or sent a malformed chunk
  | "aborted"; // the caller's AbortSignal fired

export class ProviderError extends Error {
  readonly kind: ProviderErrorKind;
  readonly status: number | null;
  /** Parsed Retry-After (or retry-after-ms) in milliseconds, when the provider sent one. */
  readonly retryAfterMs: number | null;
  constructor(kind: ProviderErrorKind, message: string, opts: { status?: number | null; retryAfterMs?: number | null; cause?: unknown } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = "ProviderError";
    this.kind = kind;
    this.status = opts.status ?? null;
    this.retryAfterMs = opts.retryAfterMs ?? null;
  }
  /** Transient failures worth retrying (DESIGN.md §3.5). Never 400/401/403/404, never a user cancel. */
  get retryable(): boolean {
    return this.kind === "rateLimited" || this.kind === "overloaded" || this.kind === "server" || this.kind === "network" || this.kind === "streamIncomplete";
  }
}

export interface ModelProvider {
  /** `anthropic`, `openai` or `openai-chat`. */
  readonly id: string;
  /**
   * Streams one model call. Yields deltas, then exactly one `done` event; on failure throws a
   * ProviderError (kind `aborted` when `signal` fired). Must read the stream to its real end:
   * a stop reason may arrive before the last tool-call block.
   */
  stream(request: ModelRequest, signal: AbortSignal): AsyncIterable<ProviderStreamEvent>;
}
