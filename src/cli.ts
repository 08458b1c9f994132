/** The `app-server` command: serve, exec, threads, generate-json-schema, --help. */
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import nodeModule from "node:module";
import path from "node:path";
import { parseArgs } from "node:util";
import { ConfigError, DEFAULT_LISTEN, DEFAULT_MODELS, loadApiKeyFiles, missingApiKeyWarning, resolveServeConfig, type ServerConfig } from "./config.js";
import { createLogger, routeConsoleWarnings, type Logger } from "./log.js";
import { listeningBanner } from "./playground-address.js";
import { describeStartError } from "./start-error.js";
import { limitYoungGeneration, releaseAfterWork } from "./runtime/memory-release.js";
import type { RunningServer } from "./server.js";
import type { StoreOpening } from "./open-store.js";
import { VERSION } from "./version.js";
import { AUTH_TOKEN_FILE } from "./transport/auth.js";

const SERVE_OPTIONS_HELP = `Options (environment fallback in brackets):
  --listen URL             ws://HOST:PORT (port 0 picks a free port) or stdio://  [APP_SERVER_LISTEN]
                           default ${DEFAULT_LISTEN}
  --database-url URL       PostgreSQL URL (URL-encode special characters of the password);
                           without it an embedded PGlite database is kept under the
                           home directory                                    [DATABASE_URL]
  --database-schema NAME   keep the tables in this Postgres schema (created if missing)
                                                                             [APP_SERVER_DATABASE_SCHEMA]
  --home DIR               data directory, default ~/.agent-app-server       [APP_SERVER_HOME]
  --workspace DIR          where new threads run when the client sends no cwd, default
                           ~/agent-workspace (created at start)              [APP_SERVER_WORKSPACE]
  --model-provider P       anthropic | openai | openai-chat, default openai  [APP_SERVER_MODEL_PROVIDER]
  --model M                default model for new threads, default per provider:
                           ${Object.entries(DEFAULT_MODELS).map(([p, m]) => `${p} ${m}`).join(", ")}
                                                                             [APP_SERVER_MODEL]
  --max-frame-bytes N      largest accepted message, default 16 MiB          [APP_SERVER_MAX_FRAME_BYTES]
  --auth-token-file FILE   clients must send this token (Authorization: Bearer) [APP_SERVER_AUTH_TOKEN_FILE]
                           (or the token itself in APP_SERVER_AUTH_TOKEN); without one, a token
                           is generated into <home>/auth-token (mode 0600) at first start
  --auth MODE              token: the token, and loopback clients must be this user (default);
                           token-any-user: the token only; none: open loopback      [APP_SERVER_AUTH]
  --insecure-no-auth       allow a non-loopback --listen without a token      [APP_SERVER_INSECURE_NO_AUTH=1]
  --allowed-origin ORIGIN  a browser origin allowed besides the server's own (repeatable)
                                                                             [APP_SERVER_ALLOWED_ORIGINS]
  --max-connections N      open WebSocket connections, default 1000          [APP_SERVER_MAX_CONNECTIONS]
  --max-concurrent-turns N turns running at once, default 256               [APP_SERVER_MAX_CONCURRENT_TURNS]
  --bwrap PATH             bubblewrap binary of the command sandbox, default bwrap on PATH
                                                                             [APP_SERVER_BWRAP]
  --command-env NAME       pass this environment variable (or PREFIX*) to commands, besides
                           PATH, HOME, USER, LANG, LC_*, TERM, TZ, TMPDIR … (repeatable)
                                                                             [APP_SERVER_COMMAND_ENV]
  --command-limits LIST    limits of sandboxed processes, e.g. processes=512,address-space=32G,
                           file-size=1G,cpu=600 (unlimited lifts one); default processes=1024,
                           address-space=64G, file-size=8G, cpu=3600     [APP_SERVER_COMMAND_LIMITS]
  --shared-tmp             threads share the host's /tmp instead of a private one each
                                                                             [APP_SERVER_SHARED_TMP=1]
  --mcp-config FILE        MCP servers offered to the model as mcp__SERVER__TOOL, default
                           <home>/mcp.json when it exists                    [APP_SERVER_MCP_CONFIG]
  --workers N|auto         serve from N processes sharing the port (auto: one per CPU);
                           PostgreSQL and ws:// only                         [APP_SERVER_WORKERS]
  --max-concurrent-turns-per-user N, --max-requests-per-second-per-user N,
  --max-tokens-per-user-per-day N
                           per-user quotas (docs/teams.md)   [APP_SERVER_MAX_CONCURRENT_TURNS_PER_USER,
                           APP_SERVER_MAX_REQUESTS_PER_SECOND_PER_USER, APP_SERVER_MAX_TOKENS_PER_USER_PER_DAY]
  --jwt-issuer ISS --jwt-audience AUD --jwt-jwks-url URL
                           accept single sign-on JWTs (docs/teams.md)
                                      [APP_SERVER_JWT_ISSUER, APP_SERVER_JWT_AUDIENCE, APP_SERVER_JWT_JWKS_URL]
  --user NAME              stdio: act as this user instead of the spawning one [APP_SERVER_USER]
  -h, --help               this help

New threads run in the client's cwd, else in the workspace (never the directory serve was
started from).
Model credentials and endpoints come from the SDKs' variables: ANTHROPIC_API_KEY,
ANTHROPIC_BASE_URL, OPENAI_API_KEY, OPENAI_BASE_URL. Logs are JSON lines on stderr
(APP_SERVER_LOG_LEVEL=debug adds details, such as the stack of a start-up failure).
`;

