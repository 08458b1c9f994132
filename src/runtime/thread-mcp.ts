/**
 * A thread's own MCP servers: Codex's `mcp_servers` key in the `config` of thread/start (and of a
 * later thread/resume, which replaces them), written nested (`{"mcp_servers": {NAME: {…}}}`) or
 * dotted (`{"mcp_servers.NAME": {…}}`) as Codex's config overrides are. This is how an editor's
 * MCP servers reach a thread over ACP (src/acp), and any Codex client can use it too:
 *
 *   {command, args?, env?, startup_timeout_sec?}           stdio, run inside the OS sandbox like a
 *                                                          configured server: workspace-write on the
 *                                                          thread's directory, with network (no cwd
 *                                                          of its own: a client must not widen the
 *                                                          sandbox to another directory)
 *   {url, http_headers?, startup_timeout_sec?}             Streamable HTTP (SSE fallback)
 *
 * Their tools join the thread's turns exactly as configured servers' do — `mcp__<server>__<tool>`,
 * sorted by name, asked about under the same approval rules — and a thread's server shadows the
 * same-named tools of a configured server of that name. The servers start with the thread's first
 * turn in this process (which waits for them, up to their start-up timeout) and stop once the
 * thread has been unloaded (checked every minute) or the server stops.
 */
import path from "node:path";
import { z } from "zod";
import type { Logger } from "../log.js";
import type { McpServerConfig } from "../mcp/config.js";
import { McpManager } from "../mcp/manager.js";
import { mcpTool } from "../mcp/tool.js";
import type { CommandRunner } from "../sandbox/runner.js";
import type { LoadedThread } from "./loaded-thread.js";
import type { ToolSource } from "./tool-host.js";

const KEY = "mcp_servers";
const NAME = /^[A-Za-z0-9_-]{1,48}$/;
const startupTimeout = z.number().positive().max(600).optional();

const StdioServer = z
  .object({ command: z.string().min(1), args: z.array(z.string()).default([]), env: z.record(z.string(), z.string()).default({}), startup_timeout_sec: startupTimeout })
  .strict();
const HttpServer = z
  .object({ url: z.url({ protocol: /^https?$/, error: "must be an http:// or https:// URL" }), http_headers: z.record(z.string(), z.string()).default({}), startup_timeout_sec: startupTimeout })
  .strict();
const Servers = z.record(z.string(), z.union([StdioServer, HttpServer], { error: "expected {command, args?, env?} (stdio) or {url, http_headers?} (HTTP)" }));
export type ThreadMcpServersConfig = z.infer<typeof Servers>;

export class ThreadMcpConfigError extends Error {}

/**
 * The config with dotted `mcp_servers.NAME` keys folded into `mcp_servers`, and those servers
 * checked (ThreadMcpConfigError names the server and field). Other keys pass through unchanged.
 */
export function normalizeThreadConfig(config: Record<string, unknown> | null | undefined): Record<string, unknown> | null {
  if (!config) return config ?? null;
  const out: Record<string, unknown> = {};
  let servers: Record<string, unknown> | undefined;
  for (const [k, v] of Object.entries(config)) {
    if (k === KEY) {
      if (v === null || typeof v !== "object" || Array.isArray(v)) throw new ThreadMcpConfigError(`config.${KEY} must be an object of servers by name`);
      servers = { ...servers, ...(v as Record<string, unknown>) };
    } else if (k.startsWith(`${KEY}.`)) servers = { ...servers, [k.slice(KEY.length + 1)]: v };
    else out[k] = v;
  }
  if (servers === undefined) return out;
  const badName = Object.keys(servers).find((name) => !NAME.test(name));
  if (badName !== undefined) throw new ThreadMcpConfigError(`config.${KEY}: ${JSON.stringify(badName)}: server names use letters, digits, _ and - (at most 48)`);
  const parsed = Servers.safeParse(servers);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new ThreadMcpConfigError(`config.${KEY}.${issue.path.map(String).join(".")}: ${issue.message}`);
  }
  out[KEY] = parsed.data;
  return out;
}

/** A thread's config after a resume or fork that gives `config`: the keys it names replace the stored ones. */
export function mergeThreadConfig(current: Record<string, unknown> | null, given: Record<string, unknown> | null | undefined): Record<string, unknown> | null {
  return given ? { ...current, ...normalizeThreadConfig(given) } : current;
}

