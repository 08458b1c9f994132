/**
 * Composes the server: store → runtime → per-connection handlers → transport. Listens first (so
 * /healthz answers at once), then opens and migrates the store, then reports ready.
 */
import path from "node:path";
import type { AppContext } from "./app-context.js";
import { DEFAULT_LIMITS, DEFAULT_MODELS, defaultWorkspace, parseListen, type Listen, type ServerConfig, type ServerLimits } from "./config.js";
import { Metrics } from "./metrics.js";
import { clusterMetrics, isWorkerProcess } from "./workers.js";
import { createLogger, redactUrl, type Logger } from "./log.js";
import { Connection } from "./rpc/connection.js";
import type { SendText } from "./rpc/peer.js";
import { registerSessionHandlers } from "./rpc/handlers/session.js";
import { registerThreadHandlers } from "./rpc/handlers/threads.js";
import { registerTurnHandlers } from "./rpc/handlers/turns.js";
import { registerClientSetupHandlers } from "./rpc/handlers/client-setup.js";
import { registerCredentialHandlers } from "./rpc/handlers/credentials.js";
import { HistoryPages } from "./store/history-pages.js";
import { TurnPages } from "./runtime/turn-pages.js";
import { registerCommandExecHandler } from "./rpc/handlers/command-exec.js";
import { registerFileSearchHandlers } from "./rpc/handlers/file-search.js";
import { mcpStatusNotifier, registerMcpHandlers } from "./rpc/handlers/mcp.js";
import { registerExecPolicyHandlers } from "./rpc/handlers/execpolicy.js";
import { registerTeamHandlers } from "./rpc/handlers/teams.js";
import { ExecPolicyStore } from "./store/execpolicy-store.js";
import { DEFAULT_RETRY } from "./agent/retry.js";
import type { SandboxPolicy } from "./protocol/common.js";
import type { Model } from "./protocol/session.js";
import type { ProviderId, ProviderOptions } from "./providers/index.js";
import { ProviderPool } from "./runtime/provider-pool.js";
import { providerCredentials } from "./runtime/provider-credentials.js";
import { ThreadRuntime } from "./runtime/threads.js";
import { startCluster, type ClusterHandle } from "./runtime/cluster-start.js";
import { openStore, type StoreOpening } from "./open-store.js";
import { DEFAULT_STREAM_IDLE_TIMEOUT_MS, TurnRunner, type TurnSettings } from "./runtime/turns.js";
import { loadHookConfig } from "./hooks/config.js";
import { HookRunner } from "./hooks/runner.js";
import { TurnStore } from "./store/turn-store.js";
import { HistoryLog } from "./runtime/history-log.js";
import { HistoryBudget } from "./runtime/history-budget.js";
import { ThreadHistoryOps } from "./runtime/thread-history-ops.js";
import type { Database, OpenDatabaseOptions } from "./store/database.js";
import { analyzeDatabase } from "./store/maintenance.js";
import { SideWrites } from "./store/side-writes.js";
import { ThreadStore } from "./store/thread-store.js";
import { startStdioTransport } from "./transport/stdio.js";
import { startWebSocketTransport, type WebSocketTransport } from "./transport/websocket.js";
import { keepaliveFromEnv, type KeepaliveOptions } from "./transport/keepalive.js";
import { DEFAULT_MAX_INPUT_BYTES } from "./transport/frame-limits.js";
import { VERSION } from "./version.js";
import { policyOfMode } from "./sandbox/policy.js";
import { CommandRunner, SANDBOX_HELP } from "./sandbox/runner.js";
import { privateTmpBase, TrustBoundary } from "./sandbox/boundary.js";
import { describeLimits } from "./sandbox/limits.js";
import { loadOrCreateHomeToken, peerUidSupported } from "./transport/auth.js";
import { Admission } from "./identity/admission.js";
import { osUserName, Team } from "./identity/team.js";
import type { Principal } from "./identity/principal.js";
import { randomBytes, randomUUID } from "node:crypto";
import { locateMcpConfig } from "./mcp/config.js";
import { McpManager } from "./mcp/manager.js";
import { mcpSource } from "./mcp/source.js";
import { ThreadMcpRegistry } from "./runtime/thread-mcp.js";
import { makeDirectory } from "./make-directory.js";
import { unlessAborted } from "./abortable.js";

