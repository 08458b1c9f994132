/**
 * The configured MCP servers as a tool source of the turn's tool host: every configured server's
 * last known tools when the turn starts, sorted by model name (see manager.ts for the prefix
 * rule), once every server's first start attempt has ended.
 */
import type { ToolSource } from "../tools/source.js";
import type { McpManager } from "./manager.js";
import { mcpTool } from "./tool.js";

export function mcpSource(manager: McpManager): ToolSource {
  return {
    name: "mcp",
    tools: (ctx) => manager.tools().map((entry) => mcpTool(entry, manager, ctx)),
    ready: (signal) => manager.ready(signal),
  };
}