/** A thread's servers as the MCP manager takes them; empty when its config names none. */
/** `scope`: the thread's id (its servers are confined as its commands are: /tmp, hidden paths). */
export function threadMcpServers(config: Record<string, unknown> | null, cwd: string, scope?: string): McpServerConfig[] {
  const servers = (normalizeThreadConfig(config)?.[KEY] ?? {}) as ThreadMcpServersConfig;
  return Object.entries(servers)
    .map(([name, s]): McpServerConfig => {
      const startupTimeoutSec = s.startup_timeout_sec ?? 30;
      if ("url" in s) return { kind: "http", name, url: s.url, headers: s.http_headers, startupTimeoutSec, disabled: false };
      return {
        kind: "stdio",
        name,
        command: s.command,
        args: s.args,
        env: s.env,
        cwd: path.resolve(cwd),
        sandbox: "workspace-write",
        networkAccess: true,
        writableRoots: [],
        startupTimeoutSec,
        disabled: false,
        ...(scope === undefined ? {} : { sandboxScope: scope }),
      };
    })
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/** Whether two configs name the same servers (a resume that repeats them changes nothing). */
export function sameThreadMcpServers(a: Record<string, unknown> | null, b: Record<string, unknown> | null): boolean {
  const servers = (c: Record<string, unknown> | null) => JSON.stringify(normalizeThreadConfig(c)?.[KEY] ?? {});
  return servers(a) === servers(b);
}

const SWEEP_MS = 60_000;

export interface ThreadMcpDeps {
  runner: CommandRunner;
  log: Logger;
  /** Whether the thread is still loaded in this process (its servers stop once it is not). */
  isLoaded(threadId: string): boolean;
  /** Where each thread's servers keep their state (`<dir>/<threadId>`: tools cache, private homes). */
  stateDir: string;
}

export class ThreadMcpRegistry {
  private readonly byThread = new Map<string, { fingerprint: string; manager: McpManager; started: Promise<void> }>();
  private readonly sweeper: NodeJS.Timeout;

  constructor(private readonly deps: ThreadMcpDeps) {
    this.sweeper = setInterval(() => this.sweep(), SWEEP_MS);
    this.sweeper.unref();
  }

  /** The thread's servers (started on first use, restarted when its config changed), or null. */
  managerOf(thread: LoadedThread): McpManager | null {
    return this.entryOf(thread)?.manager ?? null;
  }

  private entryOf(thread: LoadedThread): { manager: McpManager; started: Promise<void> } | null {
    let servers: McpServerConfig[];
    try {
      servers = threadMcpServers(thread.record.config, thread.record.cwd, thread.id);
    } catch (err) {
      // Checked when it was stored; a config that no longer parses offers no servers.
      this.deps.log.warn({ err, threadId: thread.id }, "ignoring the thread's MCP servers: invalid config");
      servers = [];
    }
    const fingerprint = JSON.stringify(servers);
    const current = this.byThread.get(thread.id);
    if (current?.fingerprint === fingerprint) return current;
    if (current) void current.manager.close();
    this.byThread.delete(thread.id);
    if (servers.length === 0) return null;
    const manager = new McpManager({
      file: null,
      defaultCwd: thread.record.cwd,
      runner: this.deps.runner,
      log: this.deps.log.child({ threadId: thread.id }),
      stateDir: path.join(this.deps.stateDir, thread.id),
    });
    manager.useServers(servers);
    const started = manager.start().catch((err) => this.deps.log.warn({ err, threadId: thread.id }, "could not start the thread's MCP servers"));
    const entry = { fingerprint, manager, started };
    this.byThread.set(thread.id, entry);
    return entry;
  }

  /** The tool source: each thread's servers' tools, once their first start attempt has ended. */
  source(): ToolSource {
    return {
      name: "thread-mcp",
      tools: (ctx, thread) => {
        const manager = this.managerOf(thread);
        return manager ? manager.tools().map((entry) => mcpTool(entry, manager, ctx)) : [];
      },
      ready: async (signal, thread) => {
        const entry = thread ? this.entryOf(thread) : null;
        if (!entry || signal.aborted) return;
        // Every server's first attempt is bounded by its start-up timeout; an interrupt stops the wait.
        await new Promise<void>((resolve) => {
          signal.addEventListener("abort", () => resolve(), { once: true });
          void entry.started.then(() => entry.manager.ready(signal)).then(resolve);
        });
      },
    };
  }

  /** Stops the servers of threads no longer loaded here. */
  sweep(): void {
    for (const [threadId, { manager }] of this.byThread) {
      if (this.deps.isLoaded(threadId)) continue;
      this.byThread.delete(threadId);
      void manager.close();
    }
  }

  async close(): Promise<void> {
    clearInterval(this.sweeper);
    const managers = [...this.byThread.values()].map((e) => e.manager);
    this.byThread.clear();
    await Promise.all(managers.map((m) => m.close()));
  }
}