export interface StartOptions extends ServerConfig {
  log?: Logger;
  /** Default cwd for new threads, as is (tests); else `workspace`, made at start. */
  cwd?: string;
  /** Extra store options (tests: schema per test, PGlite fixtures). */
  database?: Partial<OpenDatabaseOptions>;
  /**
   * The store, already being opened with these options (the CLI starts it before this module
   * loads). startServer owns it from here: it is closed on every failure, like one opened here.
   */
  store?: StoreOpening;
  /** stdio only: streams to use instead of the process's. */
  stdio?: { input: NodeJS.ReadableStream; output: NodeJS.WritableStream };
  /** stdio only: called when the client closes stdin. */
  onStdioEnd?: () => void;
  /** Per-provider SDK options (default: the SDKs' own environment variables). */
  providers?: Partial<Record<ProviderId, ProviderOptions>>;
  /** Variables set for every command after the allow list (tests: an empty HOME, so the machine's ~/.bashrc stays out). */
  commandEnvironment?: Record<string, string>;
  /** WebSocket pings and initialize deadline (default: APP_SERVER_PING_INTERVAL_MS, APP_SERVER_INITIALIZE_TIMEOUT_MS, else 30 s each). */
  keepalive?: Partial<KeepaliveOptions>;
  /** Agent-loop limits (defaults: 100 model calls per turn, DEFAULT_RETRY). */
  turns?: Partial<TurnSettings>;
  /**
   * Stops the start-up (SIGTERM while starting): startServer then rejects with the signal's reason
   * as soon as it can, having closed what it opened. A database connection still being made is
   * abandoned at once, and so is an embedded database being started (as crash-safe as a kill).
   */
  signal?: AbortSignal;
}

/** Provider options beyond the SDKs' own variables. */
export function providerOptionsFromEnv(env: NodeJS.ProcessEnv): Partial<Record<ProviderId, ProviderOptions>> {
  const role = env.APP_SERVER_CHAT_DEVELOPER_ROLE;
  return {
    "openai-chat": {
      // Some OpenAI-compatible servers reject the `developer` role; `system` works everywhere.
      chatDeveloperRole: role === "system" ? "system" : "developer",
      sendPromptCacheKeyToChat: env.APP_SERVER_CHAT_PROMPT_CACHE_KEY === "1",
    },
  };
}

export function configuredModels(defaultProvider: string, defaultModel: string): Model[] {
  return Object.entries(DEFAULT_MODELS).map(([provider, fallback]) => {
    const model = provider === defaultProvider ? defaultModel : fallback;
    return {
      id: model,
      model,
      upgrade: null,
      upgradeInfo: null,
      availabilityNux: null,
      displayName: model,
      description: `${model} via the ${provider} provider`,
      modelSpecialty: null,
      hidden: false,
      supportedReasoningEfforts: ["low", "medium", "high"].map((e) => ({ reasoningEffort: e, description: `${e} reasoning effort` })),
      defaultReasoningEffort: "medium",
      inputModalities: ["text", "image"],
      supportsPersonality: false,
      multiAgentVersion: null,
      additionalSpeedTiers: [],
      serviceTiers: [],
      defaultServiceTier: null,
      availableAccessPrograms: null,
      isDefault: provider === defaultProvider,
      modelProvider: provider,
    };
  });
}

export interface RunningServer {
  /** ws://HOST:PORT with the real port, or stdio://. */
  readonly url: string;
  /** The token WebSocket clients must present (null: none, APP_SERVER_AUTH=none or stdio). */
  readonly authToken: string | null;
  readonly app: AppContext;
  readonly db: Database;
  close(): Promise<void>;
}

