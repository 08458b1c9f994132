/**
 * Dynamic tools: declared by the client in thread/start, executed by the client. A call becomes a
 * `dynamicToolCall` item and an `item/tool/call` server request; the client's
 * `{contentItems, success}` is the tool result. A source for the tool host (host.ts), which
 * records the item around the client's round trip.
 */
import type { LoopTool, ToolOutcome } from "../agent/tools.js";
import type { DynamicToolSpec } from "../protocol/thread.js";
import { DynamicToolCallResponse } from "../protocol/tools.js";
import type { ToolContext } from "./context.js";
import { hostRawTool, type ToolResult } from "./host.js";

export function dynamicTool(spec: DynamicToolSpec, ctx: ToolContext): LoopTool {
  return hostRawTool(
    {
      name: spec.name,
      description: spec.description,
      inputSchema: spec.inputSchema as Record<string, unknown>,
      readOnly: false, // the client may do anything; never run it concurrently
      async plan(call) {
        let args: unknown;
        try {
          args = call.arguments.trim() === "" ? {} : JSON.parse(call.arguments);
        } catch {
          args = call.arguments; // not JSON: the client gets the text as the model sent it
        }
        const draft = { type: "dynamicToolCall" as const, namespace: null, tool: spec.name, arguments: args, status: "inProgress", contentItems: null, success: null, durationMs: null };
        const failed = (text: string, startedAtMs: number): ToolResult => ({
          patch: { status: "failed", contentItems: [{ type: "inputText", text }], success: false, durationMs: Date.now() - startedAtMs },
          outcome: { content: [{ type: "text", text }], isError: true },
        });
        return {
          item: draft,
          gate: { action: "run" },
          notRun: (_why, reason, elapsedMs) => failed(`Not run: ${reason}.`, Date.now() - elapsedMs),
          async execute(host, signal): Promise<ToolResult> {
            if (typeof args !== "object" || args === null || Array.isArray(args)) return failed(`Invalid arguments for ${spec.name}: expected a JSON object.`, host.startedAtMs);
            const reply = await ctx.askClients("item/tool/call", { threadId: ctx.threadId, turnId: ctx.turnId, callId: call.id, namespace: null, tool: spec.name, arguments: args }, signal);
            if (reply === null) return failed("The tool call was cancelled: the turn was interrupted.", host.startedAtMs);
            if (reply.error) return failed(`The client failed to run ${spec.name}: ${reply.error.message}`, host.startedAtMs);
            const parsed = DynamicToolCallResponse.safeParse(reply.result);
            if (!parsed.success) return failed(`The client answered ${spec.name} with an invalid result.`, host.startedAtMs);
            const { contentItems, success } = parsed.data;
            const outcome: ToolOutcome = {
              content: contentItems.map((c) => (c.type === "inputText" ? { type: "text" as const, text: c.text } : { type: "image" as const, url: c.imageUrl })),
              isError: !success,
            };
            return { patch: { status: success ? "completed" : "failed", contentItems, success, durationMs: Date.now() - host.startedAtMs }, outcome };
          },
        };
      },
    },
    ctx,
  );
}