export const HELP = {
  global: `app-server ${VERSION} — a self-hosted server for driving coding agents (Codex app-server v2 protocol)

Usage:
  app-server serve [options]             run the server (its web playground: http://HOST:PORT/)
  app-server exec PROMPT [options]       run one turn and print it as it streams
  app-server threads [options]           list threads
  app-server acp [--remote URL]          the Agent Client Protocol on stdio, for editors
                                         (Zed, JetBrains, Neovim, Emacs): see docs/acp.md
  app-server users add|list|revoke       the users of a shared server: see docs/teams.md
  app-server audit [--user U] [--since T] who did what, as JSON lines
  app-server generate-json-schema --out DIR
                                         write the protocol's JSON Schema files to DIR
  app-server app-server [options]        what Codex's IDE extension runs as \`codex app-server\`:
                                         stdio by default, Codex's flags (--listen, -c …)
  app-server --help | --version

Run \`app-server COMMAND --help\` for a command's options.
`,
  serve: `Usage: app-server serve [options]

Runs the server: JSON-RPC over WebSocket (with the web playground at http://HOST:PORT/) or stdio.

${SERVE_OPTIONS_HELP}`,
  exec: `Usage: app-server exec PROMPT [options]

Runs one turn and prints it as it streams. PROMPT "-" reads the prompt from stdin. The thread runs
in the current directory (or --cwd). Without --url an embedded server is started in-process (same
--home and database defaults as serve) and stopped afterwards.

Options:
  --url URL                connect to this running server (ws:// or wss://)
  --token T                the server's token, sent as Authorization: Bearer T
                           (default: your token in ~/.config/agent-app-server/token
                           [APP_SERVER_TOKEN_FILE], else for a loopback --url the home's
                           auth-token)                         [APP_SERVER_AUTH_TOKEN]
  --thread ID              continue this thread instead of starting a new one
  --approve MODE           how to answer approval requests: ask (prompt on the terminal:
                           y yes, s yes for the session, n no, c cancel the turn; declines
                           when stdin is not a terminal), always, never. Default ask
  --approval-policy P      when the server asks: untrusted | on-request | on-failure | never
  --sandbox S              read-only | workspace-write | danger-full-access
  --cwd DIR                the thread's working directory, default the current one
  --model M                the thread's model
  --model-provider P       anthropic | openai | openai-chat
  --json                   print each notification as one JSON line on stdout
  --home DIR               the embedded server's data directory              [APP_SERVER_HOME]
  -h, --help               this help

The agent's text goes to stdout; commands, output, file changes and the plan to stderr.
Ctrl-C interrupts the turn (twice: quit at once).
Exit codes: 0 completed, 1 failed (or connection lost), 2 usage error, 130 interrupted.
`,
  threads: `Usage: app-server threads [options]

Lists threads, newest activity first (a fork says which thread it was forked from).

Options:
  --url URL                connect to this running server; without it an embedded server
                           is started on --home
  --token T                the server's token (default for a loopback --url: the home's
                           auth-token)                                       [APP_SERVER_AUTH_TOKEN]
  --home DIR               the embedded server's data directory              [APP_SERVER_HOME]
  --search TERM            only threads whose name or preview contains TERM
  --limit N                at most N threads (1-100, default 25)
  --archived               list archived threads instead
  --json                   one thread object per line
  -h, --help               this help
`,
  "generate-json-schema": `Usage: app-server generate-json-schema --out DIR

Writes the JSON Schema of every implemented method, notification and object to DIR.

Options:
  --out DIR                the directory to write (created if missing)
  -h, --help               this help
`,
};

const wantsHelp = (args: string[]) => args.includes("--help") || args.includes("-h");