/**
 * The default workspace, created if missing. One the configuration names must be usable; the
 * built-in default (~/agent-workspace) that cannot be made only costs threads without a cwd.
 */
async function makeWorkspace(opts: StartOptions, log: Logger): Promise<string> {
  const dir = opts.workspace ?? defaultWorkspace();
  try {
    await makeDirectory(dir, 0o755);
  } catch (err) {
    const why = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    if (opts.workspace !== undefined) throw new Error(`cannot create the workspace ${dir} (--workspace / APP_SERVER_WORKSPACE): ${why}`);
    log.warn({ workspace: dir, error: why }, "cannot create the default workspace: threads started without a cwd will fail; set --workspace");
  }
  return dir;
}

export async function startServer(opts: StartOptions): Promise<RunningServer> {
  const log = opts.log ?? createLogger();
  const listen = parseListen(opts.listen);
  const signal = opts.signal;
  await unlessAborted(makeDirectory(opts.home), signal);
  const defaultCwd = opts.cwd !== undefined ? path.resolve(opts.cwd) : await makeWorkspace(opts, log);
  const state: ServerState = { ready: false, connections: new Set<Connection>() };

  // The input limit's default keeps an input's echo within 1 MiB frames (transport/frame-limits.ts).
  const limits: ServerLimits = { ...DEFAULT_LIMITS, maxInputBytes: DEFAULT_MAX_INPUT_BYTES, ...opts.limits };
  const boundary = await trustBoundary(opts);
  // Every command the model or a client runs goes through this runner (the OS sandbox seam).
  const commands = new CommandRunner({ bwrapPath: opts.bwrapPath, envAllow: opts.commandEnv ?? [], set: opts.commandEnvironment, boundary });
  const auth = listen.kind === "ws" ? await admission(opts, log) : { token: null, peerUid: undefined };
  // Named users join once the store is open (team.ts); until then only the server's token is known.
  const admitted = new Admission({ serverToken: auth.token, ...(auth.peerUid === undefined ? {} : { peerUid: auth.peerUid }), localName: osUserName(), log });
  /** This process's id in the cluster registry (turn slots are held by it), known once registered. */
  const registered = { processId: "unregistered" };
  const mcp = await loadMcp(opts, defaultCwd, boundary, commands, log, state.connections);
  const sandboxStatus = logSandboxStatus(commands, boundary, log);
  const metrics = new Metrics();
  const accept = connectionAcceptor(state, { log, limits, defaultCwd, commands, boundary });
  const ws = listen.kind === "ws" ? await startWebSocket(opts, listen, log, { state, limits, metrics, admitted, accept }) : null;
  if (ws) metrics.trackOutbound(() => ws.bufferedBytes());

  // The cluster's id of this process, known before the database opens: its sessions carry it, so
  // a process that takes this one for dead can end them (LeaseStore.endSessionsOfDead).
  const processId = opts.store?.processId ?? randomUUID();
  const db = await (opts.store?.db ?? openStore(opts, processId, signal)).catch(async (err: unknown) => {
    await ws?.close();
    throw err;
  });
  log.info({ database: db.kind === "postgres" ? redactUrl(opts.databaseUrl!) : "embedded PGlite" }, "store ready");
  const analyze = db.kind === "pglite" ? analyzeSoon(db, log) : null;
  const embedded = db.embedded;
  if (embedded) metrics.trackEmbeddedDatabase(() => embedded.failures);

  // Audit rows and token counts commit with the next recording transaction (store/side-writes.ts).
  const writes = new SideWrites(db.sql, limits.sideWriteMaxWaitMs);
  const { team, stdioPrincipal } = await startTeam(opts, listen, db, log, { defaultCwd, metrics, registered, state, writes }).catch(async (err: unknown) => {
    await db.close();
    await ws?.close();
    throw err;
  });
  state.team = team;
  admitted.useDirectory(team.directory);
  // A confined user's commands and tools do not see the other users' workspaces (docs/teams.md).
  boundary.setScopeHidden((scope) => team.hiddenFrom(scope));
  metrics.perUser = (userId, usage) => team.quotas.recordTokens(userId, usage);
  const { app, runtime, turns, threadMcp } = await composeApp(opts, { log, limits, defaultCwd, boundary, commands, metrics, db, mcp, team, writes });
  state.app = app;
  await mcp.start();

  const cluster = await joinCluster(opts, processId, signal, sandboxStatus, { db, runtime, turns, log }, async () => {
    await threadMcp.close();
    await mcp.close();
    // The start-up error is the one to report and the team is dropped either way; what its close
    // could not do (free this process's turn slots) it logs itself.
    await team.close().catch(() => {});
    await db.close();
    await ws?.close();
  });
  registered.processId = cluster.links.leases.processId;

  const stdio = listen.kind === "stdio" ? startStdio(opts, (send) => accept(send, undefined, { principal: stdioPrincipal!, remote: "stdio" })) : null;
  state.ready = true;
  const url = ws?.url ?? "stdio://";
  log.info({ url }, "listening");

  const stop = () => stopServer({ state, stdio, ws, cluster, turns, runtime, threadMcp, mcp, team, analyze, db, boundary, log });
  let closing: Promise<void> | null = null;
  return { url, authToken: auth.token, app, db, close: () => (closing ??= stop()) };
}

