/**
 * The MCP server configuration, in the format MCP clients share (Claude Desktop, Cursor, Codex's
 * JSON form): `{"mcpServers": {NAME: {command, args, env, cwd} | {url, headers}}}`. Read from
 * --mcp-config / APP_SERVER_MCP_CONFIG, or `<home>/mcp.json` when it exists. Errors name the file
 * and the field, so a typo is found at start-up (or by config/mcpServer/reload), not at first use.
 *
 * Stdio servers run inside the OS sandbox like shell commands (src/sandbox): by default
 * workspace-write on their `cwd` plus /tmp, with the network (an MCP server usually exists to
 * reach something); `sandbox`, `networkAccess` and `writableRoots` change that per server.
 */
import { promises as fs } from "node:fs";
import path from "node:path";
import { z } from "zod";

const SERVER_NAME = /^[A-Za-z0-9_-]{1,48}$/;

/**
 * Seconds a tool call may take without reporting progress (progress notifications restart the
 * clock). Unset: no limit of its own — an interrupt of the turn still cancels the call.
 */
const TOOL_TIMEOUT = z.number().positive().max(86_400).optional();

const StdioServer = z
  .object({
    command: z.string().min(1, "must not be empty"),
    args: z.array(z.string()).default([]),
    env: z.record(z.string(), z.string()).default({}),
    cwd: z.string().optional(),
    sandbox: z.enum(["read-only", "workspace-write", "danger-full-access"]).default("workspace-write"),
    networkAccess: z.boolean().default(true),
    writableRoots: z.array(z.string()).default([]),
    /** Seconds to wait for the server to start and list its tools. */
    startupTimeoutSec: z.number().positive().max(600).default(30),
    toolTimeoutSec: TOOL_TIMEOUT,
    disabled: z.boolean().default(false),
  })
  .strict();

const HttpServer = z
  .object({
    url: z.url({ protocol: /^https?$/, error: "must be an http:// or https:// URL" }),
    headers: z.record(z.string(), z.string()).default({}),
    startupTimeoutSec: z.number().positive().max(600).default(30),
    toolTimeoutSec: TOOL_TIMEOUT,
    disabled: z.boolean().default(false),
  })
  .strict();

const ServerConfig = z.union([StdioServer, HttpServer], { error: "expected {command, args?, env?, cwd?} (stdio) or {url, headers?} (HTTP)" });

const McpConfigFile = z
  .object({ mcpServers: z.record(z.string(), ServerConfig).default({}) })
  .loose();

export type StdioServerConfig = z.infer<typeof StdioServer> & {
  kind: "stdio";
  name: string;
  /** A thread's own server (thread-mcp.ts): confined as that thread's commands are (its /tmp, its hidden paths). */
  sandboxScope?: string;
};
export type HttpServerConfig = z.infer<typeof HttpServer> & { kind: "http"; name: string };
export type McpServerConfig = StdioServerConfig | HttpServerConfig;

export interface McpConfig {
  /** The file it came from, or null when there is none (no servers). */
  file: string | null;
  servers: McpServerConfig[];
}

export class McpConfigError extends Error {}

/**
 * Where the configuration is read from: the explicit file, or `<home>/mcp.json` if present. Only
 * its absence means "no configuration": a file that is there but cannot be looked at is returned,
 * so that reading it reports why.
 */
export async function locateMcpConfig(explicit: string | undefined, home: string): Promise<string | null> {
  if (explicit) return path.resolve(explicit);
  const fallback = path.join(home, "mcp.json");
  try {
    return (await fs.stat(fallback)).isFile() ? fallback : null;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return code === "ENOENT" || code === "ENOTDIR" ? null : fallback;
  }
}

/** Reads and validates the configuration; `file` null means no MCP servers. */
export async function loadMcpConfig(file: string | null, defaultCwd: string): Promise<McpConfig> {
  if (file === null) return { file: null, servers: [] };
  let text: string;
  try {
    text = await fs.readFile(file, "utf8");
  } catch (err) {
    throw new McpConfigError(`cannot read the MCP configuration ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new McpConfigError(`the MCP configuration ${file} is not valid JSON: ${(err as Error).message}`);
  }
  const parsed = McpConfigFile.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const where = issue.path.length ? issue.path.map(String).join(".") : "(top level)";
    throw new McpConfigError(`invalid MCP configuration in ${file}: ${where}: ${issue.message}`);
  }
  const servers: McpServerConfig[] = [];
  for (const [name, s] of Object.entries(parsed.data.mcpServers)) {
    if (!SERVER_NAME.test(name)) throw new McpConfigError(`invalid MCP configuration in ${file}: mcpServers.${name}: server names use letters, digits, _ and - (at most 48)`);
    if ("command" in s) servers.push({ ...s, kind: "stdio", name, cwd: path.resolve(path.dirname(file), s.cwd ?? defaultCwd) });
    else servers.push({ ...s, kind: "http", name });
  }
  servers.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return { file, servers };
}