export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || command === "--help" || command === "-h") {
    process.stdout.write(HELP.global);
    return 0;
  }
  if (command === "help" && rest[0] === "acp") {
    process.stdout.write((await import("./acp/command.js")).ACP_HELP);
    return 0;
  }
  if (command === "help" && (rest[0] === "users" || rest[0] === "audit")) {
    const team = await import("./identity/cli.js");
    process.stdout.write(rest[0] === "users" ? team.USERS_HELP : team.AUDIT_HELP);
    return 0;
  }
  if (command === "help") {
    // `app-server help serve` = `app-server serve --help`.
    const topic = rest[0] && rest[0] in HELP ? (rest[0] as keyof typeof HELP) : "global";
    process.stdout.write(HELP[topic]);
    return 0;
  }
  if (command === "--version" || command === "-V") {
    process.stdout.write(`${VERSION}\n`);
    return 0;
  }
  if (command === "generate-json-schema") {
    if (wantsHelp(rest)) {
      process.stdout.write(HELP["generate-json-schema"]);
      return 0;
    }
    let values: { out?: string };
    try {
      ({ values } = parseArgs({ args: rest, options: { out: { type: "string" } }, strict: true }));
    } catch (err) {
      // A usage error (unknown flag, missing value): exit 2 with the message, not a stack trace.
      process.stderr.write(`app-server: ${(err as Error).message}\n`);
      return 2;
    }
    if (!values.out) {
      process.stderr.write("generate-json-schema needs --out DIR\n");
      return 2;
    }
    // Each command loads only what it needs (start-up time and memory of `serve` matter).
    const { writeJsonSchemas } = await import("./protocol/json-schema.js");
    const files = await writeJsonSchemas(path.resolve(values.out));
    process.stderr.write(`wrote ${files.length} schema files to ${path.resolve(values.out)}\n`);
    return 0;
  }
  if (command === "serve") return serve(rest);
  if (command === "app-server") {
    // Spawned as Codex's `codex app-server` (IDE extension): Codex's flags, stdio by default.
    const { translateCodexArgs } = await import("./codex-compat-cli.js");
    const t = translateCodexArgs(rest, (line) => process.stderr.write(line + "\n"));
    if ("exit" in t) return t.exit;
    if ("generateSchemaOut" in t) return main(["generate-json-schema", "--out", t.generateSchemaOut]);
    return serve(t.serve);
  }
  if (command === "acp") return (await import("./acp/command.js")).runAcp(rest);
  if (command === "users") return (await import("./identity/cli.js")).runUsers(rest);
  if (command === "audit") return (await import("./identity/cli.js")).runAudit(rest);
  if (command === "exec" || command === "threads") {
    if (wantsHelp(rest)) {
      process.stdout.write(HELP[command]);
      return 0;
    }
    return command === "exec" ? (await import("./client/exec.js")).runExec(rest) : (await import("./client/threads.js")).runThreads(rest);
  }
  process.stderr.write(`app-server: unknown command: ${command}\n\n${HELP.global}`);
  return 2;
}

/** How long a stop during start-up may take before the process exits anyway (a safety net). */
const STARTUP_STOP_DEADLINE_MS = 5_000;

