/**
 * One configured MCP server under supervision: one long-lived connection through the official SDK
 * client, with explicit states
 *
 *   starting ──connected, tools listed──▶ ready ──exits / drops the connection──▶ failed
 *      ▲  └──error or startupTimeoutSec──────────────────────────────────────────▶ failed
 *      └──────────── the supervisor, after its backoff ◀───────────────────────────┘
 *   stopped (removed by a reload, or shutting down) and disabled (in the configuration) are final.
 *
 * Only start(), close() and the supervisor's timer change the state: reading it (a status call)
 * never starts, restarts or waits for anything. The backoff doubles from 0.5 s to 30 s and starts
 * over once a server has stayed up for a healthy period.
 *
 * While a server is down its last known tools stay offered (the prompt prefix holds) and a call
 * fails at once with why ("MCP server X is restarting …: reason"); a call during a start attempt
 * waits for that attempt; a call in flight when the server dies fails with the reason it died.
 */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type {
  CallToolResult,
  ElicitRequest,
  ElicitResult,
  LoggingLevel,
  Progress,
  ReadResourceResult,
  Resource,
  ResourceTemplate,
  Tool,
} from "@modelcontextprotocol/sdk/types.js";
import { VERSION } from "../version.js";
import type { McpServerConfig } from "./config.js";
import { loadMcpSdk, type McpSdk } from "./sdk.js";
import { connectTransport, type TransportDeps } from "./transport.js";

