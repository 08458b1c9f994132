/**
 * How an MCP tool is named to the model: `mcp__<server>__<tool>`, within what both providers
 * accept for a function name (OpenAI and Anthropic: `^[a-zA-Z0-9_-]{1,64}$`). Characters outside
 * that set become `_` and the name ends in a short hash of the exact server/tool pair ("read.file"
 * and "read_file" stay apart). A name that is too long loses the end of its *server* part, never
 * the tool's: with a 48-character server name the model still reads every tool name. Only when the
 * tool name alone does not fit, or two pairs still collide, is the name cut and ended in a hash.
 * Every rule depends on the pair alone (collisions aside), so the mapping is stable from run to run
 * (prefix stability) and never ambiguous.
 */
import { createHash } from "node:crypto";

const MAX = 64;
export const MCP_TOOL_PREFIX = "mcp__";
const SEPARATOR = "__";
/** The shortest server part worth keeping: below it the name says nothing about its server. */
const MIN_SERVER_PART = 4;
const HASH_SUFFIX = 9; // "_" + 8 hex digits

const clean = (s: string) => s.replace(/[^A-Za-z0-9_-]/g, "_");
const hash = (server: string, tool: string) => createHash("sha256").update(`${server}\0${tool}`).digest("hex").slice(0, 8);
const hashed = (name: string, server: string, tool: string) => `${name.slice(0, MAX - HASH_SUFFIX)}_${hash(server, tool)}`;

export function modelToolName(server: string, tool: string): string {
  const s = clean(server);
  const t = clean(tool);
  const exact = s === server && t === tool && t.length > 0;
  const suffix = exact ? "" : `_${hash(server, tool)}`;
  const room = MAX - MCP_TOOL_PREFIX.length - SEPARATOR.length - suffix.length;
  if (s.length + t.length <= room) return `${MCP_TOOL_PREFIX}${s}${SEPARATOR}${t}${suffix}`;
  const serverRoom = room - t.length;
  if (serverRoom >= MIN_SERVER_PART) return `${MCP_TOOL_PREFIX}${s.slice(0, serverRoom)}${SEPARATOR}${t}${suffix}`;
  return hashed(`${MCP_TOOL_PREFIX}${s}${SEPARATOR}${t}`, server, tool);
}

export interface NamedTool {
  modelName: string;
  server: string;
  tool: string;
}

/**
 * Model names for every (server, tool), sorted by model name: the order the tools appear in the
 * prompt, whatever order servers answered in. Two pairs that still collide (two long server names
 * that share their start) both get hashed names.
 */
export function nameTools(pairs: ReadonlyArray<{ server: string; tool: string }>): NamedTool[] {
  const first = pairs.map((p) => ({ ...p, modelName: modelToolName(p.server, p.tool) }));
  const counts = new Map<string, number>();
  for (const t of first) counts.set(t.modelName, (counts.get(t.modelName) ?? 0) + 1);
  const named = first.map((t) => (counts.get(t.modelName)! > 1 ? { ...t, modelName: hashed(t.modelName, t.server, t.tool) } : t));
  return named.sort((a, b) => (a.modelName < b.modelName ? -1 : a.modelName > b.modelName ? 1 : 0));
}
