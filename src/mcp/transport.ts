/**
 * How one configured MCP server is reached: a stdio process inside the OS sandbox, or Streamable
 * HTTP with a fallback to the older HTTP+SSE transport.
 *
 * A sandboxed stdio server gets a private home of its own (`<home>/mcp/homes/<name>`), writable in
 * its sandbox whatever its mode, with HOME and the XDG directories pointing into it: `npx -y PKG`
 * writes npm's cache and logs under ~/.npm, `uvx` under ~/.cache — with HOME outside the server's
 * cwd (the normal case) the real home is read-only in the sandbox and those servers could not start.
 * The directory is the server's own state: it lives inside this server's home, which every other
 * sandboxed process sees masked, and it is kept across restarts (a warm npm cache). A server under
 * danger-full-access runs as the user, with the user's HOME. The configuration's `env` wins over
 * all of this (a server that needs the real HOME says so there, with a writable root for it).
 */
import { promises as fs } from "node:fs";
import path from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { Logger } from "../log.js";
import { policyOfMode, resolveSandbox, type ResolvedSandbox } from "../sandbox/policy.js";
import type { CommandRunner } from "../sandbox/runner.js";
import type { McpServerConfig, StdioServerConfig } from "./config.js";
import type { McpSdk } from "./sdk.js";

export interface TransportDeps {
  runner: CommandRunner;
  log: Logger;
  /** Where the private homes of sandboxed stdio servers live (`<home>/mcp/homes`). */
  homesDir: string;
}

/**
 * Connects `client` to the server `c` (the MCP handshake included); `onStderr` gets what a stdio
 * server writes to stderr, from its first byte (a server that fails to start says why there).
 * Returns the pid of the spawned process (bwrap's, for a sandboxed server), null over HTTP.
 * `sdk` is the MCP SDK, loaded on first use (./sdk.ts).
 */
export async function connectTransport(
  sdk: McpSdk,
  client: Client,
  c: McpServerConfig,
  deps: TransportDeps,
  onStderr: (text: string) => void,
  signal?: AbortSignal,
): Promise<number | null> {
  const { SSEClientTransport, StdioClientTransport, StreamableHTTPClientTransport } = sdk;
  if (c.kind === "http") {
    try {
      await client.connect(new StreamableHTTPClientTransport(new URL(c.url), { requestInit: { headers: c.headers } }));
    } catch (err) {
      // Servers of the older HTTP+SSE transport answer the Streamable HTTP POST with 4xx.
      deps.log.debug({ err, server: c.name }, "Streamable HTTP failed; trying SSE");
      try {
        await client.connect(new SSEClientTransport(new URL(c.url), { requestInit: { headers: c.headers } }) as Transport);
      } catch (sseErr) {
        // Both failed: say both, since which one the server speaks is not known.
        throw new Error(`Streamable HTTP: ${messageOf(err)}; HTTP+SSE: ${messageOf(sseErr)}`, { cause: sseErr });
      }
    }
    return null;
  }
  const { sandbox, env } = await stdioSandbox(c, deps.homesDir);
  const spec = await deps.runner.spawnSpec([c.command, ...c.args], sandbox, c.cwd!, env);
  // Stopped while the sandbox was being prepared: spawn nothing.
  if (signal?.aborted) throw new Error(`MCP server ${c.name} was stopped while starting`);
  const transport = new StdioClientTransport({ ...spec, stderr: "pipe" });
  transport.stderr?.on("data", (chunk: Buffer) => onStderr(chunk.toString("utf8")));
  await client.connect(transport);
  return transport.pid;
}

/** The confinement and environment of a stdio server: its policy plus its private home. */
async function stdioSandbox(c: StdioServerConfig, homesDir: string): Promise<{ sandbox: ResolvedSandbox; env: Record<string, string> }> {
  const policy =
    c.sandbox === "workspace-write"
      ? { type: "workspaceWrite" as const, writableRoots: c.writableRoots, networkAccess: c.networkAccess, excludeSlashTmp: false, excludeTmpdirEnvVar: false }
      : c.sandbox === "read-only"
        ? { type: "readOnly" as const, networkAccess: c.networkAccess }
        : policyOfMode("danger-full-access");
  const sandbox = await resolveSandbox(policy, c.cwd!, c.sandboxScope === undefined ? {} : { tmpScope: c.sandboxScope });
  if (sandbox === null) return { sandbox, env: c.env };
  const home = await privateHome(homesDir, c.name);
  const env = {
    HOME: home,
    XDG_CACHE_HOME: path.join(home, ".cache"),
    XDG_CONFIG_HOME: path.join(home, ".config"),
    XDG_DATA_HOME: path.join(home, ".local", "share"),
    XDG_STATE_HOME: path.join(home, ".local", "state"),
    ...c.env,
  };
  return { sandbox: { ...sandbox, writableRoots: [...sandbox.writableRoots, home] }, env };
}

/** `<homesDir>/<name>`, created private (0700), symlinks resolved (a bind needs the real path). */
export async function privateHome(homesDir: string, name: string): Promise<string> {
  const dir = path.join(homesDir, name);
  await fs.mkdir(dir, { recursive: true, mode: 0o700 });
  return fs.realpath(dir);
}

const messageOf = (err: unknown) => (err instanceof Error ? err.message : String(err));
