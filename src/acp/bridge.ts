/**
 * The ACP agent: `@agentclientprotocol/sdk`'s agent-side connection to the editor on one side, a
 * Codex v2 client of the engine (engine.ts) on the other. Every ACP method is answered with Codex
 * methods — session/new → thread/start, session/load → thread/resume (its turns replayed as
 * updates), session/prompt → turn/start, session/cancel → turn/interrupt, list/fork/archive/title
 * → thread/list, thread/fork, thread/archive, thread/name/set — and the server's notifications and
 * approval requests go to the session of their thread (session.ts).
 */
import path from "node:path";
import {
  PROTOCOL_VERSION,
  RequestError,
  type AgentContext,
  type ClientCapabilities,
  type InitializeResponse,
  type McpServer,
  type SessionConfigOption,
  type SessionInfo,
} from "@agentclientprotocol/sdk/unstable";
import type { Logger } from "../log.js";
import type { Thread, ThreadStartResponse } from "../protocol/thread.js";
import { VERSION } from "../version.js";
import { ConfigOptions } from "./config-options.js";
import type { Engine } from "./engine.js";
import { availableModes, isModeId, modeOfSettings, modeState, threadSettingsOf, type ModeId } from "./modes.js";
import { AVAILABLE_COMMANDS } from "./prompt.js";
import { asRequestError } from "./outcome.js";
import { AcpSession } from "./session.js";

export interface BridgeOptions {
  /** The engine, starting (its failure is the answer to every request). */
  engine: Promise<Engine>;
  log: Logger;
  /** The mode of new sessions. */
  defaultMode: ModeId;
}

/** An editor's MCP servers as Codex's `config.mcp_servers` (names made valid; SSE servers are HTTP servers here). */
export function mcpServersConfig(servers: McpServer[] | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const s of servers ?? []) {
    const name = s.name.replace(/[^A-Za-z0-9_-]/g, "_").slice(0, 48) || "server";
    if ("url" in s && typeof s.url === "string") out[name] = { url: s.url, http_headers: Object.fromEntries((s.headers ?? []).map((h) => [h.name, h.value])) };
    else if ("command" in s) out[name] = { command: s.command, args: s.args ?? [], env: Object.fromEntries((s.env ?? []).map((e) => [e.name, e.value])) };
  }
  return { mcp_servers: out };
}

interface SessionTarget {
  cwd: string;
  mcpServers?: McpServer[];
  additionalDirectories?: string[];
}

/** The session's directory and extra roots; ACP requires absolute paths. */
function targetOf(p: SessionTarget): { cwd: string; roots: string[] } {
  const absolute = (dir: string, what: string) => {
    if (!path.isAbsolute(dir)) throw RequestError.invalidParams({ [what]: dir }, `${what} must be an absolute path (got ${dir})`);
    return dir;
  };
  return { cwd: absolute(p.cwd, "cwd"), roots: (p.additionalDirectories ?? []).map((d) => absolute(d, "additionalDirectories")) };
}

export class AcpBridge {
  private editor: AgentContext | null = null;
  private capabilities: ClientCapabilities = {};
  private readonly sessions = new Map<string, AcpSession>();
  private options!: ConfigOptions;
  private wired: Engine | null = null;

  constructor(private readonly opts: BridgeOptions) {}

  /** The engine once started, its Codex client wired to the sessions (first use). */
  private async engine(): Promise<Engine> {
    let engine: Engine;
    try {
      engine = await this.opts.engine;
    } catch (err) {
      throw RequestError.internalError(undefined, (err as Error).message);
    }
    if (this.wired !== engine) {
      this.wired = engine;
      this.wire(engine);
    }
    return engine;
  }

  private wire(engine: Engine): void {
    const { codex } = engine;
    this.options = new ConfigOptions(codex);
    codex.onNotification((method, params) => {
      const threadId: unknown = params?.threadId ?? params?.thread?.id;
      if (typeof threadId === "string") this.sessions.get(threadId)?.onNotification(method, params);
    });
    const route = <R>(fallback: R, ask: (s: AcpSession, params: any, id: string | number) => Promise<unknown>) => (params: any, frame: { id?: string | number | null }) => {
      const session = this.sessions.get(params?.threadId);
      return session && frame.id !== undefined && frame.id !== null ? ask(session, params, frame.id) : fallback;
    };
    codex.handle("item/commandExecution/requestApproval", route({ decision: "decline" }, (s, p, id) => s.approveCommand(p, id)));
    codex.handle("item/fileChange/requestApproval", route({ decision: "decline" }, (s, p, id) => s.approveFileChange(p, id)));
    codex.handle("mcpServer/elicitation/request", route({ action: "decline" }, (s, p, id) => s.elicit(p, id)));
    void codex.closed.then(({ code, reason }) => {
      for (const s of this.sessions.values()) s.lost(`${code}${reason ? ` ${reason}` : ""}`);
    });
  }

