/**
 * Every configured MCP server, each one supervised connection (server-connection.ts): started in
 * parallel at server start-up, in the background (readiness is never delayed); re-read by
 * config/mcpServer/reload; offered to turns as one sorted list of model-facing tools.
 *
 * Ready before the first turn: a turn first waits (ready()) until every server's first start
 * attempt has ended — ready or failed, which each does within its startupTimeoutSec — so the
 * first turn after a start or a reload offers every server that can start. A server down after
 * that (failed, restarting) keeps offering its last known tools, and so does a server that has not
 * connected yet in this process: its tools come from the cache of the last run (tools-cache.ts).
 *
 * Prefix stability: a turn takes the tool list as it is when the turn starts, sorted by model
 * name, so the list is byte-identical from request to request whatever order servers answered in.
 * Only a server that lists other tools than before (a new version, list_changed), a new server
 * or one removed from the configuration changes it — from the next turn on.
 */
import path from "node:path";
import type { ElicitRequest, ElicitResult, Tool } from "@modelcontextprotocol/sdk/types.js";
import type { Logger } from "../log.js";
import type { CommandRunner } from "../sandbox/runner.js";
import { loadMcpConfig, type McpServerConfig } from "./config.js";
import { nameTools } from "./names.js";
// Type only: the connection module (and with it the MCP SDK, ~145 modules) is loaded when a
// server is configured, not at every start.
import type { McpServerConnection, SupervisorTiming } from "./server-connection.js";
import { configFingerprint, ToolsCache } from "./tools-cache.js";

export interface McpToolEntry {
  /** What the model calls it: mcp__<server>__<tool>. */
  modelName: string;
  server: string;
  tool: Tool;
}

/** Puts an elicitation an MCP server sent in front of the user of the call that caused it. */
export type ElicitationAsker = (params: ElicitRequest["params"]) => Promise<ElicitResult>;

export interface McpManagerOptions {
  /** The configuration file, or null for none. */
  file: string | null;
  defaultCwd: string;
  runner: CommandRunner;
  log: Logger;
  /** This server's own MCP state: `tools.json` (the tools cache) and `homes/<name>` (private homes). */
  stateDir: string;
  /** The supervisor's backoff (tests shorten it); DEFAULT_TIMING otherwise. */
  timing?: SupervisorTiming;
}

export class McpManager {
  private servers = new Map<string, McpServerConnection>();
  private fingerprints = new Map<string, string>();
  /** Who to ask when a server sends an elicitation: the clients of its calls in flight, newest first. */
  private askers = new Map<string, ElicitationAsker[]>();
  private toolListeners = new Set<() => void>();
  private stateListeners = new Set<(server: McpServerConnection) => void>();
  private readonly cache: ToolsCache;
  private loaded: McpServerConfig[] | null = null;
  private cacheLoaded: Promise<void> | null = null;

  constructor(private readonly opts: McpManagerOptions) {
    this.cache = new ToolsCache(path.join(opts.stateDir, "tools.json"), opts.log);
  }

  /** Reads and checks the configuration (throws McpConfigError); starts nothing yet. */
  async load(): Promise<void> {
    this.loaded = (await loadMcpConfig(this.opts.file, this.opts.defaultCwd)).servers;
  }

  /** Servers given in memory rather than read from a file (a thread's own servers: src/runtime/thread-mcp.ts). */
  useServers(servers: McpServerConfig[]): void {
    this.loaded = servers;
  }

  /** Starts every loaded server in the background (reading the configuration first if needed). */
  async start(): Promise<void> {
    if (this.loaded === null) await this.load();
    await this.apply(this.loaded!);
  }

  /** Re-reads the configuration: new servers start, removed ones stop, changed ones restart. */
  async reload(): Promise<{ started: string[]; stopped: string[]; restarted: string[] }> {
    const config = await loadMcpConfig(this.opts.file, this.opts.defaultCwd);
    return this.apply(config.servers);
  }

  /**
   * Resolves once every server's first start attempt has ended (each is bounded by its
   * startupTimeoutSec), or when `signal` aborts. What a turn waits for before it lists its tools.
   */
  async ready(signal?: AbortSignal): Promise<void> {
    const all = Promise.all([...this.servers.values()].map((s) => s.firstSettled)).then(() => {});
    if (!signal) return all;
    if (signal.aborted) return;
    await new Promise<void>((resolve) => {
      signal.addEventListener("abort", () => resolve(), { once: true });
      void all.then(resolve);
    });
  }

  onToolsChanged(listener: () => void): () => void {
    this.toolListeners.add(listener);
    return () => this.toolListeners.delete(listener);
  }

