/**
 * `app-server acp [--remote ws://HOST:PORT]`: the Agent Client Protocol on stdin/stdout, for the
 * editors that host agents (Zed, JetBrains, Neovim, Emacs) and headless clients (acpx). The engine
 * runs in this process (serve's options and defaults), or is a running server (`--remote`).
 * stdout carries only ACP messages; logs go to stderr (warnings and errors unless
 * APP_SERVER_LOG_LEVEL says otherwise).
 */
import { Readable, Writable } from "node:stream";
import { parseArgs } from "node:util";
import { ndJsonStream } from "@agentclientprotocol/sdk/unstable";
import { clientToken } from "../client/home-token.js";
import { ConfigError, loadApiKeyFiles, resolveServeConfig } from "../config.js";
import { createLogger, routeConsoleWarnings, type Logger } from "../log.js";
import { acpAgent } from "./agent.js";
import { AcpBridge } from "./bridge.js";
import { connectRemoteEngine, startEmbeddedEngine, type Engine } from "./engine.js";
import { DEFAULT_MODE, isModeId, MODE_IDS, type ModeId } from "./modes.js";

export const ACP_HELP = `Usage: app-server acp [options]

Speaks the Agent Client Protocol (ACP) on stdin/stdout, for editors that run agents: Zed,
JetBrains IDEs, Neovim (CodeCompanion, avante.nvim), Emacs (agent-shell), acpx. A session is a
thread of this server: listed by thread/list, and continued from the playground, the Codex TUI
or another editor. Without --remote the engine runs in this process, with serve's defaults
(home ~/.agent-app-server, embedded PGlite unless DATABASE_URL); with --remote it connects to a
running server, whose threads, database and model settings it uses.

Options (environment fallback in brackets):
  --remote URL             a running server, ws://HOST:PORT or wss://…, instead of the embedded engine
  --token T                the server's token, sent as Authorization: Bearer  [APP_SERVER_AUTH_TOKEN]
                           (default for a loopback --remote: $APP_SERVER_HOME/auth-token)
  --mode MODE              mode of new sessions: ${MODE_IDS.join(" | ")} (default ${DEFAULT_MODE})
 the embedded engine (as for serve):
  --home DIR               data directory, default ~/.agent-app-server       [APP_SERVER_HOME]
  --database-url URL       PostgreSQL instead of the embedded PGlite          [DATABASE_URL]
  --database-schema NAME   keep the tables in this Postgres schema            [APP_SERVER_DATABASE_SCHEMA]
  --model-provider P       anthropic | openai | openai-chat                   [APP_SERVER_MODEL_PROVIDER]
  --model M                default model of new sessions                      [APP_SERVER_MODEL]
  --mcp-config FILE        MCP servers for every session (the editor adds its own) [APP_SERVER_MCP_CONFIG]
  --bwrap PATH             bubblewrap binary of the command sandbox          [APP_SERVER_BWRAP]
  --command-env NAME       pass this variable (or PREFIX*) to commands (repeatable) [APP_SERVER_COMMAND_ENV]
  -h, --help               this help

Model credentials come from the SDKs' variables (ANTHROPIC_API_KEY, OPENAI_API_KEY, …_BASE_URL),
set in the editor's agent settings. Modes: read-only (asks before edits), ask (asks before every
command and edit), auto (asks only for what the sandbox does not allow), full-access (no sandbox).
See docs/acp.md for each editor's configuration.
`;

const OPTIONS = {
  remote: { type: "string" },
  token: { type: "string" },
  mode: { type: "string" },
  home: { type: "string" },
  "database-url": { type: "string" },
  "database-schema": { type: "string" },
  "model-provider": { type: "string" },
  model: { type: "string" },
  "mcp-config": { type: "string" },
  bwrap: { type: "string" },
  "command-env": { type: "string", multiple: true },
  help: { type: "boolean", short: "h" },
} as const;

const ENGINE_OPTIONS = ["home", "database-url", "database-schema", "model-provider", "model", "mcp-config", "bwrap", "command-env"] as const;

export class AcpUsageError extends Error {}

export interface AcpCommand {
  remote?: string;
  token?: string;
  mode: ModeId;
  /** serve's argv for the embedded engine. */
  engineArgs: string[];
}

