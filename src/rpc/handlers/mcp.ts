/**
 * MCP servers for clients: mcpServerStatus/list (servers, state, tools, last error),
 * config/mcpServer/reload (re-read the configuration without a restart), mcpServer/tool/call (a
 * direct call, no item: the client asked for it, so nothing is asked) and mcpServer/resource/read.
 */
import type { AppContext } from "../../app-context.js";
import type { McpServerConnection } from "../../mcp/server-connection.js";
import { McpConfigError } from "../../mcp/config.js";
import type { Connection } from "../connection.js";
import { invalidParams, invalidRequest } from "../errors.js";

const STATUS: Record<McpServerConnection["state"], "starting" | "connected" | "failed" | "disabled" | "cancelled"> = {
  starting: "starting",
  connected: "connected",
  failed: "failed",
  disabled: "disabled",
  stopped: "cancelled",
};

function statusOf(s: McpServerConnection, detail: "full" | "toolsAndAuthOnly") {
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
    tools: Object.fromEntries(s.tools.map((t) => [t.name, t])),
    toolsError: s.state === "failed" ? s.lastError : null,
    resources: [],
    resourceTemplates: [],
    authStatus: s.config.kind === "http" && Object.keys(s.config.headers).some((h) => h.toLowerCase() === "authorization") ? ("bearerToken" as const) : ("unsupported" as const),
  };
}

export function registerMcpHandlers(conn: Connection, app: AppContext): void {
  const { mcp } = app;

  conn.handle("mcpServerStatus/list", async (p) => {
    await mcp.settled();
    let servers = mcp.list();
    if (p.serverName) servers = servers.filter((s) => s.name === p.serverName);
    const start = p.cursor ? Number(p.cursor) : 0;
    if (!Number.isSafeInteger(start) || start < 0) throw invalidParams(`Invalid params: bad cursor ${p.cursor}`);
    const limit = p.limit ?? 50;
    const page = servers.slice(start, start + limit);
    const data = await Promise.all(
      page.map(async (s) => {
        const status = statusOf(s, p.detail ?? "full");
        // Resources only in the full view, and only from servers that offer them.
        if ((p.detail ?? "full") === "full" && s.state === "connected" && s.capabilities?.resources) {
          const client = await s.ready().catch(() => null);
          const listed = await client?.listResources().catch(() => null);
          if (listed) status.resources = listed.resources as never[];
        }
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
    await app.runtime.getRecord(p.threadId); // the thread must exist (-32602 otherwise, as elsewhere)
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

  conn.handle("mcpServer/resource/read", async (p) => {
    const server = mcp.server(p.server);
    if (!server) throw invalidParams(`Invalid params: no MCP server named ${p.server}`);
    try {
      const r = await server.readResource(p.uri);
      return { contents: r.contents, originCallId: null };
    } catch (err) {
      throw invalidRequest(`reading ${p.uri} from MCP server ${p.server} failed: ${(err as Error).message}`);
    }
  });
}
