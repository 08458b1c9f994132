/**
 * One mapping from "whatever the SDK or the stream threw" to a ProviderError, shared by all
 * adapters so the agent loop's retry policy (DESIGN.md §3.5) sees the same kinds everywhere.
 */
import * as AnthropicSdk from "@anthropic-ai/sdk";
import * as OpenAISdk from "openai";
import { connectionFailure } from "./connection-errors.js";
import { ProviderError, type ProviderErrorKind } from "./types.js";

export interface ErrorContext {
  /** Provider id, used as a message prefix so logs say which backend failed. */
  provider: string;
  /** The caller's signal: when it fired, the error is `aborted` whatever the SDK threw. */
  signal: AbortSignal;
  /** True once the HTTP response has started streaming: a broken connection is then a cut stream. */
  streamStarted: boolean;
  /** Secrets (API keys) that must never appear in an error message. */
  secrets: readonly string[];
  /** The base URL requests go to, named when it cannot be reached. */
  endpoint?: string;
}

/** Prompt-too-long wording across Anthropic, OpenAI, vLLM, llama.cpp and Ollama. */
const OVERFLOW_RE =
  /prompt is too long|context[_ ]length[_ ]exceeded|maximum context length|context window|exceeds? (the )?(available )?context size|exceed_context_size|too many tokens|input is too long/i;

export function looksLikeContextOverflow(...texts: Array<string | null | undefined>): boolean {
  return texts.some((t) => typeof t === "string" && OVERFLOW_RE.test(t));
}

/**
 * Quota and billing exhaustion: OpenAI `insufficient_quota` (HTTP 429, or an error event mid-stream),
 * `billing_hard_limit_reached`, Anthropic `billing_error` (HTTP 402) and "credit balance is too low",
 * DeepSeek's 402 "Insufficient Balance". Not transient: a retry cannot succeed until someone pays.
 */
const QUOTA_CODE_RE = /insufficient_quota|billing|quota_exceeded|usage_limit/i;
const QUOTA_MESSAGE_RE = /exceeded your current quota|credit balance is too low|insufficient (?:quota|balance|credits?)/i;

function looksLikeQuota(code: string | null | undefined, message: string | null | undefined): boolean {
  return (typeof code === "string" && QUOTA_CODE_RE.test(code)) || (typeof message === "string" && QUOTA_MESSAGE_RE.test(message));
}

/** Appended to a quota error's message: what the user can do, and that waiting is not it. */
export const QUOTA_HINT = "the account's quota or billing limit is reached; not retried: check the plan and billing of this API key";

/** The message of a provider error, with the hint its kind needs. */
export function withKindHint(kind: ProviderErrorKind, message: string): string {
  return kind === "quota" ? `${message} (${QUOTA_HINT})` : message;
}

/**
 * Retry-After in milliseconds: `retry-after-ms` first (sent by both Anthropic and OpenAI), then
 * `retry-after` as seconds or as an HTTP date. Null when absent or unparsable.
 */
export function parseRetryAfterMs(headers: Headers | null | undefined, now: number = Date.now()): number | null {
  if (!headers || typeof headers.get !== "function") return null;
  const ms = headers.get("retry-after-ms");
  if (ms !== null && ms.trim() !== "") {
    const n = Number(ms);
    if (Number.isFinite(n) && n >= 0) return Math.round(n);
  }
  const ra = headers.get("retry-after");
  if (ra !== null && ra.trim() !== "") {
    const secs = Number(ra);
    if (Number.isFinite(secs) && secs >= 0) return Math.round(secs * 1000);
    const date = Date.parse(ra);
    if (!Number.isNaN(date)) return Math.max(0, date - now);
  }
  return null;
}

export function redact(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const s of secrets) if (s && s.length >= 4) out = out.split(s).join("[redacted]");
  // Belt and braces: anything shaped like a provider key (sk-..., sk-ant-...) is masked too.
  return out.replace(/\bsk-[A-Za-z0-9_-]{8,}/g, "sk-[redacted]");
}

/** Kind for an error identified only by a type/code string (mid-stream error events, Responses `error`). */
export function kindFromCode(code: string | null | undefined, message: string | null | undefined): ProviderErrorKind {
  const c = (code ?? "").toLowerCase();
  if (looksLikeQuota(c, message)) return "quota";
  if (looksLikeContextOverflow(c, message)) return "contextOverflow";
  if (c.includes("overloaded") || c === "service_unavailable" || c === "slow_down") return "overloaded";
  if (c.includes("rate_limit") || c === "too_many_requests") return "rateLimited";
  if (c.includes("authentication") || c.includes("permission") || c === "invalid_api_key" || c === "unauthorized") return "auth";
  if (c.includes("not_found") || c === "model_not_found") return "notFound";
  if (c.startsWith("invalid") || c === "bad_request" || c.includes("too_large") || c.includes("too_small") || c.includes("unsupported")) {
    return "badRequest";
  }
  // api_error, server_error, timeouts, unknown: a failure on the provider's side, worth a retry.
  return "server";
}