export function parseAcpArgs(args: string[], env: NodeJS.ProcessEnv): AcpCommand {
  let values;
  try {
    ({ values } = parseArgs({ args, options: OPTIONS, allowPositionals: false, strict: true }));
  } catch (err) {
    throw new AcpUsageError((err as Error).message);
  }
  const mode = values.mode ?? DEFAULT_MODE;
  if (!isModeId(mode)) throw new AcpUsageError(`--mode must be one of ${MODE_IDS.join(", ")} (got ${mode})`);
  if (values.remote !== undefined && !/^wss?:\/\//.test(values.remote)) throw new AcpUsageError(`--remote must be a ws:// or wss:// URL (got ${values.remote})`);
  const engineArgs: string[] = [];
  for (const name of ENGINE_OPTIONS) {
    const v = values[name];
    if (v === undefined) continue;
    if (values.remote !== undefined) throw new AcpUsageError(`--${name} is for the embedded engine; it cannot be combined with --remote`);
    for (const one of Array.isArray(v) ? v : [v]) engineArgs.push(`--${name}`, one);
  }
  return { remote: values.remote, token: values.token ?? (env.APP_SERVER_AUTH_TOKEN || undefined), mode, engineArgs };
}

async function homeTokenUnless(cmd: AcpCommand, env: NodeJS.ProcessEnv): Promise<string | undefined> {
  return cmd.token ?? (await clientToken(cmd.remote!, { env }));
}

/** The embedded engine's configuration: serve's, minus what only a listening server uses. */
function embeddedConfig(engineArgs: string[], env: NodeJS.ProcessEnv) {
  const serveEnv = { ...env };
  for (const k of ["APP_SERVER_LISTEN", "APP_SERVER_WORKERS", "APP_SERVER_AUTH_TOKEN", "APP_SERVER_AUTH_TOKEN_FILE"]) delete serveEnv[k];
  return resolveServeConfig(["--listen", "stdio://", ...engineArgs], serveEnv);
}

function startEngine(cmd: AcpCommand, env: NodeJS.ProcessEnv, log: Logger): Promise<Engine> {
  // A loopback server's generated token (<home>/auth-token) is read as `app-server exec` reads it.
  if (cmd.remote) return homeTokenUnless(cmd, env).then((token) => connectRemoteEngine(cmd.remote!, token));
  const config = embeddedConfig(cmd.engineArgs, env);
  // As serve does: keys from *_API_KEY_FILE, and those files hidden from sandboxed commands.
  const keyFiles = loadApiKeyFiles(env);
  if (keyFiles.length > 0) config.secretFiles = [...(config.secretFiles ?? []), ...keyFiles];
  return startEmbeddedEngine(config, env, log);
}

/** Anything a library prints with console.log would corrupt the ACP stream: it goes to stderr. */
function keepStdoutForAcp(): void {
  const toStderr = (...args: unknown[]) => process.stderr.write(`${args.map((a) => (typeof a === "string" ? a : JSON.stringify(a))).join(" ")}\n`);
  console.log = toStderr;
  console.info = toStderr;
  console.debug = toStderr;
}

export async function runAcp(args: string[]): Promise<number> {
  if (args.includes("--help") || args.includes("-h")) {
    process.stdout.write(ACP_HELP);
    return 0;
  }
  let cmd: AcpCommand;
  try {
    cmd = parseAcpArgs(args, process.env);
    if (!cmd.remote) embeddedConfig(cmd.engineArgs, process.env); // a bad option or variable is a usage error now
  } catch (err) {
    if (err instanceof AcpUsageError || err instanceof ConfigError || err instanceof TypeError) {
      process.stderr.write(`app-server acp: ${(err as Error).message}\n`);
      return 2;
    }
    throw err;
  }
  keepStdoutForAcp();
  const log = createLogger(process.env.APP_SERVER_LOG_LEVEL || "warn");
  routeConsoleWarnings(log);
  const engine = (async () => startEngine(cmd, process.env, log))();
  // The failure is also every request's answer (the editor shows it); stderr says it at once.
  engine.catch((err: Error) => process.stderr.write(`app-server acp: ${err.message}\n`));
  const bridge = new AcpBridge({ engine, log, defaultMode: cmd.mode });
  const connection = acpAgent(bridge).connect(ndJsonStream(Writable.toWeb(process.stdout) as WritableStream<Uint8Array>, Readable.toWeb(process.stdin) as ReadableStream<Uint8Array>));
  const stop = () => connection.close();
  process.once("SIGTERM", stop);
  process.once("SIGINT", stop);
  await connection.closed;
  await bridge.shutdown();
  return 0;
}