/** Stops everything startServer started: first the listeners and clients, then turns, then what they used. */
async function stopServer(parts: {
  state: ServerState;
  stdio: { close(): void } | null;
  ws: WebSocketTransport | null;
  cluster: ClusterHandle;
  turns: TurnRunner;
  runtime: ThreadRuntime;
  threadMcp: ThreadMcpRegistry;
  mcp: McpManager;
  team: Team;
  analyze: NodeJS.Timeout | null;
  db: Database;
  boundary: TrustBoundary;
  log: Logger;
}): Promise<void> {
  parts.state.ready = false;
  parts.stdio?.close();
  await parts.ws?.close();
  for (const c of parts.state.connections) c.close();
  parts.cluster.stopSweeping();
  await parts.turns.interruptAll();
  await parts.runtime.shutdown();
  await parts.cluster.close();
  await parts.threadMcp.close();
  await parts.mcp.close();
  await parts.team.close();
  if (parts.analyze) clearTimeout(parts.analyze);
  await parts.db.close();
  await parts.boundary.removePrivateTmp();
  parts.log.info({}, "stopped");
}

/**
 * Registers this process, takes over turns of processes that stopped (start-up recovery, by
 * lease: never a live process's turns), then keeps heartbeating and sweeping. Waits for the
 * sandbox check first. On failure (or an aborted start) `closeOpened` closes what the start opened.
 */
async function joinCluster(
  opts: StartOptions,
  processId: string,
  signal: AbortSignal | undefined,
  sandboxStatus: Promise<void>,
  deps: { db: Database; runtime: ThreadRuntime; turns: TurnRunner; log: Logger },
  closeOpened: () => Promise<void>,
): Promise<ClusterHandle> {
  try {
    await unlessAborted(sandboxStatus, signal);
    return await unlessAborted(startCluster({ ...deps, home: opts.home, env: process.env, processId }), signal, (late) => late.close());
  } catch (err) {
    await closeOpened();
    throw err;
  }
}

/** The stdio transport: one client on the process's (or the given) streams. */
function startStdio(opts: StartOptions, accept: (send: SendText) => ReturnType<Accept>): { close(): void } {
  return startStdioTransport({
    input: opts.stdio?.input as never,
    output: opts.stdio?.output as never,
    maxLineBytes: opts.maxFrameBytes,
    accept,
    onEnd: () => opts.onStdioEnd?.(),
  });
}

/**
 * What the connection callbacks need but only exists later in the start: whether the store is
 * ready, the open connections, and the team and app once made (no connection is accepted before).
 */
