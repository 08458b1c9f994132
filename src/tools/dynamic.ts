/**
 * Dynamic tools: declared by the client in thread/start, executed by the client. A call becomes a
 * `dynamicToolCall` item and an `item/tool/call` server request; the client's
 * `{contentItems, success}` is the tool result.
 */
import type { ToolCallBlock } from "../agent/messages.js";
import type { LoopTool, ToolOutcome } from "../agent/tools.js";
import type { DynamicToolSpec } from "../protocol/thread.js";
import { DynamicToolCallResponse } from "../protocol/tools.js";
import type { ToolContext } from "./context.js";

export function dynamicTool(spec: DynamicToolSpec, ctx: ToolContext): LoopTool {
  return {
    spec: { name: spec.name, description: spec.description, inputSchema: spec.inputSchema as Record<string, unknown> },
    readOnly: false, // the client may do anything; never run it concurrently
    async execute(call: ToolCallBlock, signal: AbortSignal): Promise<ToolOutcome> {
      const started = Date.now();
      const id = ctx.newItemId();
      let args: unknown;
      try {
        args = call.arguments.trim() === "" ? {} : JSON.parse(call.arguments);
      } catch {
        args = call.arguments;
      }
      const base = { type: "dynamicToolCall" as const, id, namespace: null, tool: spec.name, arguments: args, startedAtMs: started };
      await ctx.startItem({ ...base, status: "inProgress", contentItems: null, success: null, durationMs: null });
      const fail = async (text: string): Promise<ToolOutcome> => {
        await ctx.completeItem({ ...base, status: "failed", contentItems: [{ type: "inputText", text }], success: false, durationMs: Date.now() - started, completedAtMs: Date.now() });
        return { content: [{ type: "text", text }], isError: true };
      };
      if (typeof args !== "object" || args === null || Array.isArray(args)) return fail(`Invalid arguments for ${spec.name}: expected a JSON object.`);

      const reply = await ctx.askClients("item/tool/call", { threadId: ctx.threadId, turnId: ctx.turnId, callId: call.id, namespace: null, tool: spec.name, arguments: args }, signal);
      if (reply === null) return fail("The tool call was cancelled: the turn was interrupted.");
      if (reply.error) return fail(`The client failed to run ${spec.name}: ${reply.error.message}`);
      const parsed = DynamicToolCallResponse.safeParse(reply.result);
      if (!parsed.success) return fail(`The client answered ${spec.name} with an invalid result.`);
      const { contentItems, success } = parsed.data;
      await ctx.completeItem({ ...base, status: success ? "completed" : "failed", contentItems, success, durationMs: Date.now() - started, completedAtMs: Date.now() });
      return {
        content: contentItems.map((c) => (c.type === "inputText" ? { type: "text" as const, text: c.text } : { type: "image" as const, url: c.imageUrl })),
        isError: !success,
      };
    },
  };
}
