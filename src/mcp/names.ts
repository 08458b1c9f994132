/**
 * How an MCP tool is named to the model: `mcp__<server>__<tool>`, within what both providers
 * accept for a function name (OpenAI and Anthropic: `^[a-zA-Z0-9_-]{1,64}$`). Characters outside
 * that set become `_`; a name that is too long, or that collides with another after this, keeps
 * a readable prefix and ends in a short hash of the exact server/tool pair, so the mapping is
 * stable from run to run (prefix stability) and never ambiguous.
 */
import { createHash } from "node:crypto";

const MAX = 64;
export const MCP_TOOL_PREFIX = "mcp__";

const clean = (s: string) => s.replace(/[^A-Za-z0-9_-]/g, "_");
const hash = (server: string, tool: string) => createHash("sha256").update(`${server}\0${tool}`).digest("hex").slice(0, 8);

export function modelToolName(server: string, tool: string): string {
  const name = `${MCP_TOOL_PREFIX}${clean(server)}__${clean(tool)}`;
  if (name.length <= MAX && clean(tool) === tool && clean(server) === server) return name;
  return `${name.slice(0, MAX - 9)}_${hash(server, tool)}`;
}

export interface NamedTool {
  modelName: string;
  server: string;
  tool: string;
}

/**
 * Model names for every (server, tool), sorted by model name: the order the tools appear in the
 * prompt, whatever order servers answered in. Two pairs that still collide both get hashed names.
 */
export function nameTools(pairs: ReadonlyArray<{ server: string; tool: string }>): NamedTool[] {
  const first = pairs.map((p) => ({ ...p, modelName: modelToolName(p.server, p.tool) }));
  const counts = new Map<string, number>();
  for (const t of first) counts.set(t.modelName, (counts.get(t.modelName) ?? 0) + 1);
  const named = first.map((t) =>
    counts.get(t.modelName)! > 1 ? { ...t, modelName: `${t.modelName.slice(0, MAX - 9)}_${hash(t.server, t.tool)}` } : t,
  );
  return named.sort((a, b) => (a.modelName < b.modelName ? -1 : a.modelName > b.modelName ? 1 : 0));
}