interface ServerState {
  ready: boolean;
  connections: Set<Connection>;
  team?: Team;
  app?: AppContext;
}

/**
 * The trust boundary every command, file tool and MCP server is held to (src/sandbox/boundary.ts):
 * this server's home (database files, tokens, configs), the token file and other secret files
 * are hidden; every configuration file it loads is protected; each thread gets a private /tmp.
 */
async function trustBoundary(opts: StartOptions): Promise<TrustBoundary> {
  return new TrustBoundary({
    hidden: [opts.home, ...(opts.authTokenFile ? [opts.authTokenFile] : []), ...(opts.secretFiles ?? [])],
    tmpBase: opts.sharedTmp ? null : await privateTmpBase(opts.home, randomBytes(4).toString("hex")),
    limits: opts.commandLimits,
    ...(opts.maxPatchBytes ? { maxPatchBytes: opts.maxPatchBytes } : {}),
  });
}

/**
 * MCP servers: a configuration error stops the start (naming the file and the field); the
 * servers themselves connect in the background (McpManager.start, later), so a slow one never
 * delays readiness. Their state changes reach every connection.
 */
async function loadMcp(opts: StartOptions, defaultCwd: string, boundary: TrustBoundary, commands: CommandRunner, log: Logger, connections: Set<Connection>): Promise<McpManager> {
  const mcpFile = await locateMcpConfig(opts.mcpConfig, opts.home);
  if (mcpFile !== null) boundary.protectConfig(mcpFile);
  const mcp = new McpManager({
    file: mcpFile,
    defaultCwd,
    runner: commands,
    log: log.child({ component: "mcp" }),
    stateDir: path.join(opts.home, "mcp"),
  });
  mcpStatusNotifier(mcp, () => connections);
  await mcp.load();
  return mcp;
}

/** Logs whether commands can be sandboxed here (checked in the background; awaited before ready). */
function logSandboxStatus(commands: CommandRunner, boundary: TrustBoundary, log: Logger): Promise<void> {
  return commands.status().then((status) => {
    if (status.available)
      log.info(
        { bwrap: status.bwrap, version: status.version, limits: status.prlimit ? describeLimits(boundary.limits) : "none (prlimit not found)", privateTmp: boundary.tmpBase !== null },
        "command sandbox ready",
      );
    else log.warn({ reason: status.reason, help: SANDBOX_HELP }, "command sandbox unavailable: commands under read-only and workspace-write are refused (danger-full-access still runs)");
  });
}

type Accept = (
  send: SendText,
  closeSocket: ((code: number, reason: string) => void) | undefined,
  who: { principal: Principal; remote: string | null },
) => { receive(text: string): void; closed(): void; drain(): Promise<void>; initialized(): boolean };

/** A new client connection (either transport): its JSON-RPC session, with every method handler registered. */
function connectionAcceptor(
  state: ServerState,
  deps: { log: Logger; limits: ServerLimits; defaultCwd: string; commands: CommandRunner; boundary: TrustBoundary },
): Accept {
  const { log, limits, defaultCwd, commands, boundary } = deps;
  let connectionCount = 0;
  return (send, closeSocket, who) => {
    const app = state.app!;
    const team = state.team!;
    // Every line a connection logs names it (with the request id where there is one).
    const conn = new Connection(
      send,
      log.child({ component: "rpc", connection: ++connectionCount, user: who.principal.name }),
      { maxInFlightRequests: limits.maxInFlightRequests, requestsPerSecond: limits.requestsPerSecond, requestBurst: limits.requestBurst },
      { principal: who.principal, guard: team.guard, remote: who.remote },
    );
    state.connections.add(conn);
    team.track(conn, closeSocket);
    registerSessionHandlers(conn, app);
    registerThreadHandlers(conn, app);
    registerTurnHandlers(conn, app);
    registerClientSetupHandlers(conn, app);
    registerCredentialHandlers(conn, app);
    registerCommandExecHandler(conn, app, { cwd: defaultCwd, policy: policyOfMode("workspace-write"), commands });
    registerMcpHandlers(conn, app);
    registerFileSearchHandlers(conn, app, boundary.hidden);
    registerExecPolicyHandlers(conn, app);
    registerTeamHandlers(conn, app);
    conn.onClose(() => {
      state.connections.delete(conn);
      app.runtime.disconnect(conn);
    });
    return { receive: (text: string) => conn.receive(text), closed: () => conn.close(), drain: () => conn.peer.drain(), initialized: () => conn.initialized };
  };
}

