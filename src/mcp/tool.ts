/**
 * An MCP server's tool as a source for the tool host (src/tools/host.ts): an `mcpToolCall` item
 * around the call, the approval asked through `mcpServer/elicitation/request` (Codex's way of
 * asking about MCP tool calls: a form with the choices below), and the result mapped to what the
 * model accepts (text and images; resources as text; long output shortened like shell output).
 *
 * When to ask: a tool that says `readOnlyHint: true` never asks (and may run beside other
 * read-only tools); others ask under `untrusted` and `on-request` (and granular with
 * sandbox_approval) unless the user approved that tool for the session; `never` runs them — the
 * server process itself is confined by its own sandbox (src/mcp/config.ts).
 */
import type { CallToolResult, ElicitRequest, ElicitResult } from "@modelcontextprotocol/sdk/types.js";
import type { ImageBlock, TextBlock } from "../agent/messages.js";
import type { LoopTool, ToolOutcome } from "../agent/tools.js";
import { McpServerElicitationRequestResponse } from "../protocol/mcp.js";
import { policyMode } from "../tools/approval.js";
import type { ToolContext } from "../tools/context.js";
import { hostRawTool, type ToolResult } from "../tools/host.js";
import { truncateMiddle } from "../tools/process.js";
import type { McpManager, McpToolEntry } from "./manager.js";

export const APPROVE_ONCE = "Approve Once";
export const APPROVE_SESSION = "Approve this Session";
export const DENY = "Deny";
/** Bytes of text the model gets from one call (head + tail), as for shell output. */
const MODEL_TEXT_BYTES = 32 * 1024;

export const mcpApprovalKey = (server: string, tool: string) => `mcp:${server}/${tool}`;

type Answer = "accept" | "acceptForSession" | "decline" | "cancel";

export function mcpTool(entry: McpToolEntry, manager: McpManager, ctx: ToolContext): LoopTool {
  const { server, tool } = entry;
  const readOnly = (entry.tool.annotations as { readOnlyHint?: boolean } | undefined)?.readOnlyHint === true;
  const key = mcpApprovalKey(server, tool.name);
  return hostRawTool(
    {
      name: entry.modelName,
      description: tool.description ?? `${tool.name} (MCP server ${server})`,
      inputSchema: tool.inputSchema as Record<string, unknown>,
      readOnly,
      async plan(call) {
        const args = argumentsOf(call.arguments, entry.modelName);
        if ("content" in args) return args;
        const mustAsk = !readOnly && policyMode(ctx.approvalPolicy) !== "never" && !ctx.sessionApprovals.has(key);
        return {
          item: callItem(entry, args.value, readOnly),
          gate: { action: "run" },
          notRun: (_why, reason, elapsedMs) => failedCall(`Not run: ${reason}.`, Date.now() - elapsedMs),
          async execute(host, signal): Promise<ToolResult> {
            if (mustAsk) {
              const refused = await approvalFirst(ctx, entry, key, args.value, host.startedAtMs, signal);
              if (refused !== null) return refused;
            }
            return callServer(ctx, manager, entry, args.value, host, signal);
          },
        };
      },
    },
    ctx,
  );
}

/** The call's arguments as a JSON object, or the outcome telling the model why they are not one. */
function argumentsOf(text: string, modelName: string): { value: Record<string, unknown> } | ToolOutcome {
  let args: unknown;
  try {
    args = text.trim() === "" ? {} : JSON.parse(text);
  } catch (err) {
    return { content: [{ type: "text", text: `Invalid arguments for ${modelName}: not valid JSON (${(err as Error).message}).` }], isError: true };
  }
  if (typeof args !== "object" || args === null || Array.isArray(args))
    return { content: [{ type: "text", text: `Invalid arguments for ${modelName}: expected a JSON object.` }], isError: true };
  return { value: args as Record<string, unknown> };
}

/** The mcpToolCall item as it starts. */
function callItem(entry: McpToolEntry, args: Record<string, unknown>, readOnly: boolean) {
  return {
    type: "mcpToolCall" as const,
    server: entry.server,
    environmentId: null,
    tool: entry.tool.name,
    status: "inProgress",
    arguments: args,
    appContext: null,
    mcpAppUi: null,
    pluginId: null,
    readOnlyHint: readOnly,
    result: null,
    error: null,
    durationMs: null,
  };
}

/** A call that failed or did not run: the item failed with `message`, which the model is told too. */
function failedCall(message: string, startedAtMs: number): ToolResult {
  return {
    patch: { status: "failed", error: { message }, durationMs: Date.now() - startedAtMs },
    outcome: { content: [{ type: "text", text: message }], isError: true },
  };
}

/** Asks the thread's clients; null when the call may run (a session approval is remembered), else the declined or cancelled result. */
async function approvalFirst(
  ctx: ToolContext,
  entry: McpToolEntry,
  key: string,
  args: Record<string, unknown>,
  startedAtMs: number,
  signal: AbortSignal,
): Promise<ToolResult | null> {
  const answer = await askApproval(ctx, entry.server, entry.tool.name, args, signal);
  if (answer === "acceptForSession") ctx.sessionApprovals.add(key);
  if (answer !== "decline" && answer !== "cancel") return null;
  const r = failedCall(
    answer === "cancel"
      ? "The user cancelled this MCP tool call; it was not run and the turn is ending."
      : "The user declined this MCP tool call; it was not run. Do not retry it unchanged; choose another approach or ask the user.",
    startedAtMs,
  );
  return answer === "cancel" ? { ...r, outcome: { ...r.outcome, endTurn: true } } : r;
}

