/**
 * One configured MCP server, through the official SDK client: connects (stdio inside the OS
 * sandbox, or Streamable HTTP with an SSE fallback) within its start-up timeout, lists every page
 * of its tools, follows `notifications/tools/list_changed`, and reconnects a server that went away
 * on its next use, with exponential backoff so a crashing server is not restarted in a loop.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { ElicitRequestSchema, ToolListChangedNotificationSchema, type CallToolResult, type ElicitRequest, type ElicitResult, type ReadResourceResult, type Tool } from "@modelcontextprotocol/sdk/types.js";
import type { Logger } from "../log.js";
import { policyOfMode, resolveSandbox } from "../sandbox/policy.js";
import type { CommandRunner } from "../sandbox/runner.js";
import { VERSION } from "../version.js";
import type { McpServerConfig } from "./config.js";

export type McpServerState = "starting" | "connected" | "failed" | "disabled" | "stopped";

export interface McpConnectionDeps {
  runner: CommandRunner;
  log: Logger;
  /** The tool list changed (list_changed, or a reconnect found other tools). */
  onToolsChanged(server: string): void;
  /** An elicitation the server sent; answered by the thread's clients. */
  onElicitation(server: string, params: ElicitRequest["params"]): Promise<ElicitResult>;
}

const BACKOFF_MS = [500, 1_000, 2_000, 5_000, 10_000, 30_000];
const STDERR_KEPT = 4_096;

export class McpServerConnection {
  state: McpServerState = "starting";
  lastError: string | null = null;
  tools: Tool[] = [];
  private client: Client | null = null;
  private connecting: Promise<void> | null = null;
  private failures = 0;
  private retryAt = 0;
  private stderrTail = "";

  constructor(
    readonly config: McpServerConfig,
    private readonly deps: McpConnectionDeps,
  ) {
    if (config.disabled) this.state = "disabled";
  }

  get name(): string {
    return this.config.name;
  }

  get serverInfo() {
    return this.client?.getServerVersion() ?? null;
  }

  get capabilities() {
    return this.client?.getServerCapabilities() ?? null;
  }

  /** Connects and lists tools; never throws (the state and lastError say what happened). */
  start(): Promise<void> {
    if (this.state === "disabled") return Promise.resolve();
    return (this.connecting ??= this.connect().finally(() => (this.connecting = null)));
  }

  /** A connected client, reconnecting a server that went away (not before its backoff ends). */
  async ready(): Promise<Client> {
    if (this.state === "disabled") throw new Error(`MCP server ${this.name} is disabled in the configuration`);
    if (this.state === "stopped") throw new Error(`MCP server ${this.name} was removed from the configuration`);
    if (this.state !== "connected" || !this.client) {
      const wait = this.retryAt - Date.now();
      if (this.state === "failed" && wait > 0)
        throw new Error(`MCP server ${this.name} is not running (${this.lastError}); the next attempt to start it is in ${Math.ceil(wait / 1000)} s`);
      await this.start();
    }
    if (this.state !== "connected" || !this.client) throw new Error(`MCP server ${this.name} is not running: ${this.lastError}`);
    return this.client;
  }

  async callTool(tool: string, args: Record<string, unknown>, signal: AbortSignal): Promise<CallToolResult> {
    const client = await this.ready();
    // The SDK leaves its abort listener on the signal it is given; a turn's signal serves many
    // calls, so each call gets its own signal, linked to the turn's for as long as it runs.
    const call = new AbortController();
    const abort = () => call.abort(signal.reason);
    if (signal.aborted) abort();
    else signal.addEventListener("abort", abort, { once: true });
    try {
      return (await client.callTool({ name: tool, arguments: args }, undefined, { signal: call.signal, timeout: 24 * 3600_000 })) as CallToolResult;
    } finally {
      signal.removeEventListener("abort", abort);
    }
  }

  async readResource(uri: string): Promise<ReadResourceResult> {
    return (await this.ready()).readResource({ uri });
  }

  async close(): Promise<void> {
    this.state = this.config.disabled ? "disabled" : "stopped";
    const c = this.client;
    this.client = null;
    await c?.close().catch(() => {});
  }