/** The WebSocket listener (answers /healthz at once; clients are accepted once the state says ready). */
function startWebSocket(
  opts: StartOptions,
  listen: Extract<Listen, { kind: "ws" }>,
  log: Logger,
  deps: { state: ServerState; limits: ServerLimits; metrics: Metrics; admitted: Admission; accept: Accept },
): Promise<WebSocketTransport> {
  const { state, limits, metrics } = deps;
  // --workers: GET /metrics reports every worker, aggregated by the primary (workers.ts).
  const renderMetrics = isWorkerProcess() ? clusterMetrics(metrics) : () => metrics.render();
  return startWebSocketTransport({
    host: listen.host,
    port: listen.port,
    maxFrameBytes: opts.maxFrameBytes,
    log,
    isReady: () => state.ready,
    accept: deps.accept,
    keepalive: { ...keepaliveFromEnv(process.env), ...opts.keepalive },
    admission: deps.admitted,
    allowedOrigins: opts.allowedOrigins ?? [],
    maxConnections: limits.maxConnections,
    outbound: { highWaterBytes: limits.outboundHighWaterBytes, maxBufferedBytes: limits.outboundMaxBytes },
    metrics: renderMetrics,
    onCoalesced: () => metrics.coalescedDeltas.inc(),
    onOverflow: () => metrics.overflowCloses.inc(),
    onConnectionsChanged: (n) => metrics.setConnections(n),
  });
}

/**
 * PGlite has no autovacuum, so nothing would ever collect planner statistics; without them a
 * search over many threads reads every row. One ANALYZE in the background after start fixes it.
 */
function analyzeSoon(db: Database, log: Logger): NodeJS.Timeout {
  return setTimeout(() => void analyzeDatabase(db).catch((err) => log.warn({ err }, "could not analyze the embedded database")), 1000).unref();
}

/** Users, shares, quotas and the audit trail (identity/team.ts); over stdio, also the spawning user's principal. */
async function startTeam(
  opts: StartOptions,
  listen: Listen,
  db: Database,
  log: Logger,
  deps: { defaultCwd: string; metrics: Metrics; registered: { processId: string }; state: ServerState; writes: SideWrites },
): Promise<{ team: Team; stdioPrincipal: Principal | undefined }> {
  const { metrics, registered, state } = deps;
  const team = await Team.start({
    sql: db.sql,
    writes: deps.writes,
    log,
    settings: opts.team ?? {},
    processId: () => registered.processId,
    defaultCwd: deps.defaultCwd,
    // Asked only once the app exists (the team serves connections and turns, which come later).
    activeTurn: (threadId) => {
      const active = state.app!.runtime.loaded.get(threadId)?.activeTurn;
      return active ? { id: active.id, ended: state.app!.turns.settle(threadId) } : null;
    },
    loadedOwner: (threadId) => state.app!.runtime.loaded.get(threadId)?.record.userId ?? null,
    onTokens: (user, usage) => metrics.userTokens(user, usage),
    unsubscribe: (threadId, conn) => void state.app!.runtime.unsubscribe(threadId, conn),
  });
  try {
    // Over stdio the principal is the spawning user (or the user APP_SERVER_USER names: known now or refused now).
    return { team, stdioPrincipal: listen.kind === "stdio" ? team.stdioPrincipal() : undefined };
  } catch (err) {
    await team.close();
    throw err;
  }
}

