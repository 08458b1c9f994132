/**
 * Compaction that fits the window (DESIGN.md §3.6), the pure part: estimating a request's size,
 * shrinking the summary request until it fits (tool outputs and long texts shortened first, then
 * the oldest messages dropped, as Codex's compact task trims), and building the replacement
 * history: environment, the most recent user messages verbatim, then the summary.
 *
 * Sizes are estimated from the request's JSON at 3 characters per token: deliberately more than
 * real tokenizers give for code and English (about 4), so an estimate that fits, fits.
 */
import type { Message, UserMessage } from "./messages.js";
import { repairToolPairs } from "./repair.js";

export const CHARS_PER_TOKEN = 3;

export const COMPACTION_PROMPT = `Summarize the conversation so far so that the work can continue from the summary alone.
Keep: the user's goals and constraints, decisions made, files and commands involved, what is done, what failed, and what remains.
Answer with the summary only.`;

export const SUMMARY_TAG = "conversation_summary";

export function estimateTokens(value: unknown): number {
  return Math.ceil(JSON.stringify(value).length / CHARS_PER_TOKEN);
}

const isSummary = (m: Message) => m.role === "user" && m.content.some((b) => b.type === "text" && b.text.startsWith(`<${SUMMARY_TAG}>`));

export function summaryMessage(summary: string): UserMessage {
  return { role: "user", content: [{ type: "text", text: `<${SUMMARY_TAG}>\n${summary}\n</${SUMMARY_TAG}>` }] };
}

/** A text cut to its head and tail with a note of what was left out. */
function shorten(text: string, max: number): string {
  if (text.length <= max) return text;
  const half = Math.max(1, Math.floor(max / 2));
  return `${text.slice(0, half)}\n[… ${text.length - 2 * half} characters omitted to fit the context window …]\n${text.slice(-half)}`;
}

function capTexts(messages: readonly Message[], max: number, toolResultsOnly: boolean): Message[] {
  return messages.map((m) => {
    if (toolResultsOnly && m.role !== "toolResult") return m;
    if (m.role === "assistant") return { ...m, content: m.content.map((b) => (b.type === "text" ? { ...b, text: shorten(b.text, max) } : b)) };
    return { ...m, content: m.content.map((b) => (b.type === "text" ? { ...b, text: shorten(b.text, max) } : b)) } as Message;
  });
}

/**
 * The conversation part of a summary request whose estimate (with `overhead`: system, tools, the
 * prompt) stays within `budget` tokens; null when not even the prompt fits.
 */
export function fitForSummary(history: readonly Message[], budget: number, overhead: number, started?: ReadonlySet<string>): Message[] | null {
  const fits = (ms: readonly Message[]) => overhead + estimateTokens(ms) <= budget;
  let messages = repairToolPairs(history, started);
  if (fits(messages)) return messages;
  // Tool outputs first (the usual cause of an overflow), then every long text, ever shorter.
  for (const max of [8000, 2000, 500]) {
    messages = capTexts(messages, max, true);
    if (fits(messages)) return messages;
  }
  for (const max of [2000, 500]) {
    messages = capTexts(messages, max, false);
    if (fits(messages)) return messages;
  }
  // Then the oldest messages go (the repair keeps call/result pairs whole).
  while (messages.length > 0 && !fits(messages)) messages = repairToolPairs(messages.slice(1));
  return overhead <= budget ? messages : null;
}

/** The newest user messages (not earlier summaries), oldest first, within `budget` tokens. */
export function recentUserMessages(history: readonly Message[], budget: number): UserMessage[] {
  const out: UserMessage[] = [];
  let used = 0;
  for (let i = history.length - 1; i >= 0; i--) {
    const m = history[i]!;
    if (m.role !== "user" || isSummary(m)) continue;
    const size = estimateTokens(m);
    if (used + size > budget) break;
    used += size;
    out.unshift(m);
  }
  return out;
}
