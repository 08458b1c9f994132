/**
 * The configured MCP servers as a tool source of the turn's tool host: the tools of the servers
 * connected when the turn starts, sorted by model name (see manager.ts for the prefix rule).
 */
import type { ToolSource } from "../runtime/tool-host.js";
import type { McpManager } from "./manager.js";
import { mcpTool } from "./tool.js";

export function mcpSource(manager: McpManager): ToolSource {
  return { name: "mcp", tools: (ctx) => manager.tools().map((entry) => mcpTool(entry, manager, ctx)) };
}
