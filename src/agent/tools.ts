/** What the loop needs from a tool. Side effects, approvals and workspace checks live in tools. */
import type { ImageBlock, TextBlock, ToolCallBlock } from "./messages.js";
import type { ToolSpec } from "../providers/types.js";

export interface ToolOutcome {
  content: Array<TextBlock | ImageBlock>;
  isError: boolean;
  /** The user cancelled at an approval prompt: the turn ends `interrupted` after this result. */
  endTurn?: boolean;
}

export interface LoopTool {
  readonly spec: ToolSpec;
  /** Read-only tools may run concurrently with their read-only neighbours (DESIGN.md §3.7). */
  readonly readOnly: boolean;
  execute(call: ToolCallBlock, signal: AbortSignal): Promise<ToolOutcome>;
}

export const textOutcome = (text: string, isError = false): ToolOutcome => ({ content: [{ type: "text", text }], isError });