/** The runtime, the turn runner with its hooks and tool sources, and the context every handler gets. */
async function composeApp(
  opts: StartOptions,
  deps: { log: Logger; limits: ServerLimits; defaultCwd: string; boundary: TrustBoundary; commands: CommandRunner; metrics: Metrics; db: Database; mcp: McpManager; team: Team; writes: SideWrites },
): Promise<{ app: AppContext; runtime: ThreadRuntime; turns: TurnRunner; threadMcp: ThreadMcpRegistry }> {
  const { log, defaultCwd, commands, metrics, db, mcp } = deps;
  // Loaded first: from the runtime on, nothing here waits, so the app is whole before any
  // callback (the team's) can ask for it.
  const hooks = await loadHooks(opts, deps.boundary, commands, log, (threadId) => {
    const r = runtime.loaded.get(threadId)?.record;
    return r ? (r.sandboxPolicy ?? policyOfMode(r.sandbox)) : null;
  });
  const store = new ThreadStore(db.sql, deps.writes);
  const runtime = new ThreadRuntime(
    store,
    {
      modelProvider: opts.modelProvider,
      model: opts.model,
      cwd: defaultCwd,
      approvalPolicy: "on-request",
      sandbox: "workspace-write",
    },
    VERSION,
    log.child({ component: "runtime" }),
  );
  const knownProviders = Object.keys(DEFAULT_MODELS) as ProviderId[];
  const providerOptions = opts.providers ?? providerOptionsFromEnv(process.env);
  // A thread's own MCP servers (config.mcp_servers of thread/start: an ACP editor's servers).
  const threadMcp = new ThreadMcpRegistry({ runner: commands, log: log.child({ component: "mcp" }), isLoaded: (id) => runtime.loaded.has(id), stateDir: path.join(opts.home, "mcp", "threads") });
  const turnStore = new TurnStore(db.sql);
  // The loaded threads' histories in memory are bounded (runtime/history-budget.ts); an ending not
  // yet recorded keeps its thread's.
  const budget = new HistoryBudget(deps.limits.loadedHistoryMaxBytes, (t) => runtime.unrecorded?.has(t.id) ?? false);
  runtime.historyBudget = budget;
  metrics.trackLoadedThreads(() => ({ loaded: runtime.loaded.size, withHistory: budget.threads, historyBytes: budget.bytes, evictions: budget.evictions }));
  const historyLog = new HistoryLog(turnStore, store, budget);
  const turns = new TurnRunner(
    runtime,
    turnStore,
    new ProviderPool(providerOptions),
    { ...turnSettingsFromEnv(process.env, deps.limits), ...opts.turns },
    log.child({ component: "turns" }),
    historyLog,
    metrics,
    commands,
    hooks,
    [threadMcp.source(), mcpSource(mcp)],
  );
  const history = new ThreadHistoryOps(runtime, turnStore, historyLog, { shell: "bash" }, log.child({ component: "history" }));
  runtime.onCommit = (seconds) => metrics.commitSeconds(seconds);
  const app: AppContext = {
    limits: deps.limits,
    version: VERSION,
    home: opts.home,
    defaultCwd,
    log,
    runtime,
    turns,
    history,
    models: configuredModels(opts.modelProvider, opts.model),
    providers: {
      has: (id) => (knownProviders as string[]).includes(id),
      ids: () => knownProviders,
      credentials: () => providerCredentials(knownProviders, providerOptions, process.env),
    },
    turnsOf: (threadId) => history.turnsOf(threadId),
    pages: new TurnPages(runtime, turnStore, new HistoryPages(db.sql)),
    mcp,
    execPolicy: new ExecPolicyStore(db.sql),
    team: deps.team,
  };
  return { app, runtime, turns, threadMcp };
}

