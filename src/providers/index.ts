/**
 * The one place that knows which adapters exist. Everything else holds a ModelProvider.
 */
import type { ModelProvider, ModelRequest, ProviderStreamEvent } from "./types.js";

export type ProviderId = "anthropic" | "openai" | "openai-chat";

export const PROVIDER_IDS: readonly ProviderId[] = ["anthropic", "openai", "openai-chat"];

export interface ProviderOptions {
  /** Defaults to the SDK's env var (ANTHROPIC_API_KEY / OPENAI_API_KEY). */
  apiKey?: string;
  /** Defaults to ANTHROPIC_BASE_URL / OPENAI_BASE_URL. Anthropic: no /v1; OpenAI: with /v1. */
  baseURL?: string;
  /** openai-chat only: role used for developer messages. Default "developer". */
  chatDeveloperRole?: "developer" | "system";
  /** openai-chat only: send `prompt_cache_key`. Default false. */
  sendPromptCacheKeyToChat?: boolean;
  /** Used when a request has no maxOutputTokens (Anthropic falls back to 8192, as it requires one). */
  defaultMaxOutputTokens?: number;
  /** Time allowed until response headers arrive (SDK `timeout`). */
  timeoutMs?: number;
}

export function isProviderId(v: unknown): v is ProviderId {
  return typeof v === "string" && (PROVIDER_IDS as readonly string[]).includes(v);
}

/**
 * Builds a provider. Never throws for missing credentials: the first `stream()` call fails with
 * an `auth` ProviderError instead, so a server can start and report the problem per turn.
 */
export function createProvider(id: ProviderId, opts: ProviderOptions = {}): ModelProvider {
  return new LazyProvider(id, () => loadProvider(id, opts));
}

/**
 * Loads the adapter (and its SDK: tens of milliseconds and megabytes) on the first model call,
 * not at start-up; most servers use one provider, some none.
 */
export class LazyProvider implements ModelProvider {
  private real: Promise<ModelProvider> | undefined;
  private loaded: ModelProvider | undefined;
  constructor(
    readonly id: ProviderId,
    private readonly load: () => Promise<ModelProvider>,
  ) {}

  stream(request: ModelRequest, signal: AbortSignal): AsyncIterable<ProviderStreamEvent> {
    // Once loaded, the adapter's own stream: no extra generator step per event.
    if (this.loaded) return this.loaded.stream(request, signal);
    return this.first(request, signal);
  }

  private async *first(request: ModelRequest, signal: AbortSignal): AsyncIterable<ProviderStreamEvent> {
    this.real ??= this.load().then(
      (p) => (this.loaded = p),
      (err: unknown) => {
        // Said as what it is (a broken installation, not a model error), and tried again next call.
        this.real = undefined;
        throw new Error(`could not load the ${this.id} provider (its SDK, loaded on first use): ${err instanceof Error ? err.message : String(err)}`, { cause: err });
      },
    );
    yield* (await this.real).stream(request, signal);
  }
}

async function loadProvider(id: ProviderId, opts: ProviderOptions): Promise<ModelProvider> {
  switch (id) {
    case "anthropic": {
      const { AnthropicProvider } = await import("./anthropic.js");
      return new AnthropicProvider({
        apiKey: opts.apiKey,
        baseURL: opts.baseURL,
        defaultMaxOutputTokens: opts.defaultMaxOutputTokens,
        timeoutMs: opts.timeoutMs,
      });
    }
    case "openai": {
      const { OpenAIResponsesProvider } = await import("./openai-responses.js");
      return new OpenAIResponsesProvider({
        apiKey: opts.apiKey,
        baseURL: opts.baseURL,
        defaultMaxOutputTokens: opts.defaultMaxOutputTokens,
        timeoutMs: opts.timeoutMs,
      });
    }
    case "openai-chat": {
      const { OpenAIChatProvider } = await import("./openai-chat.js");
      return new OpenAIChatProvider(opts);
    }
    default: {
      const never: never = id;
      throw new Error(`unknown provider: ${String(never)}`);
    }
  }
}

export type { ModelProvider, ModelRequest, ProviderStreamEvent, ToolSpec } from "./types.js";
export { ProviderError } from "./types.js";