/** A ready server failed to list its resources or resource templates (for a status call). */
export class McpResourcesError extends Error {
  constructor(
    readonly server: string,
    cause: unknown,
  ) {
    super(`MCP server ${server} could not list its resources: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = "McpResourcesError";
  }
}

export type McpServerState = "starting" | "ready" | "failed" | "stopped" | "disabled";

export interface SupervisorTiming {
  /** Delay before restart attempt n (the last one repeats). */
  backoffMs: readonly number[];
  /** Up this long, a server's next failure starts the backoff over. */
  healthyAfterMs: number;
}

export const DEFAULT_TIMING: SupervisorTiming = { backoffMs: [500, 1_000, 2_000, 4_000, 8_000, 16_000, 30_000], healthyAfterMs: 60_000 };

export interface McpConnectionDeps extends TransportDeps {
  timing: SupervisorTiming;
  /** The server's tool list changed (it connected with other tools, or sent list_changed). */
  onToolsChanged(server: string): void;
  /** The server's state changed. */
  onStateChanged(server: McpServerConnection): void;
  /** An elicitation the server sent; answered by the thread's clients. */
  onElicitation(server: string, params: ElicitRequest["params"]): Promise<ElicitResult>;
}

const STDERR_KEPT = 4_096;
/** Calls without a configured toolTimeoutSec: no limit of their own (an interrupt still cancels). */
const NO_TOOL_TIMEOUT_MS = 24 * 3600_000;
/** Listing resources for a status call: a hung server must not hang the status. */
const STATUS_REQUEST_TIMEOUT_MS = 5_000;

export class McpServerConnection {
  state: McpServerState;
  /** Why the server is down (null while it is starting the first time or ready). */
  lastError: string | null = null;
  /** The last known tools: from the server, or until it first connects from the cache. */
  tools: Tool[];
  /** The spawned process (bwrap's pid for a sandboxed server) while connected; null over HTTP. */
  pid: number | null = null;
  /** Start attempts after the first (restarts by the supervisor). */
  restarts = 0;
  /** When the supervisor tries again (epoch ms), while failed. */
  retryAt: number | null = null;
  private client: Client | null = null;
  /** Set by the first start attempt (the SDK is loaded on first use). */
  private sdk: McpSdk | null = null;
  private attempt: Promise<void> | null = null;
  /** The start attempt under way: close() aborts it and closes its client (its process dies with it). */
  private starting: { client: Client; abort: AbortController } | null = null;
  private failures = 0;
  private readyAt = 0;
  private everReady = false;
  private timer: NodeJS.Timeout | null = null;
  private generation = 0;
  private stderrTail = "";
  private settleFirst!: () => void;
  /** Resolves once the first start attempt has ended (ready or failed), or the server stopped. */
  readonly firstSettled = new Promise<void>((resolve) => (this.settleFirst = resolve));

  constructor(
    readonly config: McpServerConfig,
    private readonly deps: McpConnectionDeps,
    cachedTools: Tool[] | null = null,
  ) {
    this.state = config.disabled ? "disabled" : "starting";
    this.tools = cachedTools ?? [];
    if (config.disabled) this.settleFirst();
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

  /** Starts the first attempt; the supervisor takes it from there. Idempotent. */
  start(): void {
    if (this.state !== "starting" || this.attempt !== null || this.client !== null || this.generation > 0) return;
    this.generation = 1;
    this.launch();
  }

  /** Stops the server for good (reload removed it, or shutdown): in-flight calls fail with that. */
  async close(): Promise<void> {
    this.generation++;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.retryAt = null;
    const client = this.client;
    this.client = null;
    this.pid = null;
    // A start attempt under way stops too: nothing spawned by this server outlives close() (a
    // slow server would otherwise run on until its startup timeout, after the app server stopped).
    const starting = this.starting;
    this.starting = null;
    starting?.abort.abort();
    this.settleFirst();
    if (this.state !== "disabled" && this.state !== "stopped") this.setState("stopped");
    // Closing a connection whose process already died can reject; it is closed either way, and
    // the server is stopped for good, so there is nothing left to report.
    await Promise.all([client?.close().catch(() => {}), starting?.client.close().catch(() => {})]);
  }

  async callTool(tool: string, args: Record<string, unknown>, signal: AbortSignal, onProgress?: (message: string) => void): Promise<CallToolResult> {
    const client = await this.usableClient(signal);
    // The SDK leaves its abort listener on the signal it is given; a turn's signal serves many
    // calls, so each call gets its own signal, linked to the turn's for as long as it runs.
    const call = new AbortController();
    const abort = () => call.abort(signal.reason);
    if (signal.aborted) abort();
    else signal.addEventListener("abort", abort, { once: true });
    try {
      return (await client.callTool({ name: tool, arguments: args }, undefined, {
        signal: call.signal,
        timeout: this.config.toolTimeoutSec ? this.config.toolTimeoutSec * 1000 : NO_TOOL_TIMEOUT_MS,
        resetTimeoutOnProgress: true,
        ...(onProgress ? { onprogress: (p: Progress) => onProgress(progressMessage(p)) } : {}),
      })) as CallToolResult;
    } catch (err) {
      if (this.client !== client && !signal.aborted) throw new Error(`MCP server ${this.name} went down during the call: ${this.unavailableReason()}`);
      throw err;
    } finally {
      signal.removeEventListener("abort", abort);
    }
  }

  async readResource(uri: string, signal?: AbortSignal): Promise<ReadResourceResult> {
    return (await this.usableClient(signal)).readResource({ uri }, signal ? { signal } : undefined);
  }

  /**
   * Resources and templates for a status call: only from a ready server, never waiting long. A
   * ready server that fails to list them (an error, or no answer within the status timeout)
   * rejects with McpResourcesError, naming the server and why: a failure must not read as "this
   * server has no resources".
   */
  async resourcesNow(): Promise<{ resources: Resource[]; resourceTemplates: ResourceTemplate[] }> {
    const client = this.state === "ready" ? this.client : null;
    if (!client?.getServerCapabilities()?.resources) return { resources: [], resourceTemplates: [] };
    const opts = { timeout: STATUS_REQUEST_TIMEOUT_MS };
    try {
      const [resources, resourceTemplates] = await Promise.all([
        client.listResources(undefined, opts).then((r) => r.resources),
        client.listResourceTemplates(undefined, opts).then(
          (r) => r.resourceTemplates,
          // A server written before templates existed answers "method not found": it has none.
          // Any other failure is the server's, and is reported.
          (err: unknown) => {
            // A ready client means the SDK is loaded (connect() loaded it first).
            const { McpError, ErrorCode } = this.sdk!.types;
            if (err instanceof McpError && err.code === ErrorCode.MethodNotFound) return [];
            throw err;
          },
        ),
      ]);
      return { resources, resourceTemplates };
    } catch (err) {
      throw new McpResourcesError(this.name, err);
    }
  }

  /** Why a call cannot run now, as the model and the client read it. */
  unavailableReason(): string {
    const inSec = this.retryAt === null ? null : Math.max(0, Math.ceil((this.retryAt - Date.now()) / 1000));
    switch (this.state) {
      case "disabled":
        return `MCP server ${this.name} is disabled in the configuration`;
      case "stopped":
        return `MCP server ${this.name} was stopped (a configuration reload removed or changed it, or the app server is shutting down)`;
      case "failed":
        return `MCP server ${this.name} ${this.everReady ? "is restarting" : "failed to start"}: ${this.lastError}${inSec === null ? "" : ` (next attempt in ${inSec} s)`}`;
      default:
        return `MCP server ${this.name} is ${this.state === "starting" ? "still starting" : "not available"}`;
    }
  }

  /** A connected client; a start attempt under way is waited for, a down server fails at once. */
  private async usableClient(signal?: AbortSignal): Promise<Client> {
    if (this.state === "starting" && this.attempt) await untilAborted(this.attempt, signal);
    if (this.state === "ready" && this.client) return this.client;
    throw new Error(this.unavailableReason());
  }

  private launch(): void {
    const attempt = this.connect(this.generation).finally(() => {
      if (this.attempt === attempt) this.attempt = null;
      this.settleFirst();
    });
    this.attempt = attempt;
  }

  private async connect(generation: number): Promise<void> {
    this.stderrTail = "";
    this.setState("starting");
    let sdk: McpSdk;
    let client: Client;
    try {
      // The SDK is loaded by the first start (src/mcp/sdk.ts); a failure is this attempt's reason.
      sdk = this.sdk = await loadMcpSdk();
      client = this.newClient(sdk);
    } catch (err) {
      if (generation === this.generation) this.down((err as Error).message);
      return;
    }
    if (generation !== this.generation) return; // stopped while the SDK loaded
    const starting = { client, abort: new AbortController() };
    this.starting = starting;
    let timer: NodeJS.Timeout | undefined;
    let pid: number | null = null;
    let tools: Tool[];
    try {
      tools = await Promise.race([
        (async () => {
          pid = await connectTransport(sdk, client, this.config, this.deps, (text) => this.onStderr(text), starting.abort.signal);
          return listAllTools(client);
        })(),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error(`did not start within ${this.config.startupTimeoutSec} s`)), this.config.startupTimeoutSec * 1000);
        }),
      ]);
    } catch (err) {
      // The attempt's own failure is what down() reports; closing what is left of it can only fail the same way.
      await client.close().catch(() => {});
      if (generation === this.generation) this.down(`${(err as Error).message}${this.stderrNote()}`);
      return;
    } finally {
      clearTimeout(timer);
      if (this.starting === starting) this.starting = null;
    }
    if (generation !== this.generation) {
      await client.close().catch(() => {}); // stopped while starting: nobody is left to tell
      return;
    }
    client.onclose = () => {
      if (this.client !== client) return;
      this.client = null;
      this.pid = null;
      this.down(`the server exited or closed the connection${this.stderrNote()}`);
    };
    this.client = client;
    this.pid = pid;
    this.lastError = null;
    this.retryAt = null;
    this.readyAt = Date.now();
    this.everReady = true;
    const changed = JSON.stringify(tools) !== JSON.stringify(this.tools);
    this.tools = tools;
    void this.forwardLogLevel(client);
    this.deps.log.info({ server: this.name, tools: tools.length, pid, restarts: this.restarts }, "MCP server ready");
    this.setState("ready");
    if (changed) this.deps.onToolsChanged(this.name);
  }

  private newClient(sdk: McpSdk): Client {
    const { Client, ToolListChangedNotificationSchema, LoggingMessageNotificationSchema, ElicitRequestSchema } = { ...sdk, ...sdk.types };
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
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
      const { level, logger, data } = n.params;
      this.deps.log[PINO_LEVEL[level]]({ server: this.name, mcpLevel: level, ...(logger ? { logger } : {}), data }, "MCP server log message");
    });
    client.setRequestHandler(ElicitRequestSchema, (req) => this.deps.onElicitation(this.name, req.params));
    return client;
  }

  /** Asks a server that logs to send what our log would keep (best effort). */
  private async forwardLogLevel(client: Client): Promise<void> {
    if (!client.getServerCapabilities()?.logging) return;
    const ours = this.deps.log.level;
    const level: LoggingLevel = ours === "trace" || ours === "debug" ? "debug" : ours === "warn" ? "warning" : ours === "error" || ours === "fatal" ? "error" : "info";
    await client.setLoggingLevel(level).catch((err) => this.deps.log.debug({ err, server: this.name }, "the MCP server refused logging/setLevel"));
  }

  /** The server is down: say why, and have the supervisor start it again after its backoff. */
  private down(message: string): void {
    if (this.state === "stopped" || this.state === "disabled") return;
    const { backoffMs, healthyAfterMs } = this.deps.timing;
    if (this.readyAt > 0 && Date.now() - this.readyAt >= healthyAfterMs) this.failures = 0;
    this.readyAt = 0;
    const delay = backoffMs[Math.min(this.failures, backoffMs.length - 1)]!;
    this.failures++;
    this.lastError = message;
    this.retryAt = Date.now() + delay;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.restarts++;
      this.launch();
    }, delay);
    this.timer.unref();
    this.deps.log.warn({ server: this.name, error: message, retryInMs: delay, failures: this.failures }, "MCP server down; the supervisor restarts it");
    this.setState("failed");
  }

  private setState(state: McpServerState): void {
    if (this.state === state) return;
    this.state = state;
    this.deps.onStateChanged(this);
  }

  private onStderr(text: string): void {
    this.stderrTail = (this.stderrTail + text).slice(-STDERR_KEPT);
    this.deps.log.debug({ server: this.name, stderr: text.trimEnd() }, "MCP server stderr");
  }

  private stderrNote(): string {
    const lines = this.stderrTail.trim().split("\n").filter(Boolean).slice(-3);
    return lines.length ? ` (stderr: ${lines.join(" | ")})` : "";
  }
}

const PINO_LEVEL: Record<LoggingLevel, "debug" | "info" | "warn" | "error"> = {
  debug: "debug",
  info: "info",
  notice: "info",
  warning: "warn",
  error: "error",
  critical: "error",
  alert: "error",
  emergency: "error",
};

/** What `item/mcpToolCall/progress` says: the server's message, else how far it got. */
export function progressMessage(p: Progress): string {
  if (p.message) return p.message;
  return p.total !== undefined ? `${p.progress}/${p.total}` : String(p.progress);
}

/** Waits for `p`, or until `signal` aborts (then returns; the caller re-checks the state). */
function untilAborted(p: Promise<void>, signal?: AbortSignal): Promise<void> {
  if (!signal) return p;
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      signal.removeEventListener("abort", done);
      resolve();
    };
    signal.addEventListener("abort", done, { once: true });
    void p.then(done);
  });
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