/** The agent-loop settings from the environment (each falls back to its default when unusable). */
export function turnSettingsFromEnv(env: NodeJS.ProcessEnv, limits: ServerLimits): TurnSettings {
  const maxModelCalls = Number(env.APP_SERVER_MAX_MODEL_CALLS ?? 100);
  const contextWindow = Number(env.APP_SERVER_CONTEXT_WINDOW ?? 0);
  const autoCompactShare = Number(env.APP_SERVER_AUTO_COMPACT_SHARE ?? 0.8);
  const streamIdleTimeoutMs = Number(env.APP_SERVER_STREAM_IDLE_TIMEOUT_MS ?? DEFAULT_STREAM_IDLE_TIMEOUT_MS);
  const planStopGuard = !["0", "false", "off"].includes((env.APP_SERVER_PLAN_STOP_GUARD ?? "").toLowerCase());
  return {
    maxModelCalls: Number.isSafeInteger(maxModelCalls) && maxModelCalls > 0 ? maxModelCalls : 100,
    retry: DEFAULT_RETRY,
    maxParallelTools: 4,
    shell: "bash",
    maxConcurrentTurns: limits.maxConcurrentTurns,
    ...(Number.isSafeInteger(contextWindow) && contextWindow > 0 ? { contextWindow } : {}),
    autoCompactShare: autoCompactShare > 0 && autoCompactShare <= 1 ? autoCompactShare : 0.8,
    streamIdleTimeoutMs: Number.isSafeInteger(streamIdleTimeoutMs) && streamIdleTimeoutMs > 0 ? streamIdleTimeoutMs : DEFAULT_STREAM_IDLE_TIMEOUT_MS,
    planStopGuard,
  };
}

/**
 * The user's hooks (APP_SERVER_HOOKS_CONFIG, else <home>/hooks.json); null when there is no hook
 * and no problem. A file with problems gets a runner even when no hook in it is usable: hooks/list
 * reports the problems from there (they would otherwise only reach the log).
 */
async function loadHooks(
  opts: StartOptions,
  boundary: TrustBoundary,
  commands: CommandRunner,
  log: Logger,
  /** The sandbox policy of a loaded thread (hooks run confined like its commands). */
  policyOf: (threadId: string) => SandboxPolicy | null,
): Promise<HookRunner | null> {
  const hooksFile = path.resolve(process.env.APP_SERVER_HOOKS_CONFIG ?? path.join(opts.home, "hooks.json"));
  boundary.protectConfig(hooksFile); // read-only for commands, never written by tools (even before it exists)
  const hookConfig = await loadHookConfig(hooksFile);
  for (const problem of hookConfig.errors) log.warn({ path: hookConfig.path, problem }, "hook configuration problem; those hooks are not run");
  if (hookConfig.hooks.length === 0 && hookConfig.errors.length === 0) return null;
  return new HookRunner(hookConfig, commands, policyOf, log.child({ component: "hooks" }));
}

/**
 * How WebSocket clients are admitted (src/transport/auth.ts): the configured token, else the
 * home's generated one, and — in the default mode — the server's own user on loopback.
 */
async function admission(opts: StartOptions, log: Logger): Promise<{ token: string | null; peerUid: number | undefined }> {
  const mode = opts.auth ?? "token";
  let token = opts.authToken ?? null;
  // A configured token is always required; `none` only means no generated token and no user check.
  if (mode === "none") return { token, peerUid: undefined };
  if (token === null) {
    const home = await loadOrCreateHomeToken(opts.home);
    if (home.replaced) log.warn({ file: home.file, reason: home.replaced }, "replaced the auth token: the old one may have been read by others");
    else if (home.created) log.info({ file: home.file }, "generated an auth token for clients (mode 0600)");
    token = home.token;
  }
  if (mode === "token-any-user") return { token, peerUid: undefined };
  if (!(await peerUidSupported())) {
    log.warn({}, "cannot check which user a loopback client runs as here (no /proc/net/tcp): the token alone admits clients");
    return { token, peerUid: undefined };
  }
  return { token, peerUid: process.getuid!() };
}
