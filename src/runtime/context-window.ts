/**
 * The model's context window reported with token usage (`thread/tokenUsage/updated`
 * `modelContextWindow`, which Codex's TUI shows as "Context window" in /status): the configured
 * one (APP_SERVER_CONTEXT_WINDOW), else what the provider documents for its current models —
 * Anthropic's Claude models 200 000 tokens, OpenAI's GPT-5 family 272 000 input tokens (the window
 * Codex's own model metadata gives them). An OpenAI-compatible server (`openai-chat`: Ollama,
 * vLLM …) may run any model, so nothing is guessed there: null until configured.
 */
const PROVIDER_WINDOWS: Record<string, number> = { anthropic: 200_000, openai: 272_000 };

export function contextWindowOf(configured: number | undefined, provider: string): number | null {
  return configured ?? PROVIDER_WINDOWS[provider] ?? null;
}
