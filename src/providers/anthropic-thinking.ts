/**
 * How a Claude model is asked to think, from Codex's reasoning effort.
 *
 * Two request forms exist, and which one a model takes depends on its generation:
 * - budget: `thinking: {type: "enabled", budget_tokens}` — the only form Claude ≤ 4.5 knows;
 * - adaptive: `thinking: {type: "adaptive"}` + `output_config: {effort}` — Claude 4.6 and later.
 *   The Claude 5 family, Opus 4.7+ and Mythos reject the budget form with HTTP 400
 *   ("thinking.type.enabled is not supported for this model"), so sending it there failed every
 *   turn that carried an effort, with the default model.
 * A name without a recognisable Claude version (a proxy's alias) keeps the budget form, which is
 * what such deployments got before.
 */
import type { OutputConfig, ThinkingConfigParam } from "@anthropic-ai/sdk/resources/messages";
import type { ReasoningEffort } from "./types.js";

/** Thinking budgets per effort for the budget form. Anthropic's minimum budget is 1024. */
export const ANTHROPIC_THINKING_BUDGETS: Record<Exclude<ReasoningEffort, "none">, number> = {
  minimal: 1024,
  low: 2048,
  medium: 8192,
  high: 24576,
  xhigh: 32768,
};

export interface ClaudeVersion {
  family: string;
  major: number;
  minor: number;
}

/**
 * Family and version of a Claude model id: `claude-sonnet-5-5`, `claude-opus-4-6`,
 * `claude-haiku-4-5-20251001`, `claude-3-7-sonnet-latest`, Bedrock's `us.anthropic.claude-opus-4-7`.
 * The minor version is one or two digits, so a date suffix is never read as one.
 */
export function parseClaudeVersion(model: string): ClaudeVersion | null {
  const name = model.toLowerCase();
  const modern = /claude-([a-z]+)-(\d{1,2})(?:-(\d{1,2}))?(?![\d.])/.exec(name);
  if (modern) return { family: modern[1], major: Number(modern[2]), minor: Number(modern[3] ?? 0) };
  const legacy = /claude-(\d{1,2})(?:-(\d{1,2}))?-([a-z]+)/.exec(name);
  if (legacy) return { family: legacy[3], major: Number(legacy[1]), minor: Number(legacy[2] ?? 0) };
  return null;
}

/** Whether the model takes the adaptive form (and, for 5.x and Opus 4.7+, only that form). */
export function usesAdaptiveThinking(model: string): boolean {
  if (/claude-mythos-preview/.test(model.toLowerCase())) return true;
  const v = parseClaudeVersion(model);
  if (!v) return false;
  return v.major > 4 || (v.major === 4 && v.minor >= 6);
}

/**
 * The `xhigh` effort level exists from Opus 4.7 on and in the Claude 5 family; Claude 4.6, Haiku and
 * Mythos Preview take at most `high` (besides `max`, which Codex has no name for).
 */
function supportsXhigh(model: string): boolean {
  const v = parseClaudeVersion(model);
  if (!v || v.family === "haiku") return false;
  return v.major > 4 || (v.major === 4 && v.minor >= 7);
}

export type AnthropicThinking =
  | { form: "none" }
  | { form: "budget"; thinking: ThinkingConfigParam; budgetTokens: number }
  | { form: "adaptive"; thinking: ThinkingConfigParam; outputConfig: OutputConfig };

/** What to send for `effort` on `model`; nothing at all when no effort (or "none") is asked for. */
export function anthropicThinking(model: string, effort: ReasoningEffort | null | undefined): AnthropicThinking {
  if (effort == null || effort === "none") return { form: "none" };
  if (!usesAdaptiveThinking(model)) {
    const budgetTokens = ANTHROPIC_THINKING_BUDGETS[effort];
    return { form: "budget", thinking: { type: "enabled", budget_tokens: budgetTokens }, budgetTokens };
  }
  const level: NonNullable<OutputConfig["effort"]> =
    effort === "minimal" || effort === "low" ? "low" : effort === "xhigh" ? (supportsXhigh(model) ? "xhigh" : "high") : effort;
  // display "summarized": some adaptive models omit the thinking text by default, and clients show
  // it as the reasoning item's text.
  return { form: "adaptive", thinking: { type: "adaptive", display: "summarized" }, outputConfig: { effort: level } };
}