  private async connect(): Promise<void> {
    this.state = "starting";
    const client = new Client({ name: "agent-app-server", version: VERSION }, { capabilities: { elicitation: {} } });
    client.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
      if (this.client !== client) return;
      try {
        this.tools = await listAllTools(client);
        this.deps.onToolsChanged(this.name);
      } catch (err) {
        this.deps.log.warn({ err, server: this.name }, "could not list the tools of an MCP server after list_changed");
      }
    });
    client.setRequestHandler(ElicitRequestSchema, (req) => this.deps.onElicitation(this.name, req.params));
    const timeoutMs = this.config.startupTimeoutSec * 1000;
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        (async () => {
          await this.connectTransport(client);
          this.tools = await listAllTools(client);
        })(),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error(`did not start within ${this.config.startupTimeoutSec} s`)), timeoutMs);
        }),
      ]);
    } catch (err) {
      clearTimeout(timer);
      await client.close().catch(() => {});
      this.fail(`${(err as Error).message}${this.stderrTail ? ` (stderr: ${this.stderrTail.trim().split("\n").slice(-3).join(" | ")})` : ""}`);
      return;
    }
    clearTimeout(timer);
    const previous = this.client;
    this.client = client;
    this.state = "connected";
    this.lastError = null;
    this.failures = 0;
    client.onclose = () => {
      if (this.client !== client) return;
      this.client = null;
      if (this.state === "connected") this.fail(`the server closed the connection${this.stderrTail ? ` (stderr: ${this.stderrTail.trim().split("\n").slice(-3).join(" | ")})` : ""}`);
    };
    if (previous !== null && previous !== client) await previous.close().catch(() => {});
    this.deps.onToolsChanged(this.name);
    this.deps.log.info({ server: this.name, tools: this.tools.length }, "MCP server connected");
  }

  private fail(message: string): void {
    this.state = "failed";
    this.lastError = message;
    this.retryAt = Date.now() + BACKOFF_MS[Math.min(this.failures, BACKOFF_MS.length - 1)]!;
    this.failures++;
    this.deps.log.warn({ server: this.name, error: message }, "MCP server unavailable");
  }

  private async connectTransport(client: Client): Promise<void> {
    const c = this.config;
    if (c.kind === "http") {
      try {
        await client.connect(new StreamableHTTPClientTransport(new URL(c.url), { requestInit: { headers: c.headers } }));
      } catch (err) {
        // Servers of the older HTTP+SSE transport answer the Streamable HTTP POST with 4xx.
        this.deps.log.debug({ err, server: c.name }, "Streamable HTTP failed; trying SSE");
        await client.connect(new SSEClientTransport(new URL(c.url), { requestInit: { headers: c.headers } }) as Transport);
      }
      return;
    }
    const policy = c.sandbox === "workspace-write" ? { type: "workspaceWrite" as const, writableRoots: c.writableRoots, networkAccess: c.networkAccess, excludeSlashTmp: false, excludeTmpdirEnvVar: false } : c.sandbox === "read-only" ? { type: "readOnly" as const, networkAccess: c.networkAccess } : policyOfMode("danger-full-access");
    const spec = await this.deps.runner.spawnSpec([c.command, ...c.args], await resolveSandbox(policy, c.cwd!), c.cwd!, c.env);
    const transport = new StdioClientTransport({ ...spec, stderr: "pipe" });
    this.stderrTail = "";
    transport.stderr?.on("data", (chunk: Buffer) => {
      this.stderrTail = (this.stderrTail + chunk.toString("utf8")).slice(-STDERR_KEPT);
    });
    await client.connect(transport);
  }
}

/** Every page of tools/list. */
async function listAllTools(client: Client): Promise<Tool[]> {
  if (!client.getServerCapabilities()?.tools) return [];
  const tools: Tool[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < 1000; page++) {
    const res = await client.listTools(cursor ? { cursor } : undefined);
    tools.push(...res.tools);
    cursor = res.nextCursor;
    if (!cursor) break;
  }
  return tools;
}
