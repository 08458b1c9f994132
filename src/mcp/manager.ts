/**
 * Every configured MCP server: started in parallel at server start-up (in the background: a slow
 * or broken server never delays readiness or the other tools), re-read by
 * config/mcpServer/reload, and offered to turns as one sorted list of model-facing tools.
 *
 * Prefix stability: a turn takes the tool list as it is when the turn starts, sorted by model
 * name, so the list is byte-identical from request to request whatever order servers answered in.
 * A server that connects late, reconnects with other tools or sends list_changed changes the list
 * from the next turn on only — that turn starts a new cached prefix, the ones before keep theirs.
 */
import type { ElicitRequest, ElicitResult, Tool } from "@modelcontextprotocol/sdk/types.js";
import type { Logger } from "../log.js";
import type { CommandRunner } from "../sandbox/runner.js";
import { loadMcpConfig, type McpServerConfig } from "./config.js";
import { nameTools } from "./names.js";
// Type only: the connection module (and with it the MCP SDK, ~145 modules) is loaded when a
// server is configured, not at every start.
import type { McpServerConnection } from "./server-connection.js";

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
}

export class McpManager {
  private servers = new Map<string, McpServerConnection>();
  private configs = new Map<string, string>();
  /** Who to ask when a server sends an elicitation: the clients of its calls in flight, newest first. */
  private askers = new Map<string, ElicitationAsker[]>();
  private listeners = new Set<() => void>();

  constructor(private readonly opts: McpManagerOptions) {}

  private loaded: McpServerConfig[] | null = null;

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

  /** Resolves once every server has finished its current start attempt (tests, status). */
  async settled(): Promise<void> {
    await Promise.all([...this.servers.values()].map((s) => s.start().catch(() => {})));
  }

  onToolsChanged(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The tools of the connected servers, sorted by model name (the prompt's order). */
  tools(): McpToolEntry[] {
    const byKey = new Map<string, Tool>();
    const pairs: Array<{ server: string; tool: string }> = [];
    for (const s of this.servers.values()) {
      if (s.state !== "connected") continue;
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
  }

  private async apply(configs: McpServerConfig[]) {
    const { McpServerConnection } = configs.length > 0 || this.servers.size > 0 ? await import("./server-connection.js") : { McpServerConnection: null };
    const started: string[] = [];
    const stopped: string[] = [];
    const restarted: string[] = [];
    const next = new Map(configs.map((c) => [c.name, JSON.stringify(c)]));
    for (const [name, conn] of this.servers) {
      if (!next.has(name)) {
        void conn.close();
        this.servers.delete(name);
        this.configs.delete(name);
        stopped.push(name);
      }
    }
    for (const c of configs) {
      const same = this.configs.get(c.name) === next.get(c.name);
      if (same) continue;
      const old = this.servers.get(c.name);
      if (old) {
        void old.close();
        restarted.push(c.name);
      } else started.push(c.name);
      const conn = new McpServerConnection!(c, {
        runner: this.opts.runner,
        log: this.opts.log,
        onToolsChanged: () => this.changed(),
        onElicitation: (server, params) => this.elicit(server, params),
      });
      this.servers.set(c.name, conn);
      this.configs.set(c.name, next.get(c.name)!);
      void conn.start();
    }
    if (stopped.length || restarted.length) this.changed();
    return { started, stopped, restarted };
  }

  private changed(): void {
    for (const l of this.listeners) l();
  }
}
