/**
 * A provider of tools for a turn — built-in, the client's dynamic tools, MCP servers — as the
 * turn's tool host (runtime/tool-host.ts) takes them. `Thread` is the runtime's loaded thread: a
 * source may read it (its dynamic tools, its MCP servers), but it is the runtime's type, not a
 * tool's, so this layer leaves it open.
 */
import type { LoopTool } from "../agent/tools.js";
import type { ToolContext } from "./context.js";

export interface ToolSource<Thread = unknown> {
  readonly name: string;
  tools(ctx: ToolContext, thread: Thread): LoopTool[];
  /** Resolves when the source's tool list is worth taking (MCP servers started); bounded by the source. */
  ready?(signal: AbortSignal, thread?: Thread): Promise<void>;
}
