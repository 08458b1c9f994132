/**
 * Tool-call/result pairing repair (DESIGN.md §3.3). Providers reject a history where a tool call
 * has no result, or a result has no call, with a 400 — and an interrupted turn or a crash leaves
 * exactly such pairs behind. Repair is pure and deterministic, so the same stored history always
 * yields the same request bytes.
 */
import type { Message, ToolCallBlock, ToolResultMessage } from "./messages.js";

export const NOT_EXECUTED = "Tool call was not executed: the turn ended before it ran.";
/** For a call recorded as started: it may have run (a command, a client's tool), so nothing is claimed. */
export const OUTCOME_UNKNOWN = "Tool call was interrupted; its outcome is unknown: it had started and may have taken effect. Check before retrying.";

export function syntheticResult(call: ToolCallBlock, text = NOT_EXECUTED): ToolResultMessage {
  return { role: "toolResult", toolCallId: call.id, toolName: call.name, content: [{ type: "text", text }], isError: true };
}

const NONE: ReadonlySet<string> = new Set();

/**
 * Returns a history where every assistant tool call is followed (before the next non-result
 * message) by exactly one result, in call order, and no result lacks its call. A missing result
 * tells the truth: "not executed" only for a call that never started; a call in `started`
 * (recorded as started by the host, e.g. before a crash) gets OUTCOME_UNKNOWN.
 */
export function repairToolPairs(messages: readonly Message[], started: ReadonlySet<string> = NONE): Message[] {
  const out: Message[] = [];
  let i = 0;
  while (i < messages.length) {
    const m = messages[i]!;
    if (m.role === "toolResult") {
      i++; // a result not directly after its assistant message is an orphan
      continue;
    }
    out.push(m);
    i++;
    if (m.role !== "assistant") continue;
    const calls = m.content.filter((b): b is ToolCallBlock => b.type === "toolCall");
    const results = new Map<string, ToolResultMessage>();
    while (i < messages.length && messages[i]!.role === "toolResult") {
      const r = messages[i] as ToolResultMessage;
      if (!results.has(r.toolCallId)) results.set(r.toolCallId, r);
      i++;
    }
    for (const call of calls) out.push(results.get(call.id) ?? syntheticResult(call, started.has(call.id) ? OUTCOME_UNKNOWN : NOT_EXECUTED));
  }
  return out;
}