function kindFromStatus(status: number, code: string | null, message: string): ProviderErrorKind {
  // Before 429: OpenAI sends an exhausted quota as 429 too, and it is not a rate limit to wait out.
  if (status === 402 || looksLikeQuota(code, message)) return "quota";
  if (status === 429) return "rateLimited";
  if (status === 529 || status === 503) return "overloaded";
  if (status >= 500 || status === 408) return "server";
  if (status === 401 || status === 403) return "auth";
  if (status === 404) return "notFound";
  if (looksLikeContextOverflow(code, message)) return "contextOverflow";
  return "badRequest";
}

type SdkApiError = AnthropicSdk.APIError | OpenAISdk.APIError;

function isApiError(err: unknown): err is SdkApiError {
  return err instanceof AnthropicSdk.APIError || err instanceof OpenAISdk.APIError;
}

/** The provider's own explanation, without the SDK's "<status> " prefix or the raw JSON around it. */
function apiMessageOf(err: SdkApiError): string {
  const body: unknown = err.error;
  if (body && typeof body === "object") {
    const b = body as { message?: unknown; error?: unknown };
    if (b.error && typeof b.error === "object") {
      const inner = (b.error as { message?: unknown }).message;
      if (typeof inner === "string") return inner;
    }
    if (typeof b.message === "string") return b.message;
    if (typeof b.error === "string") return b.error; // Ollama: {"error":"model 'x' not found"}
  } else if (typeof body === "string") {
    return body;
  }
  return err.message;
}

/** The machine-readable code/type carried by the error body, when any. */
function apiCodeOf(err: SdkApiError): string | null {
  if (err instanceof AnthropicSdk.APIError) return err.errorCode ?? err.type ?? null;
  const code = err.code ?? err.type;
  return typeof code === "string" ? code : null;
}

function errorCode(err: unknown): string | undefined {
  let cur: unknown = err;
  for (let depth = 0; depth < 4 && cur && typeof cur === "object"; depth++) {
    const code = (cur as { code?: unknown }).code;
    if (typeof code === "string") return code;
    cur = (cur as { cause?: unknown }).cause;
  }
  return undefined;
}

const NETWORK_CODES = new Set(["ECONNRESET", "ECONNREFUSED", "ETIMEDOUT", "EPIPE", "ENOTFOUND", "EAI_AGAIN", "UND_ERR_SOCKET", "UND_ERR_CONNECT_TIMEOUT"]);

export function toProviderError(err: unknown, ctx: ErrorContext): ProviderError {
  const p = ctx.provider;
  const msg = (m: string) => redact(`${p}: ${m}`, ctx.secrets);

  // A user cancel is never retryable, whatever shape the SDK gave the failure (it may even
  // look like a connection error or a cut stream).
  if (ctx.signal.aborted) return new ProviderError("aborted", msg("request aborted"), { cause: err });
  if (err instanceof ProviderError) return err;
  if (err instanceof AnthropicSdk.APIUserAbortError || err instanceof OpenAISdk.APIUserAbortError) {
    return new ProviderError("aborted", msg("request aborted"), { cause: err });
  }
  if (err instanceof AnthropicSdk.APIConnectionError || err instanceof OpenAISdk.APIConnectionError) {
    if (!ctx.streamStarted) return connectionFailure(err, p, ctx.endpoint, (m) => redact(m, ctx.secrets));
    return new ProviderError("streamIncomplete", msg(`connection error: ${err.message}`), { cause: err });
  }
  if (isApiError(err)) {
    const apiMessage = apiMessageOf(err);
    const code = apiCodeOf(err);
    if (typeof err.status === "number") {
      const kind = kindFromStatus(err.status, code, apiMessage);
      const retryAfterMs = parseRetryAfterMs(err.headers ?? null);
      return new ProviderError(kind, withKindHint(kind, msg(`HTTP ${err.status}${code ? ` ${code}` : ""}: ${apiMessage}`)), {
        status: err.status,
        retryAfterMs,
        cause: err,
      });
    }
    // No status: an error event inside an already-open stream (Anthropic `error`, chat `{error}` chunk).
    const kind = kindFromCode(code, apiMessage);
    return new ProviderError(kind, withKindHint(kind, msg(`stream error${code ? ` ${code}` : ""}: ${apiMessage}`)), { cause: err });
  }
  if (err instanceof SyntaxError) {
    return new ProviderError("streamIncomplete", msg(`malformed stream chunk: ${err.message}`), { cause: err });
  }
  const e = err instanceof Error ? err : new Error(String(err));
  const code = errorCode(err);
  // undici reports a body cut mid-read as TypeError("terminated") with a socket error as cause.
  if (code !== undefined && NETWORK_CODES.has(code)) {
    return new ProviderError(ctx.streamStarted ? "streamIncomplete" : "network", msg(`${code}: ${e.message}`), { cause: err });
  }
  if (e.message === "terminated" || /premature|ended unexpectedly|other side closed/i.test(e.message)) {
    return new ProviderError(ctx.streamStarted ? "streamIncomplete" : "network", msg(`stream cut: ${e.message}`), { cause: err });
  }
  // An AbortError with our signal not fired is not a user cancel (e.g. an internal timeout).
  if (e.name === "AbortError") return new ProviderError(ctx.streamStarted ? "streamIncomplete" : "network", msg(`aborted by the transport: ${e.message}`), { cause: err });
  // Anything else (SDK misuse, a bug of ours) is not transient: surface it, do not retry it.
  return new ProviderError("badRequest", msg(e.message), { cause: err });
}
