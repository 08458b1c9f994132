/** What the loop needs from a tool. Side effects, approvals and workspace checks live in tools. */
import type { ImageBlock, TextBlock, ToolCallBlock } from "./messages.js";
import type { ToolSpec } from "../providers/types.js";

export interface ToolOutcome {
  content: Array<TextBlock | ImageBlock>;
  isError: boolean;
  /** The user cancelled at an approval prompt: the turn ends `interrupted` after this result. */
  endTurn?: boolean;
  /** A preToolUse hook blocked the call: it did not run (so no postToolUse hook runs for it). */
  blockedByHook?: boolean;
}

export interface LoopTool {
  readonly spec: ToolSpec;
  /** Read-only tools may run concurrently with their read-only neighbours (DESIGN.md §3.7). */
  readonly readOnly: boolean;
  /**
   * The tool host runs the call's preToolUse gate itself (ToolContext.preToolUse), once it has the
   * call's item, so a vetoed call is that item closed with the veto's reason. Others are gated by
   * the runtime before `execute`.
   */
  readonly gatesPreToolUse?: boolean;
  execute(call: ToolCallBlock, signal: AbortSignal): Promise<ToolOutcome>;
}

export const textOutcome = (text: string, isError = false): ToolOutcome => ({ content: [{ type: "text", text }], isError });

/** What the model is told of a call a preToolUse hook blocked. */
export const hookBlockedText = (reason: string) => `A hook blocked this call: ${reason}. It was not run.`;

/** The outcome of a call a preToolUse hook blocked. */
export const hookBlockedOutcome = (reason: string): ToolOutcome => ({ ...textOutcome(hookBlockedText(reason), true), blockedByHook: true });

/**
 * A failure of the host around a tool (recording its item, publishing, the approval bookkeeping),
 * not of the tool. It is never turned into a tool result: the side effect may have happened, and
 * telling the model "the tool failed" would make it run it again (DESIGN.md §4). The loop ends
 * the turn with it instead.
 */
export class ToolHostError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "ToolHostError";
  }
}