async function serve(args: string[]): Promise<number> {
  if (wantsHelp(args)) {
    process.stdout.write(HELP.serve);
    return 0;
  }
  // Every start-up error is one line on stderr (`app-server: …`), printed once; logs come after.
  let log: Logger;
  let config;
  try {
    log = createLogger();
    const keyFiles = loadApiKeyFiles(process.env);
    config = resolveServeConfig(args, process.env);
    if (keyFiles.length > 0) config.secretFiles = [...(config.secretFiles ?? []), ...keyFiles];
  } catch (err) {
    process.stderr.write(`app-server: ${err instanceof Error ? err.message : String(err)}\n`);
    return 2;
  }
  let worker: typeof import("./workers.js") | undefined;
  if (config.workers !== undefined) {
    // --workers: this process only starts and watches the workers, which run this same command.
    worker = await import("./workers.js");
    if (!worker.isWorkerProcess()) return worker.runPrimary(config.workers, log, (url) => workersBanner(url, config));
    log = log.child({ worker: Number(process.env.APP_SERVER_WORKER) || undefined });
  }
  const { stop, startup, done, running } = serveStopper(log);
  // Before anything is logged: a signal that finds no handler kills the process on the spot, and
  // whoever watches the log may signal as soon as the first line appears. Kept after the first:
  // under `npm start` one Ctrl-C arrives twice (the terminal signals npm and the server, and npm
  // forwards its own), and the second must not cut the graceful stop short.
  process.on("SIGTERM", () => void stop("SIGTERM"));
  process.on("SIGINT", () => void stop("SIGINT"));
  // Libraries' console warnings (the SDKs' model deprecation notices) become log lines, once each.
  routeConsoleWarnings(log);
  const keyWarning = missingApiKeyWarning(config.modelProvider, process.env);
  if (keyWarning) log.warn({ modelProvider: config.modelProvider }, keyWarning);
  // The store reports through the server's log (e.g. a fresh PGlite home without a usable seed).
  const database = { log, ...(config.databaseSchema ? { schema: config.databaseSchema } : {}) };
  let started: RunningServer;
  let store: StoreOpening | undefined;
  try {
    // The store opens while the server's modules load: an embedded database starts in its own
    // thread meanwhile (open-store.ts). startServer owns it, and reports its failures.
    const { openStore } = await import("./open-store.js");
    const processId = randomUUID();
    store = { processId, db: openStore({ ...config, database }, processId, startup.signal) };
    store.db.catch(() => {}); // awaited by startServer; until then a failure is nobody's
    const { startServer } = await import("./server.js");
    started = await startServer({ ...config, log, database, store, onStdioEnd: () => void stop("stdin closed"), signal: startup.signal });
  } catch (err) {
    // A failure before startServer took the store (loading the server's modules): close it here.
    await store?.db.then((db) => db.close(), () => {});
    if (startup.signal.aborted) {
      log.info({}, "stopped");
      return 0;
    }
    log.debug({ err }, "start-up failure details"); // the stack, at debug level only
    process.stderr.write(`app-server: could not start: ${describeStartError(err, config)}\n`);
    return 1;
  }
  if (startup.signal.aborted) {
    // The signal came as the start-up finished: stop like a running server.
    await started.close();
    return 0;
  }
  const server = started;
  running(server);
  // On Node 20, from now on V8's young generation keeps the size start-up gave it (runtime/memory-release.ts says why).
  limitYoungGeneration();
  // Start-up's own garbage (module evaluation, schemas built once) is given back once idle.
  releaseAfterWork(() => false);
  flushCompileCacheSoon();
  if (worker) {
    worker.notifyReady(server.url);
    worker.stopWhenPrimaryGone((reason) => void stop(reason));
  } else {
    const banner = listeningBanner(server.url, { token: server.authToken, tokenFile: generatedTokenFile(config), terminal: process.stdout.isTTY === true });
    if (banner) process.stdout.write(banner);
  }
  log.info({ cwd: server.app.defaultCwd }, `new threads run in ${server.app.defaultCwd} unless the client sends a cwd`);
  return done;
}

/**
 * How `serve` stops, once: a signal during start-up aborts the start-up (`startup`: startServer
 * unwinds and closes what it opened); once `running`, it closes the server and `done` resolves to
 * the exit code.
 */
function serveStopper(log: Logger): { stop(reason: string): Promise<void>; startup: AbortController; done: Promise<number>; running(server: RunningServer): void } {
  let stopping = false;
  let server: RunningServer | undefined;
  const startup = new AbortController();
  let resolveDone!: (code: number) => void;
  const done = new Promise<number>((r) => (resolveDone = r));
  const stop = async (reason: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ reason }, "shutting down");
    if (!server) {
      startup.abort(new Error(`stopped during start-up (${reason})`));
      // Nothing should take this long (a database connection is abandoned at once); if something
      // does, the process still ends.
      setTimeout(() => {
        log.warn({ deadlineMs: STARTUP_STOP_DEADLINE_MS }, "start-up did not stop in time: exiting");
        process.exit(1);
      }, STARTUP_STOP_DEADLINE_MS).unref();
      return;
    }
    try {
      await server.close();
      resolveDone(0);
    } catch (err) {
      log.error({ err }, "shutdown failed");
      resolveDone(1);
    }
  };
  return { stop, startup, done, running: (s) => void (server = s) };
}

/**
 * Writes Node's compile cache (enabled by bin/app-server.js on Node ≥ 22.1) a moment after the
 * server is ready instead of only at exit, so that a server that is killed still leaves it for the
 * next start; not at once, so that the write does not delay the first requests. Node 20 and Node
 * without flushCompileCache (< 22.10): nothing.
 */
function flushCompileCacheSoon(): void {
  const flush = (nodeModule as { flushCompileCache?: () => void }).flushCompileCache;
  if (typeof flush !== "function") return;
  setTimeout(() => {
    try {
      flush();
    } catch {
      // only the cache is lost: the next start compiles again
    }
  }, 2_000).unref();
}

/** Where the server keeps the token it generated, or null when one was configured. */
function generatedTokenFile(config: ServerConfig): string | null {
  return config.authToken ? null : path.join(config.home, AUTH_TOKEN_FILE);
}

/** The primary's line under --workers: the workers made (or read) the token; the primary reads it. */
function workersBanner(url: string, config: ServerConfig): string | null {
  let token = config.authToken ?? null;
  if (token === null && (config.auth ?? "token") !== "none") {
    try {
      token = readFileSync(generatedTokenFile(config)!, "utf8").trim() || null;
    } catch {
      token = null; // not readable here: the line says where it is
    }
  }
  return listeningBanner(url, { token, tokenFile: generatedTokenFile(config), terminal: process.stdout.isTTY === true });
}