  attach(editor: AgentContext): void {
    this.editor = editor;
  }

  private session(sessionId: string): AcpSession {
    const s = this.sessions.get(sessionId);
    if (!s) throw RequestError.sessionNotFound(sessionId);
    return s;
  }

  // ---- initialize and authenticate ---------------------------------------------------------

  async initialize(capabilities: ClientCapabilities | undefined): Promise<InitializeResponse> {
    this.capabilities = capabilities ?? {};
    const engine = await this.engine();
    return {
      protocolVersion: PROTOCOL_VERSION,
      agentCapabilities: {
        loadSession: true,
        promptCapabilities: { image: true, audio: false, embeddedContext: true },
        mcpCapabilities: { http: true, sse: true },
        sessionCapabilities: { list: {}, resume: {}, close: {}, fork: {}, archive: {}, title: {}, additionalDirectories: {} },
      },
      authMethods: engine.authMethods(),
      agentInfo: { name: "agent-app-server", title: "agent-app-server", version: VERSION },
    };
  }

  async authenticate(methodId: string): Promise<void> {
    const engine = await this.engine();
    try {
      engine.authenticate(methodId);
    } catch (err) {
      throw RequestError.authRequired(undefined, (err as Error).message);
    }
  }

  private async ready(): Promise<Engine> {
    const engine = await this.engine();
    if (engine.needsAuth()) throw RequestError.authRequired(undefined, engine.authMethods()[0]?.description ?? "the agent needs an API key");
    return engine;
  }

  // ---- sessions ----------------------------------------------------------------------------

  private open(threadId: string, response: ThreadStartResponse, mode: ModeId, writableRoots: string[]): AcpSession {
    // The session this one replaces (the editor loaded the thread again): closing it only cancels its prompt.
    this.sessions.get(threadId)?.close().catch((err) => this.opts.log.debug({ err, threadId }, "could not close the replaced session"));
    const session = new AcpSession(
      threadId,
      { cwd: response.cwd, mode, model: response.model, modelProvider: response.modelProvider, writableRoots },
      {
        codex: this.wired!.codex,
        editor: this.editor!,
        log: this.opts.log.child({ sessionId: threadId }),
        terminalOutput: (this.capabilities._meta as { terminal_output?: unknown } | null | undefined)?.terminal_output === true,
        elicitation: this.capabilities.elicitation?.form !== undefined && this.capabilities.elicitation?.form !== null,
      },
    );
    this.sessions.set(threadId, session);
    return session;
  }

  private async sessionState(session: AcpSession) {
    return { modes: modeState(session.settings.mode), configOptions: await this.options.of(session.settings) };
  }

  private commandsOf(session: AcpSession): void {
    session.send({ sessionUpdate: "available_commands_update", availableCommands: AVAILABLE_COMMANDS });
  }

  /** A Codex request on behalf of a session: an unknown thread is ACP's session-not-found. */
  private async call<T = any>(method: string, params: Record<string, unknown>, sessionId = ""): Promise<T> {
    const { codex } = await this.engine();
    try {
      return await codex.request<T>(method, params);
    } catch (err) {
      if (sessionId && (err as { code?: number }).code === -32600 && /thread not found/.test((err as Error).message)) throw RequestError.sessionNotFound(sessionId);
      throw asRequestError(err, sessionId);
    }
  }

  async newSession(p: SessionTarget) {
    await this.ready();
    const { cwd, roots } = targetOf(p);
    const mode = this.opts.defaultMode;
    const settings = threadSettingsOf(mode);
    const roomy = roots.length > 0 && settings.sandbox === "workspace-write";
    const servers = p.mcpServers?.length ? { config: mcpServersConfig(p.mcpServers) } : {};
    const r = await this.call<ThreadStartResponse>("thread/start", { cwd, ...settings, ...(roomy ? { runtimeWorkspaceRoots: roots } : {}), ...servers });
    const session = this.open(r.thread.id, r, mode, roots);
    // After the response (the editor learns the session id from it).
    setTimeout(() => this.commandsOf(session), 0);
    return { sessionId: session.id, ...(await this.sessionState(session)) };
  }

  /** session/load (replay: the history as updates before the response) and session/resume (none). */
  async loadSession(p: SessionTarget & { sessionId: string }, replay: boolean) {
    await this.ready();
    const { cwd, roots } = targetOf(p);
    const params = { threadId: p.sessionId, cwd, config: mcpServersConfig(p.mcpServers), ...(replay ? {} : { excludeTurns: true }) };
    const r = await this.call<ThreadStartResponse>("thread/resume", params, p.sessionId);
    const session = this.open(p.sessionId, r, modeOfSettings(r.approvalPolicy, r.sandbox), roots);
    if (replay) session.replay(r.thread.turns);
    this.commandsOf(session);
    return this.sessionState(session);
  }