/** Calls the tool on its server and maps the result to the item and the model's outcome. */
async function callServer(
  ctx: ToolContext,
  manager: McpManager,
  entry: McpToolEntry,
  args: Record<string, unknown>,
  host: { itemId: string; startedAtMs: number },
  signal: AbortSignal,
): Promise<ToolResult> {
  const { server, tool } = entry;
  let result: CallToolResult;
  try {
    const conn = manager.server(server);
    if (!conn) return failedCall(`MCP server ${server} is no longer configured.`, host.startedAtMs);
    // An elicitation the server sends during the call goes to this thread's clients.
    result = await manager.withAsker(server, (params) => forwardElicitation(ctx, server, params, signal), () =>
      conn.callTool(tool.name, args, signal, (message) => ctx.mcpProgress?.(host.itemId, message)),
    );
  } catch (err) {
    return failedCall(`MCP tool ${server}/${tool.name} failed: ${(err as Error).message}`, host.startedAtMs);
  }
  const ok = result.isError !== true;
  return {
    patch: {
      status: ok ? "completed" : "failed",
      result: { content: result.content, structuredContent: result.structuredContent ?? null, _meta: result._meta ?? null },
      error: ok ? null : { message: textOf(result).slice(0, 2_000) || "the tool reported an error" },
      durationMs: Date.now() - host.startedAtMs,
    },
    outcome: modelOutcome(result),
  };
}

/** One round trip to the thread's clients; anything unusable counts as decline. */
async function askApproval(ctx: ToolContext, server: string, tool: string, args: Record<string, unknown>, signal: AbortSignal): Promise<Answer> {
  const shown = JSON.stringify(args, null, 2);
  const reply = await ctx.askClients(
    "mcpServer/elicitation/request",
    {
      threadId: ctx.threadId,
      turnId: ctx.turnId,
      serverName: server,
      environmentId: null,
      mode: "form",
      _meta: { codex_approval_kind: "mcp_tool_call", tool },
      message: `Allow the MCP server "${server}" to run its tool "${tool}"?\n\nArguments:\n${shown.length > 4_000 ? `${shown.slice(0, 4_000)}\n…` : shown}`,
      requestedSchema: {
        type: "object",
        properties: { decision: { type: "string", title: "Decision", enum: [APPROVE_ONCE, APPROVE_SESSION, DENY] } },
        required: ["decision"],
      },
    },
    signal,
  );
  if (reply === null) return "cancel";
  const parsed = McpServerElicitationRequestResponse.safeParse(reply.result);
  if (reply.error || !parsed.success) return "decline";
  if (parsed.data.action !== "accept") return parsed.data.action;
  const decision = (parsed.data.content as { decision?: unknown } | null | undefined)?.decision;
  if (decision === APPROVE_SESSION) return "acceptForSession";
  if (decision === DENY) return "decline";
  return "accept"; // accept with the once choice, or without content
}

/** An elicitation from the MCP server itself, asked of the thread's clients as Codex does. */
async function forwardElicitation(ctx: ToolContext, server: string, params: ElicitRequest["params"], signal: AbortSignal): Promise<ElicitResult> {
  if (!("requestedSchema" in params)) return { action: "decline" }; // URL mode: not offered (no browser flow here)
  const reply = await ctx.askClients(
    "mcpServer/elicitation/request",
    { threadId: ctx.threadId, turnId: ctx.turnId, serverName: server, environmentId: null, mode: "form", _meta: params._meta ?? null, message: params.message, requestedSchema: params.requestedSchema },
    signal,
  );
  const parsed = reply && !reply.error ? McpServerElicitationRequestResponse.safeParse(reply.result) : null;
  if (!parsed?.success) return { action: reply === null ? "cancel" : "decline" };
  const content = parsed.data.content;
  return parsed.data.action === "accept" && content && typeof content === "object" && !Array.isArray(content)
    ? { action: "accept", content: content as Record<string, string | number | boolean | string[]> }
    : { action: parsed.data.action === "accept" ? "decline" : parsed.data.action };
}

const textOf = (r: CallToolResult) =>
  r.content
    .map((c) => (c.type === "text" ? c.text : ""))
    .filter(Boolean)
    .join("\n");

/** What the model gets: text and images as they are; resources, audio and links described. */
export function modelOutcome(r: CallToolResult): ToolOutcome {
  const blocks: Array<TextBlock | ImageBlock> = [];
  for (const c of r.content) {
    if (c.type === "text") blocks.push({ type: "text", text: c.text });
    else if (c.type === "image") blocks.push({ type: "image", url: `data:${c.mimeType};base64,${c.data}` });
    else if (c.type === "resource") {
      const res = c.resource as { uri: string; mimeType?: string; text?: string };
      blocks.push({ type: "text", text: res.text !== undefined ? `[resource ${res.uri}]\n${res.text}` : `[binary resource ${res.uri} (${res.mimeType ?? "unknown type"})]` });
    } else if (c.type === "resource_link") blocks.push({ type: "text", text: `[resource link ${c.uri}${c.name ? ` (${c.name})` : ""}]` });
    else if (c.type === "audio") blocks.push({ type: "text", text: `[audio (${c.mimeType}) omitted]` });
  }
  if (blocks.length === 0 && r.structuredContent !== undefined) blocks.push({ type: "text", text: JSON.stringify(r.structuredContent) });
  if (blocks.length === 0) blocks.push({ type: "text", text: "(no output)" });
  // Long text is shortened to its head and tail, as shell output is.
  const capped = blocks.map((b) => (b.type === "text" ? { ...b, text: truncateMiddle(b.text, MODEL_TEXT_BYTES).text } : b));
  return { content: capped, isError: r.isError === true };
}
