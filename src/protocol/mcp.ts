/** MCP servers as Codex v2 exposes them: status listing, reload, direct calls, resources, elicitation, items. */
import { z } from "zod";
import { JsonValue } from "./common.js";

const json = JsonValue;

export const McpTool = z
  .object({
    name: z.string(),
    title: z.string().optional(),
    description: z.string().optional(),
    inputSchema: json,
    outputSchema: json.optional(),
    annotations: json.optional(),
    icons: z.array(json).optional(),
    _meta: json.optional(),
  })
  .meta({ id: "Tool" });

export const McpResource = z
  .object({
    annotations: json.optional(),
    description: z.string().optional(),
    mimeType: z.string().optional(),
    name: z.string(),
    size: z.number().optional(),
    title: z.string().optional(),
    uri: z.string(),
    icons: z.array(json).optional(),
    _meta: json.optional(),
  })
  .meta({ id: "Resource" });

export const McpResourceTemplate = z
  .object({
    annotations: json.optional(),
    uriTemplate: z.string(),
    name: z.string(),
    title: z.string().optional(),
    description: z.string().optional(),
    mimeType: z.string().optional(),
  })
  .meta({ id: "ResourceTemplate" });

export const McpServerInfo = z
  .object({
    name: z.string(),
    title: z.string().nullable(),
    version: z.string(),
    description: z.string().nullable(),
    icons: z.array(json).nullable(),
    websiteUrl: z.string().nullable(),
  })
  .meta({ id: "McpServerInfo" });

export const McpServerConnectionStatus = z
  .enum(["notStarted", "starting", "connected", "authenticationRequired", "failed", "cancelled", "disabled"])
  .meta({ id: "McpServerConnectionStatus" });

export const McpServerStatus = z
  .object({
    name: z.string(),
    environmentId: z.string().nullable().optional(),
    runtimeStatus: McpServerConnectionStatus.nullable(),
    pluginId: z.string().nullable(),
    httpOrigin: z.string().nullable(),
    serverInfo: McpServerInfo.nullable(),
    serverCapabilities: json.nullable(),
    toolListMeta: json.nullable(),
    tools: z.record(z.string(), McpTool),
    toolsError: z.string().nullable(),
    resources: z.array(McpResource),
    resourceTemplates: z.array(McpResourceTemplate),
    /**
     * Ours, not Codex's (its status has only `toolsError`): in the full view, why this ready
     * server's resources could not be listed (its `resources` are then empty); null when they were.
     */
    resourcesError: z.string().nullable().optional(),
    authStatus: z.enum(["unknown", "unsupported", "notLoggedIn", "bearerToken", "oAuth"]),
  })
  .meta({ id: "McpServerStatus" });

export const ListMcpServerStatusParams = z
  .object({
    cursor: z.string().nullable().optional(),
    limit: z.number().int().positive().nullable().optional(),
    detail: z.enum(["full", "toolsAndAuthOnly"]).nullable().optional(),
    threadId: z.string().nullable().optional(),
    serverName: z.string().nullable().optional(),
    environmentId: z.string().nullable().optional(),
  })
  .meta({ id: "ListMcpServerStatusParams" });

export const ListMcpServerStatusResponse = z
  .object({ data: z.array(McpServerStatus), nextCursor: z.string().nullable() })
  .meta({ id: "ListMcpServerStatusResponse" });

/** Codex sends no params (or null) for a reload. */
export const McpServerRefreshParams = z.object({}).loose().nullable().optional().meta({ id: "McpServerRefreshParams" });
export const McpServerRefreshResponse = z.object({}).meta({ id: "McpServerRefreshResponse" });

export const McpServerToolCallParams = z
  .object({
    threadId: z.string(),
    server: z.string(),
    environmentId: z.string().nullable().optional(),
    tool: z.string(),
    arguments: json.optional(),
    _meta: json.optional(),
  })
  .meta({ id: "McpServerToolCallParams" });

export const McpServerToolCallResponse = z
  .object({ content: z.array(json), structuredContent: json.optional(), isError: z.boolean().optional(), _meta: json.optional() })
  .meta({ id: "McpServerToolCallResponse" });

export const McpResourceReadParams = z
  .object({
    _meta: z.record(z.string(), json).nullable().optional(),
    threadId: z.string().nullable().optional(),
    originCallId: z.string().nullable().optional(),
    server: z.string(),
    environmentId: z.string().nullable().optional(),
    uri: z.string(),
    connectorId: z.string().nullable().optional(),
    target: json.nullable().optional(),
  })
  .meta({ id: "McpResourceReadParams" });

export const ResourceContent = z
  .union([
    z.object({ uri: z.string(), mimeType: z.string().optional(), text: z.string(), _meta: json.optional() }),
    z.object({ uri: z.string(), mimeType: z.string().optional(), blob: z.string(), _meta: json.optional() }),
  ])
  .meta({ id: "ResourceContent" });

export const McpResourceReadResponse = z
  .object({ contents: z.array(ResourceContent), originCallId: z.string().nullable() })
  .meta({ id: "McpResourceReadResponse" });

/** Server → client: an MCP server (or a tool approval) needs the user's input. Form mode only. */
export const McpServerElicitationRequestParams = z
  .object({
    threadId: z.string(),
    turnId: z.string().nullable(),
    serverName: z.string(),
    environmentId: z.string().nullable(),
    mode: z.literal("form"),
    _meta: json.nullable(),
    message: z.string(),
    requestedSchema: json,
  })
  .meta({ id: "McpServerElicitationRequestParams" });

export const McpServerElicitationRequestResponse = z
  .object({ action: z.enum(["accept", "decline", "cancel"]), content: json.nullable().optional(), _meta: json.nullable().optional() })
  .meta({ id: "McpServerElicitationRequestResponse" });

/** Where a server's start stands, as Codex reports it (ours is process-wide: threadId null). */
export const McpServerStartupState = z.enum(["starting", "ready", "failed", "cancelled"]).meta({ id: "McpServerStartupState" });

/** Server → every client: an MCP server is starting, ready, failed (with why) or stopped. */
export const McpServerStatusUpdatedNotification = z
  .object({
    threadId: z.string().nullable(),
    name: z.string(),
    environmentId: z.string().nullable(),
    status: McpServerStartupState,
    error: z.string().nullable(),
    failureReason: z.literal("reauthenticationRequired").nullable(),
  })
  .meta({ id: "McpServerStatusUpdatedNotification" });

/** Server → thread's clients: progress a running MCP tool reported (live only, like a delta). */
export const McpToolCallProgressNotification = z
  .object({ threadId: z.string(), turnId: z.string(), itemId: z.string(), message: z.string(), seq: z.number().int().positive() })
  .meta({ id: "McpToolCallProgressNotification" });