  async forkSession(p: SessionTarget & { sessionId: string }) {
    await this.ready();
    const { cwd, roots } = targetOf(p);
    const params = { threadId: p.sessionId, cwd, excludeTurns: true, ...(p.mcpServers ? { config: mcpServersConfig(p.mcpServers) } : {}) };
    const r = await this.call<ThreadStartResponse>("thread/fork", params, p.sessionId);
    const session = this.open(r.thread.id, r, modeOfSettings(r.approvalPolicy, r.sandbox), roots);
    setTimeout(() => this.commandsOf(session), 0);
    return { sessionId: session.id, ...(await this.sessionState(session)) };
  }

  async listSessions(p: { cwd?: string | null; cursor?: string | null; archived?: string | null }): Promise<{ sessions: SessionInfo[]; nextCursor: string | null }> {
    const filters = { ...(p.cwd ? { cwd: p.cwd } : {}), ...(p.cursor ? { cursor: p.cursor } : {}), ...(p.archived === "only" ? { archived: true } : {}) };
    const page = await this.call<{ data: Thread[]; nextCursor: string | null }>("thread/list", { limit: 50, sortKey: "updated_at", ...filters });
    const sessions: SessionInfo[] = page.data.map((t) => ({
      sessionId: t.id,
      cwd: t.cwd,
      title: t.name ?? (t.preview || null),
      updatedAt: new Date(t.updatedAt * 1000).toISOString(),
    }));
    return { sessions, nextCursor: page.nextCursor };
  }

  async closeSession(sessionId: string): Promise<void> {
    const session = this.session(sessionId);
    this.sessions.delete(sessionId);
    await session.close();
    // The editor's session is closed either way; a failed unsubscribe leaves the server sending this thread's
    // notifications, which no session takes any more, until the connection ends.
    await this.wired?.codex
      .request("thread/unsubscribe", { threadId: sessionId })
      .catch((err) => this.opts.log.warn({ err, threadId: sessionId }, "could not unsubscribe from a closed session's thread"));
  }

  async archive(sessionId: string, archived: boolean): Promise<void> {
    if (archived && this.sessions.has(sessionId)) await this.closeSession(sessionId);
    await this.call(archived ? "thread/archive" : "thread/unarchive", { threadId: sessionId }, sessionId);
  }

  /** The title as stored (trimmed; an empty one clears the name). */
  async setTitle(sessionId: string, title: string): Promise<{ title: string }> {
    await this.call("thread/name/set", { threadId: sessionId, name: title }, sessionId);
    return { title: title.trim() };
  }

  // ---- modes and config options ------------------------------------------------------------

  setMode(sessionId: string, modeId: string): void {
    const session = this.session(sessionId);
    if (!isModeId(modeId)) throw RequestError.invalidParams({ modeId }, `unknown mode ${modeId} (modes: ${availableModes().map((m) => m.id).join(", ")})`);
    session.setMode(modeId);
    void this.options.of(session.settings).then((configOptions) => session.send({ sessionUpdate: "config_option_update", configOptions }));
  }

  async setConfigOption(sessionId: string, configId: string, value: unknown): Promise<{ configOptions: SessionConfigOption[] }> {
    const session = this.session(sessionId);
    if (configId === "mode") {
      if (typeof value !== "string" || !isModeId(value)) throw RequestError.invalidParams({ value }, `unknown mode ${String(value)}`);
      session.setMode(value);
      session.send({ sessionUpdate: "current_mode_update", currentModeId: value });
    } else if (configId === "model") {
      const choice = await this.options.model(value);
      if (!choice) throw RequestError.invalidParams({ value }, `unknown model ${String(value)}`);
      session.setModel(choice.model, choice.modelProvider);
    } else throw RequestError.invalidParams({ configId }, `unknown config option ${configId} (options: mode, model)`);
    return { configOptions: await this.options.of(session.settings) };
  }

  // ---- prompts -----------------------------------------------------------------------------

  async prompt(sessionId: string, prompt: Parameters<AcpSession["run"]>[0], signal: AbortSignal) {
    await this.ready();
    return { stopReason: await this.session(sessionId).run(prompt, signal) };
  }

  async cancel(sessionId: string): Promise<void> {
    await this.sessions.get(sessionId)?.cancel();
  }

  /** The editor went away: cancel what runs, stop the engine. */
  async shutdown(): Promise<void> {
    await Promise.all([...this.sessions.values()].map((s) => s.close()));
    this.sessions.clear();
    // An engine that failed to start was reported to the editor by every request that needed it; there is nothing to stop.
    const engine = await this.opts.engine.catch(() => null);
    await engine?.close();
  }
}
