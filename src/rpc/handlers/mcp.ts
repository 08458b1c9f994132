/**
 * MCP servers for clients: mcpServerStatus/list (servers, state, tools, last error),
 * config/mcpServer/reload (re-read the configuration without a restart), mcpServer/tool/call (a
 * direct call, no item: the client asked for it, so nothing is asked) and mcpServer/resource/read.
 *
 * A status call reads the supervisor's state (and asks a ready server for its resources): it never
 * starts, restarts or waits for a server. State changes reach every client as
 * `mcpServer/startupStatus/updated` (mcpStatusNotifier, wired in server.ts).
 */
import type { Resource, ResourceTemplate } from "@modelcontextprotocol/sdk/types.js";
import type { z } from "zod";
import type { AppContext } from "../../app-context.js";
import type { McpManager } from "../../mcp/manager.js";
import { McpResourcesError, type McpServerConnection } from "../../mcp/server-connection.js";
import { McpConfigError } from "../../mcp/config.js";
import type { McpServerStatusUpdatedNotification } from "../../protocol/mcp.js";
import type { Connection } from "../connection.js";
import { withThread } from "./threads.js";
import { invalidParams, invalidRequest } from "../errors.js";

const STATUS: Record<McpServerConnection["state"], "starting" | "connected" | "failed" | "disabled" | "cancelled"> = {
  starting: "starting",
  ready: "connected",
  failed: "failed",
  disabled: "disabled",
  stopped: "cancelled",
};

const STARTUP: Record<McpServerConnection["state"], z.infer<typeof McpServerStatusUpdatedNotification>["status"] | null> = {
  starting: "starting",
  ready: "ready",
  failed: "failed",
  stopped: "cancelled",
  disabled: null,
};

/** Our extension in each tool's `_meta`: the name the model calls it by (mcp__server__tool). */
export const MODEL_NAME_META = "agent-app-server/modelName";

/** The `mcpServer/startupStatus/updated` params for a server's current state, or null (disabled). */
export function startupStatusOf(s: McpServerConnection): z.infer<typeof McpServerStatusUpdatedNotification> | null {
  const status = STARTUP[s.state];
  if (status === null) return null;
  return { threadId: null, name: s.name, environmentId: null, status, error: s.state === "failed" || s.state === "stopped" ? s.unavailableReason() : null, failureReason: null };
}

function statusOf(s: McpServerConnection, modelNames: ReadonlyMap<string, string>, detail: "full" | "toolsAndAuthOnly") {
  const info = s.serverInfo;
  return {
    name: s.name,
    environmentId: null,
    runtimeStatus: STATUS[s.state],
    pluginId: null,
    httpOrigin: s.config.kind === "http" ? new URL(s.config.url).origin : null,
    serverInfo: info
      ? { name: info.name, title: info.title ?? null, version: info.version, description: null, icons: null, websiteUrl: info.websiteUrl ?? null }
      : null,
    serverCapabilities: detail === "full" ? ((s.capabilities as Record<string, unknown> | null) ?? null) : null,
    toolListMeta: null,
    // Last known tools, also while the server is down (they stay offered to the model).
    tools: Object.fromEntries(
      s.tools.map((t) => {
        const modelName = modelNames.get(`${s.name}\0${t.name}`);
        return [t.name, modelName ? { ...t, _meta: { ...t._meta, [MODEL_NAME_META]: modelName } } : t];
      }),
    ),
    toolsError: s.state === "failed" ? s.unavailableReason() : null,
    resources: [] as Resource[],
    resourceTemplates: [] as ResourceTemplate[],
    authStatus: s.config.kind === "http" && Object.keys(s.config.headers).some((h) => h.toLowerCase() === "authorization") ? ("bearerToken" as const) : ("unsupported" as const),
  };
}

/** A server's resources for the full status view, or why it could not list them (empty then). */
async function resourcesOf(s: McpServerConnection): Promise<{ resources: Resource[]; resourceTemplates: ResourceTemplate[]; resourcesError: string | null }> {
  try {
    return { ...(await s.resourcesNow()), resourcesError: null };
  } catch (err) {
    if (!(err instanceof McpResourcesError)) throw err;
    return { resources: [], resourceTemplates: [], resourcesError: err.message };
  }
}

export function registerMcpHandlers(conn: Connection, app: AppContext): void {
  const { mcp } = app;

  conn.handle("mcpServerStatus/list", async (p) => {
    let servers = mcp.list();
    if (p.serverName) servers = servers.filter((s) => s.name === p.serverName);
    const start = p.cursor ? Number(p.cursor) : 0;
    if (!Number.isSafeInteger(start) || start < 0) throw invalidParams(`Invalid params: bad cursor ${p.cursor}`);
    const limit = p.limit ?? 50;
    const page = servers.slice(start, start + limit);
    const modelNames = new Map(mcp.tools().map((t) => [`${t.server}\0${t.tool.name}`, t.modelName]));
    const data = await Promise.all(
      page.map(async (s) => {
        const status = statusOf(s, modelNames, p.detail ?? "full");
        // Resources and templates only in the full view, from ready servers that offer them. One
        // server failing to list them is that server's entry, not the whole list's failure.
        if ((p.detail ?? "full") === "full") Object.assign(status, await resourcesOf(s));
        return status;
      }),
    );
    return { data, nextCursor: start + limit < servers.length ? String(start + limit) : null };
  });

  conn.handle("config/mcpServer/reload", async () => {
    try {
      const changes = await mcp.reload();
      app.log.info(changes, "MCP configuration reloaded");
    } catch (err) {
      if (err instanceof McpConfigError) throw invalidRequest(err.message);
      throw err;
    }
    return {};
  });

  conn.handle("mcpServer/tool/call", async (p, { signal }) => {
    await withThread(() => app.runtime.getRecord(p.threadId)); // the thread must exist (-32600 otherwise, as elsewhere)
    const server = mcp.server(p.server);
    if (!server) throw invalidParams(`Invalid params: no MCP server named ${p.server}`);
    const args = p.arguments ?? {};
    if (typeof args !== "object" || args === null || Array.isArray(args)) throw invalidParams("Invalid params: arguments must be a JSON object");
    try {
      const r = await server.callTool(p.tool, args as Record<string, unknown>, signal);
      return { content: r.content, ...(r.structuredContent !== undefined ? { structuredContent: r.structuredContent } : {}), ...(r.isError ? { isError: true } : {}) };
    } catch (err) {
      throw invalidRequest(`MCP tool ${p.server}/${p.tool} failed: ${(err as Error).message}`);
    }
  });

  conn.handle("mcpServer/resource/read", async (p, { signal }) => {
    const server = mcp.server(p.server);
    if (!server) throw invalidParams(`Invalid params: no MCP server named ${p.server}`);
    try {
      const r = await server.readResource(p.uri, signal);
      return { contents: r.contents, originCallId: null };
    } catch (err) {
      throw invalidRequest(`reading ${p.uri} from MCP server ${p.server} failed: ${(err as Error).message}`);
    }
  });
}

/** Sends every state change of every MCP server to `clients()` as mcpServer/startupStatus/updated. */
export function mcpStatusNotifier(mcp: McpManager, clients: () => Iterable<Connection>): () => void {
  return mcp.onStateChanged((server) => {
    const params = startupStatusOf(server);
    if (params === null) return;
    for (const c of clients()) if (c.initialized) c.notify("mcpServer/startupStatus/updated", params);
  });
}