  /** Every state change of every server (status notifications to clients). */
  onStateChanged(listener: (server: McpServerConnection) => void): () => void {
    this.stateListeners.add(listener);
    return () => this.stateListeners.delete(listener);
  }

  /**
   * The tools offered to the model, sorted by model name (the prompt's order): every configured,
   * enabled server's last known tools, whether it is up right now or not.
   */
  tools(): McpToolEntry[] {
    const byKey = new Map<string, Tool>();
    const pairs: Array<{ server: string; tool: string }> = [];
    for (const s of this.servers.values()) {
      if (s.state === "disabled" || s.state === "stopped") continue;
      for (const t of s.tools) {
        byKey.set(`${s.name}\0${t.name}`, t);
        pairs.push({ server: s.name, tool: t.name });
      }
    }
    return nameTools(pairs).map((n) => ({ modelName: n.modelName, server: n.server, tool: byKey.get(`${n.server}\0${n.tool}`)! }));
  }

  server(name: string): McpServerConnection | undefined {
    return this.servers.get(name);
  }

  list(): McpServerConnection[] {
    return [...this.servers.values()].sort((a, b) => (a.name < b.name ? -1 : 1));
  }

  /**
   * Runs `fn` (a tool call on `server`) with `asker` as the one to ask if the server sends an
   * elicitation meanwhile. MCP elicitations carry no call id: the newest call in flight on that
   * server is the best guess, and with no call in flight the elicitation is declined.
   */
  async withAsker<T>(server: string, asker: ElicitationAsker, fn: () => Promise<T>): Promise<T> {
    const list = this.askers.get(server) ?? [];
    list.push(asker);
    this.askers.set(server, list);
    try {
      return await fn();
    } finally {
      list.splice(list.indexOf(asker), 1);
    }
  }

  private elicit(server: string, params: ElicitRequest["params"]): Promise<ElicitResult> {
    const asker = this.askers.get(server)?.at(-1);
    return asker ? asker(params) : Promise.resolve({ action: "decline" });
  }

  async close(): Promise<void> {
    await Promise.all([...this.servers.values()].map((s) => s.close()));
    this.servers.clear();
    await this.cache.flushed();
  }

  private async apply(configs: McpServerConfig[]) {
    const { McpServerConnection, DEFAULT_TIMING } =
      configs.length > 0 || this.servers.size > 0 ? await import("./server-connection.js") : { McpServerConnection: null, DEFAULT_TIMING: null };
    if (configs.length > 0) await (this.cacheLoaded ??= this.cache.load());
    const started: string[] = [];
    const stopped: string[] = [];
    const restarted: string[] = [];
    const next = new Map(configs.map((c) => [c.name, configFingerprint(c)]));
    for (const [name, conn] of this.servers) {
      if (!next.has(name)) {
        void conn.close();
        this.servers.delete(name);
        this.fingerprints.delete(name);
        stopped.push(name);
      }
    }
    const created: McpServerConnection[] = [];
    for (const c of configs) {
      const fingerprint = next.get(c.name)!;
      if (this.fingerprints.get(c.name) === fingerprint) continue;
      const old = this.servers.get(c.name);
      if (old) {
        void old.close();
        restarted.push(c.name);
      } else started.push(c.name);
      const conn = new McpServerConnection!(
        c,
        {
          runner: this.opts.runner,
          log: this.opts.log,
          homesDir: path.join(this.opts.stateDir, "homes"),
          timing: this.opts.timing ?? DEFAULT_TIMING!,
          onToolsChanged: (server) => this.toolsChanged(server),
          onStateChanged: (server) => this.stateChanged(server),
          onElicitation: (server, params) => this.elicit(server, params),
        },
        this.cache.get(c.name, fingerprint),
      );
      this.servers.set(c.name, conn);
      this.fingerprints.set(c.name, fingerprint);
      created.push(conn);
    }
    if (configs.length > 0 || stopped.length > 0) this.cache.retain(new Set(next.keys()));
    for (const conn of created) {
      this.stateChanged(conn); // "starting" (or "disabled") for the clients
      conn.start();
    }
    if (stopped.length || restarted.length || created.some((c) => c.tools.length > 0)) this.notifyToolListeners();
    return { started, stopped, restarted };
  }

  private toolsChanged(server: string): void {
    const conn = this.servers.get(server);
    const fingerprint = this.fingerprints.get(server);
    if (conn && fingerprint) this.cache.set(server, fingerprint, conn.tools);
    this.notifyToolListeners();
  }

  private stateChanged(server: McpServerConnection): void {
    for (const l of this.stateListeners) l(server);
  }

  private notifyToolListeners(): void {
    for (const l of this.toolListeners) l();
  }
}
