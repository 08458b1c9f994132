/**
 * Compaction that fits the window and keeps the request (DESIGN.md §3.6), the pure part:
 * estimating a request's size, building the summary request so it fits (tool outputs and long texts
 * shortened first, then the oldest messages dropped, as Codex's compact task trims) and carries no
 * tools (tool calls and results become plain text), and choosing the user messages the compacted
 * history keeps verbatim: the newest — the request being worked on — always, shortened with a
 * visible marker (its beginning and end kept) when it alone is over the budget; older ones as the
 * budget allows.
 *
 * Sizes are estimated from the request's JSON at 3 characters per token: deliberately more than
 * real tokenizers give for code and English (about 4), so an estimate that fits, fits.
 */
import type { Message, TextBlock, UserMessage } from "./messages.js";
import { repairToolPairs } from "./repair.js";

export const CHARS_PER_TOKEN = 3;

export const COMPACTION_PROMPT = `Summarize the conversation so far so that the work can continue from the summary alone.
Keep: the user's goals and constraints, decisions made, files and commands involved, what is done, what failed, and what remains.
Answer with the summary only.`;

export const SUMMARY_TAG = "conversation_summary";

/** The least a kept user message is shortened to, whatever the budget says (its head and tail still say what was asked). */
const MIN_KEPT_TOKENS = 64;

export function estimateTokens(value: unknown): number {
  return Math.ceil(JSON.stringify(value).length / CHARS_PER_TOKEN);
}

const isSummary = (m: Message) => m.role === "user" && m.content.some((b) => b.type === "text" && b.text.startsWith(`<${SUMMARY_TAG}>`));

export function summaryMessage(summary: string): UserMessage {
  return { role: "user", content: [{ type: "text", text: `<${SUMMARY_TAG}>\n${summary}\n</${SUMMARY_TAG}>` }] };
}

/** A text cut to its head and tail with a note of what was left out. */
export function shorten(text: string, max: number): string {
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
 * The conversation as a summary request can carry it without tools: tool calls and their results
 * become text (a provider rejects tool blocks in a request that offers no tools), reasoning is left
 * out (its replay data belongs to the request that produced it) and images become a marker.
 */
export function toolFreeConversation(messages: readonly Message[]): Message[] {
  const out: Message[] = [];
  for (const m of messages) {
    if (m.role === "assistant") {
      const content: TextBlock[] = [];
      for (const b of m.content) {
        if (b.type === "text") content.push({ type: "text", text: b.text });
        else if (b.type === "toolCall") content.push({ type: "text", text: `[tool call ${b.name} (${b.id}): ${b.arguments}]` });
      }
      if (content.length > 0) out.push({ role: "assistant", content });
    } else if (m.role === "toolResult") {
      const text = m.content.map((b) => (b.type === "text" ? b.text : "[image]")).join("\n");
      out.push({ role: "user", content: [{ type: "text", text: `[tool result of ${m.toolName} (${m.toolCallId})${m.isError ? ", an error" : ""}:\n${text}\n]` }] });
    } else if (m.role === "user") {
      out.push({ role: "user", content: m.content.map((b) => (b.type === "text" ? b : { type: "text", text: "[image]" })) });
    } else out.push(m);
  }
  return out;
}

export type SummaryInput = { ok: true; messages: Message[]; dropped: number } | { ok: false; reason: string };

/**
 * The conversation part of a summary request whose estimate (with `overhead`: system, the prompt)
 * stays within `budget` tokens, tool-free. Fails — never an empty conversation to summarise — when
 * there is nothing to summarise or not even the newest message fits.
 */
export function fitForSummary(history: readonly Message[], budget: number, overhead: number, started?: ReadonlySet<string>): SummaryInput {
  const fits = (ms: readonly Message[]) => overhead + estimateTokens(toolFreeConversation(ms)) <= budget;
  let messages = repairToolPairs(history, started);
  if (messages.length === 0) return { ok: false, reason: "there is no conversation to summarise" };
  const total = messages.length;
  const done = (): SummaryInput => ({ ok: true, messages: toolFreeConversation(messages), dropped: total - messages.length });
  if (fits(messages)) return done();
  // Tool outputs first (the usual cause of an overflow), then every long text, ever shorter.
  for (const max of [8000, 2000, 500]) {
    messages = capTexts(messages, max, true);
    if (fits(messages)) return done();
  }
  for (const max of [2000, 500]) {
    messages = capTexts(messages, max, false);
    if (fits(messages)) return done();
  }
  // Then the oldest messages go (the repair keeps call/result pairs whole).
  while (messages.length > 0 && !fits(messages)) messages = repairToolPairs(messages.slice(1));
  if (messages.length === 0) return { ok: false, reason: `not even the newest message fits a summary request of ${budget} tokens (the system prompt and the instructions take ${overhead})` };
  return done();
}

/**
 * The user messages (not earlier summaries) the compacted history keeps, oldest first, within
 * `budget` tokens: the newest always — the request being worked on; shortened when it alone is
 * over the budget — then older ones, newest first, while they fit; the first older one that does
 * not fit whole is shortened to what is left (when that is worth keeping) and the walk stops there.
 */
export function keptUserMessages(history: readonly Message[], budget: number): UserMessage[] {
  const users = history.filter((m): m is UserMessage => m.role === "user" && !isSummary(m));
  const out: UserMessage[] = [];
  let left = budget;
  for (let i = users.length - 1; i >= 0; i--) {
    const m = users[i]!;
    const size = estimateTokens(m);
    if (size <= left) {
      out.unshift(m);
      left -= size;
      continue;
    }
    const newest = i === users.length - 1;
    if (newest || left >= MIN_KEPT_TOKENS) out.unshift(shortenUserMessage(m, Math.max(left, MIN_KEPT_TOKENS)));
    break;
  }
  return out;
}

/** A user message cut to about `tokens`: its text's beginning and end with a marker between, images as a marker. */
export function shortenUserMessage(m: UserMessage, tokens: number): UserMessage {
  const text = m.content.map((b) => (b.type === "text" ? b.text : "[image omitted to fit the context window]")).join("\n");
  // The JSON around the text ({"role":"user","content":[{"type":"text","text":…}]}) and the marker take some of it.
  const room = Math.max(2, tokens * CHARS_PER_TOKEN - 120);
  return { role: "user", content: [{ type: "text", text: shorten(text, room) }] };
}
