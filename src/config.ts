/** Server configuration from flags with environment fallbacks (DESIGN.md §10). */
import { readFileSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { LimitsError, parseCommandLimits, type CommandLimits } from "./sandbox/limits.js";
import { isLocalBaseURL } from "./providers/auth.js";
import type { TeamSettings } from "./identity/team.js";

export const DEFAULT_LISTEN = "ws://127.0.0.1:4500";
export const DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024;

/**
 * Default model of each provider for new threads (current models of the SDKs' lists; none on
 * the Anthropic SDK's deprecation list). `openai-chat` is mostly used with other servers
 * (Ollama, vLLM …), where --model names their model.
 */
export const DEFAULT_MODELS: Record<string, string> = {
  anthropic: "claude-sonnet-5-5",
  openai: "gpt-5.4",
  "openai-chat": "gpt-5.4-mini",
};

/** The SDK variable holding each provider's API key. */
export const API_KEY_VARIABLES: Record<string, string> = {
  anthropic: "ANTHROPIC_API_KEY",
  openai: "OPENAI_API_KEY",
  "openai-chat": "OPENAI_API_KEY",
};

/**
 * A start-up warning when the configured provider has no API key in the environment (the first
 * turn would fail otherwise), saying how to give it one; null when it has one, or when its base
 * URL is a server on this machine (Ollama, llama.cpp, vLLM), which needs none: the provider sends
 * a placeholder key there (providers/auth.ts).
 */
export function missingApiKeyWarning(modelProvider: string, env: NodeJS.ProcessEnv): string | null {
  const variable = API_KEY_VARIABLES[modelProvider];
  if (!variable || env[variable] || (modelProvider === "anthropic" && env.ANTHROPIC_AUTH_TOKEN)) return null;
  const baseUrl = env[modelProvider === "anthropic" ? "ANTHROPIC_BASE_URL" : "OPENAI_BASE_URL"] || undefined;
  if (isLocalBaseURL(baseUrl)) return null;
  const keyless = baseUrl ? `; a server at ${baseUrl} that needs no key accepts any value, e.g. ${variable}=none` : "";
  return `${variable} is not set: turns with the ${modelProvider} provider will fail until it is (export it, or name a file holding it in ${variable}_FILE, and restart)${keyless}`;
}

/**
 * Where a new thread runs when its client sends no cwd: never the directory the server was
 * started from (with `npm start`, its own checkout: a first prompt could edit the server), and not
 * the user's home either — under workspace-write every file of it would be writable, ~/.bashrc and
 * ~/.ssh included, which a later login runs outside any sandbox. A folder of its own instead,
 * created at start; the user's projects go there or are picked per thread.
 */
export function defaultWorkspace(): string {
  return path.join(os.homedir(), "agent-workspace");
}

export interface ServerConfig {
  listen: string;
  databaseUrl: string | undefined;
  /** Postgres schema for the tables (created if missing); default: the connection's search_path. */
  databaseSchema?: string;
  home: string;
  /** --workspace / APP_SERVER_WORKSPACE: where threads without a cwd run (default defaultWorkspace()). */
  workspace?: string;
  modelProvider: string;
  model: string;
  maxFrameBytes: number;
  /** Clients must send `Authorization: Bearer <token>` when set. */
  authToken?: string | null;
  /**
   * How WebSocket/HTTP clients are admitted (stdio needs nothing): `token` (the default) — the
   * token above, else `<home>/auth-token` (made at first start), and a loopback peer must run as
   * the server's own user; `token-any-user` — the token only; `none` — no generated token and no
   * user check: open loopback unless a token is configured (the Host check stays). APP_SERVER_AUTH.
   */
  auth?: AuthMode;
  /** Allow a non-loopback listen address without a token (explicit opt-out). */
  insecureNoAuth?: boolean;
  /** Origins allowed for browser connections besides the server's own (exact match). */
  allowedOrigins?: string[];
  /** The file the auth token came from (hidden from sandboxed commands). */
  authTokenFile?: string | null;
  /** Other secret files the configuration was read from (hidden from sandboxed commands too). */
  secretFiles?: string[];
  /** The bubblewrap binary for the command sandbox (default: `bwrap` on PATH). */
  bwrapPath?: string;
  /** The MCP server configuration file (default: `<home>/mcp.json` when it exists). */
  mcpConfig?: string;
  /** Environment variable names (or `PREFIX*`) passed to commands besides the defaults. */
  commandEnv?: string[];
  /** Resource limits of sandboxed processes (--command-limits). */
  commandLimits?: CommandLimits;
  /** Threads share the host's /tmp instead of a private one each (--shared-tmp). */
  sharedTmp?: boolean;
  /** The largest patch apply_patch takes (APP_SERVER_MAX_PATCH_BYTES). */
  maxPatchBytes?: number;
  limits?: Partial<ServerLimits>;
  /** `--workers N|auto`: serve from N processes sharing the port (PostgreSQL and WebSocket only). */
  workers?: number;
  /** Users, single sign-on and per-user quotas (docs/teams.md). */
  team?: TeamSettings;
}

export interface ServerLimits {
  /** Open WebSocket connections; more are refused with HTTP 503. */
  maxConnections: number;
  /** Turns running at once across the server; turn/start beyond it gets -32001. */
  maxConcurrentTurns: number;
  /** Bytes of user input per turn/start or turn/steer. */
  maxInputBytes: number;
  /** Per-connection ingress: requests handled at once, and the request rate. */
  maxInFlightRequests: number;
  requestsPerSecond: number;
  requestBurst: number;
  /** Per-connection egress: queue above this, close with 1013 above the hard cap. */
  outboundHighWaterBytes: number;
  outboundMaxBytes: number;
  /** Estimated bytes of history the loaded threads keep in memory; past it idle ones drop theirs (runtime/history-budget.ts). */
  loadedHistoryMaxBytes: number;
  /** How long an audit row or token count waits to commit with a recording transaction before it commits alone (store/side-writes.ts). */
  sideWriteMaxWaitMs: number;
}

export const DEFAULT_LIMITS: ServerLimits = {
  maxConnections: 1000,
  maxConcurrentTurns: 256,
  maxInputBytes: 1024 * 1024,
  maxInFlightRequests: 64,
  requestsPerSecond: 500,
  requestBurst: 1000,
  outboundHighWaterBytes: 1024 * 1024,
  outboundMaxBytes: 32 * 1024 * 1024,
  // 64 MiB of history text: thousands of ordinary idle threads (a few KiB to a few MiB each) stay
  // in memory, a handful of huge ones push each other out, and idle histories stay a bounded
  // share of the heap (V8 grows its heap to a multiple of what is live). A dropped history costs
  // one read of the thread's log when the thread is used again.
  loadedHistoryMaxBytes: 64 * 1024 * 1024,
  // Under load a recording transaction comes along within milliseconds; on a quiet server a
  // write is durable at most this much later than if it committed at once.
  sideWriteMaxWaitMs: 100,
};

export type Listen = { kind: "ws"; host: string; port: number } | { kind: "stdio" };

export const AUTH_MODES = ["token", "token-any-user", "none"] as const;
export type AuthMode = (typeof AUTH_MODES)[number];

export class ConfigError extends Error {}

export function parseListen(url: string): Listen {
  if (url === "stdio://" || url === "stdio") return { kind: "stdio" };
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new ConfigError(`invalid --listen URL: ${url} (expected ws://HOST:PORT or stdio://)`);
  }
  if (u.protocol !== "ws:") throw new ConfigError(`unsupported --listen URL scheme: ${u.protocol} (expected ws:// or stdio://)`);
  const port = u.port === "" ? 80 : Number(u.port);
  const host = u.hostname.replace(/^\[(.*)\]$/, "$1");
  return { kind: "ws", host, port };
}

export function isLoopback(host: string): boolean {
  return host === "localhost" || host === "::1" || /^127\.\d+\.\d+\.\d+$/.test(host);
}

export const SERVE_OPTIONS = {
  listen: { type: "string" },
  "database-url": { type: "string" },
  "database-schema": { type: "string" },
  home: { type: "string" },
  workspace: { type: "string" },
  "model-provider": { type: "string" },
  model: { type: "string" },
  "max-frame-bytes": { type: "string" },
  "auth-token-file": { type: "string" },
  "insecure-no-auth": { type: "boolean" },
  "allowed-origin": { type: "string", multiple: true },
  "max-connections": { type: "string" },
  "max-concurrent-turns": { type: "string" },
  bwrap: { type: "string" },
  "command-env": { type: "string", multiple: true },
  "mcp-config": { type: "string" },
  auth: { type: "string" },
  "command-limits": { type: "string" },
  "shared-tmp": { type: "boolean" },
  workers: { type: "string" },
  "max-concurrent-turns-per-user": { type: "string" },
  "max-requests-per-second-per-user": { type: "string" },
  "max-tokens-per-user-per-day": { type: "string" },
  "jwt-issuer": { type: "string" },
  "jwt-audience": { type: "string" },
  "jwt-jwks-url": { type: "string" },
  user: { type: "string" },
  help: { type: "boolean", short: "h" },
} as const;

/** Upper bound of --workers: far beyond any useful count, low enough that a typo cannot fork-bomb. */
export const MAX_WORKERS = 64;

/** `auto` = the CPUs this process may use (os.availableParallelism). */
export function parseWorkers(raw: string, source = "--workers"): number {
  if (raw === "auto") return Math.min(os.availableParallelism(), MAX_WORKERS);
  const n = Number(raw);
  if (!/^\d+$/.test(raw) || !Number.isSafeInteger(n) || n < 1 || n > MAX_WORKERS)
    throw new ConfigError(`invalid ${source}: ${raw} (expected auto or a number of processes from 1 to ${MAX_WORKERS})`);
  return n;
}

function positiveInt(name: string, raw: string | undefined): number | undefined {
  if (raw === undefined || raw === "") return undefined;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < 1) throw new ConfigError(`invalid ${name}: ${raw} (expected a positive integer)`);
  return n;
}

/** A secret from a file (`NAME_FILE`, Docker/compose secrets), trimmed. */
function readSecret(file: string, source: string): string {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new ConfigError(`cannot read ${source} ${file}: ${(err as NodeJS.ErrnoException).code ?? "error"}`);
  }
  const value = text.trim();
  if (!value) throw new ConfigError(`${source} ${file} is empty`);
  return value;
}

/**
 * The model SDKs read their API keys from the environment: `ANTHROPIC_API_KEY_FILE` /
 * `OPENAI_API_KEY_FILE` (secret files) fill in the variable when it is not set. Returns the
 * files read (to hide them from sandboxed commands).
 */
export function loadApiKeyFiles(env: NodeJS.ProcessEnv): string[] {
  const files: string[] = [];
  for (const name of new Set(Object.values(API_KEY_VARIABLES))) {
    const file = env[`${name}_FILE`];
    if (!file || env[name]) continue;
    env[name] = readSecret(file, `${name}_FILE`);
    files.push(path.resolve(file));
  }
  return files;
}

function readToken(file: string): string {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new ConfigError(`cannot read auth token file ${file}: ${(err as NodeJS.ErrnoException).code ?? "error"}`);
  }
  const token = text.trim();
  if (token.length < 16) throw new ConfigError(`auth token in ${file} is too short (use at least 16 characters)`);
  return token;
}

/** A PostgreSQL URL, checked before any connection attempt; errors name where it came from. */
function checkDatabaseUrl(url: string, source: string): void {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new ConfigError(`invalid ${source}: not a URL (expected postgres://USER:PASSWORD@HOST:PORT/DATABASE; URL-encode special characters in the password)`);
  }
  if (u.protocol !== "postgres:" && u.protocol !== "postgresql:")
    throw new ConfigError(`invalid ${source}: scheme ${u.protocol} (expected postgres:// or postgresql://)`);
  if (!u.hostname && !u.searchParams.get("host")) throw new ConfigError(`invalid ${source}: no host (expected postgres://USER:PASSWORD@HOST:PORT/DATABASE)`);
}

export function resolveServeConfig(argv: string[], env: NodeJS.ProcessEnv): ServerConfig {
  const { values } = parseArgs({ args: argv, options: SERVE_OPTIONS, allowPositionals: false, strict: true });
  // An empty variable (as compose writes for unset optional ones) means "not set".
  env = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ""));
  const modelProvider = values["model-provider"] ?? env.APP_SERVER_MODEL_PROVIDER ?? "openai";
  if (!(modelProvider in DEFAULT_MODELS))
    throw new ConfigError(`unknown model provider: ${modelProvider} (expected ${Object.keys(DEFAULT_MODELS).join(", ")})`);
  const { home, workspace } = homeAndWorkspace(values, env);
  const { databaseUrl, secretFiles } = databaseUrlOf(values, env);
  const maxFrame = values["max-frame-bytes"] ?? env.APP_SERVER_MAX_FRAME_BYTES;
  const maxFrameBytes = maxFrame === undefined ? DEFAULT_MAX_FRAME_BYTES : Number(maxFrame);
  if (!Number.isSafeInteger(maxFrameBytes) || maxFrameBytes < 1024) throw new ConfigError(`invalid max frame size: ${maxFrame}`);
  const config: ServerConfig = {
    listen: values.listen ?? env.APP_SERVER_LISTEN ?? DEFAULT_LISTEN,
    databaseUrl,
    home,
    ...(workspace !== undefined ? { workspace: path.resolve(workspace) } : {}),
    modelProvider,
    model: values.model ?? env.APP_SERVER_MODEL ?? DEFAULT_MODELS[modelProvider]!,
    maxFrameBytes,
    authToken: null,
    insecureNoAuth: values["insecure-no-auth"] ?? env.APP_SERVER_INSECURE_NO_AUTH === "1",
    allowedOrigins: values["allowed-origin"] ?? (env.APP_SERVER_ALLOWED_ORIGINS ? env.APP_SERVER_ALLOWED_ORIGINS.split(",").map((o) => o.trim()).filter(Boolean) : []),
    limits: Object.fromEntries(
      Object.entries({
        maxConnections: positiveInt("max connections", values["max-connections"] ?? env.APP_SERVER_MAX_CONNECTIONS),
        maxConcurrentTurns: positiveInt("max concurrent turns", values["max-concurrent-turns"] ?? env.APP_SERVER_MAX_CONCURRENT_TURNS),
        maxInputBytes: positiveInt("max input bytes", env.APP_SERVER_MAX_INPUT_BYTES),
        maxInFlightRequests: positiveInt("max in-flight requests", env.APP_SERVER_MAX_INFLIGHT_REQUESTS),
        requestsPerSecond: positiveInt("requests per second", env.APP_SERVER_REQUESTS_PER_SECOND),
        outboundMaxBytes: positiveInt("outbound buffer limit", env.APP_SERVER_OUTBOUND_MAX_BYTES),
        loadedHistoryMaxBytes: positiveInt("loaded history budget", env.APP_SERVER_LOADED_HISTORY_MAX_BYTES),
      }).filter(([, v]) => v !== undefined),
    ),
  };
  storageAndCommandSettings(config, values, env);
  if (secretFiles.length > 0) config.secretFiles = secretFiles;
  authAndLimitSettings(config, values, env);
  checkListenAndTeam(config, values, env);
  return config;
}

/** The home (must be a directory if it exists) and the workspace, if one is set (likewise). */
function homeAndWorkspace(values: ServeValues, env: NodeJS.ProcessEnv): { home: string; workspace: string | undefined } {
  const home = path.resolve(values.home ?? env.APP_SERVER_HOME ?? path.join(os.homedir(), ".agent-app-server"));
  const homeSource = values.home !== undefined ? "--home" : env.APP_SERVER_HOME !== undefined ? "APP_SERVER_HOME" : "the home directory";
  let homeStat;
  try {
    homeStat = statSync(home);
  } catch {
    homeStat = undefined; // created at start
  }
  if (homeStat && !homeStat.isDirectory()) throw new ConfigError(`${homeSource} ${home} is not a directory`);
  const workspace = values.workspace ?? env.APP_SERVER_WORKSPACE;
  const workspaceSource = values.workspace !== undefined ? "--workspace" : "APP_SERVER_WORKSPACE";
  let workspaceStat;
  try {
    workspaceStat = workspace === undefined ? undefined : statSync(workspace);
  } catch {
    workspaceStat = undefined; // created at start
  }
  if (workspaceStat && !workspaceStat.isDirectory()) throw new ConfigError(`${workspaceSource} ${workspace} is not a directory`);
  return { home, workspace };
}

/** The database URL (from a flag, a variable or a secret file, with a password file folded in) and the secret files read. */
function databaseUrlOf(values: ServeValues, env: NodeJS.ProcessEnv): { databaseUrl: string | undefined; secretFiles: string[] } {
  const secretFiles: string[] = [];
  let databaseUrl = values["database-url"] ?? (env.DATABASE_URL || undefined);
  if (databaseUrl === undefined && env.DATABASE_URL_FILE) {
    databaseUrl = readSecret(env.DATABASE_URL_FILE, "DATABASE_URL_FILE");
    secretFiles.push(path.resolve(env.DATABASE_URL_FILE));
  }
  const urlSource = values["database-url"] !== undefined ? "--database-url" : env.DATABASE_URL ? "DATABASE_URL" : "DATABASE_URL_FILE";
  if (databaseUrl !== undefined) checkDatabaseUrl(databaseUrl, urlSource);
  if (env.DATABASE_PASSWORD_FILE) {
    // The password goes into the URL here, percent-encoded: any characters work.
    if (databaseUrl === undefined) throw new ConfigError("DATABASE_PASSWORD_FILE needs a database URL (--database-url or DATABASE_URL)");
    const u = new URL(databaseUrl);
    u.password = encodeURIComponent(readSecret(env.DATABASE_PASSWORD_FILE, "DATABASE_PASSWORD_FILE"));
    databaseUrl = u.toString();
    secretFiles.push(path.resolve(env.DATABASE_PASSWORD_FILE));
  }
  return { databaseUrl, secretFiles };
}

/** The database schema, bwrap, MCP config and command environment names. */
function storageAndCommandSettings(config: ServerConfig, values: ServeValues, env: NodeJS.ProcessEnv): void {
  const schema = values["database-schema"] ?? env.APP_SERVER_DATABASE_SCHEMA;
  if (schema !== undefined) {
    const source = values["database-schema"] !== undefined ? "--database-schema" : "APP_SERVER_DATABASE_SCHEMA";
    if (!/^[A-Za-z_][A-Za-z0-9_]{0,62}$/.test(schema)) throw new ConfigError(`invalid ${source}: ${schema} (expected letters, digits and _, not starting with a digit)`);
    if (!config.databaseUrl) throw new ConfigError(`${source} needs a PostgreSQL database (--database-url or DATABASE_URL)`);
    config.databaseSchema = schema;
  }
  const bwrap = values.bwrap ?? env.APP_SERVER_BWRAP;
  if (bwrap) config.bwrapPath = bwrap;
  const mcpConfig = values["mcp-config"] ?? env.APP_SERVER_MCP_CONFIG;
  if (mcpConfig) config.mcpConfig = path.resolve(mcpConfig);
  const commandEnv = values["command-env"] ?? (env.APP_SERVER_COMMAND_ENV ? env.APP_SERVER_COMMAND_ENV.split(",") : []);
  config.commandEnv = commandEnv.map((n) => n.trim()).filter(Boolean);
  for (const name of config.commandEnv) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*\*?$/.test(name)) throw new ConfigError(`invalid command environment name: ${name} (expected NAME or PREFIX*)`);
  }
}

/** The auth mode, command limits, shared /tmp, patch size, auth token and allowed origins. */
function authAndLimitSettings(config: ServerConfig, values: ServeValues, env: NodeJS.ProcessEnv): void {
  const auth = values.auth ?? env.APP_SERVER_AUTH;
  if (auth !== undefined) {
    if (!(AUTH_MODES as readonly string[]).includes(auth))
      throw new ConfigError(`invalid ${values.auth !== undefined ? "--auth" : "APP_SERVER_AUTH"}: ${auth} (expected ${AUTH_MODES.join(", ")})`);
    config.auth = auth as AuthMode;
  }
  const limits = values["command-limits"] ?? env.APP_SERVER_COMMAND_LIMITS;
  if (limits !== undefined) {
    try {
      config.commandLimits = parseCommandLimits(limits);
    } catch (err) {
      if (err instanceof LimitsError) throw new ConfigError(`${values["command-limits"] !== undefined ? "--command-limits" : "APP_SERVER_COMMAND_LIMITS"}: ${err.message}`);
      throw err;
    }
  }
  if (values["shared-tmp"] || env.APP_SERVER_SHARED_TMP === "1") config.sharedTmp = true;
  const maxPatch = positiveInt("APP_SERVER_MAX_PATCH_BYTES", env.APP_SERVER_MAX_PATCH_BYTES);
  if (maxPatch !== undefined) config.maxPatchBytes = maxPatch;
  const tokenFile = values["auth-token-file"] ?? env.APP_SERVER_AUTH_TOKEN_FILE;
  if (tokenFile) {
    config.authToken = readToken(tokenFile);
    config.authTokenFile = path.resolve(tokenFile);
  }
  else if (env.APP_SERVER_AUTH_TOKEN) {
    if (env.APP_SERVER_AUTH_TOKEN.trim().length < 16) throw new ConfigError("APP_SERVER_AUTH_TOKEN is too short (use at least 16 characters)");
    config.authToken = env.APP_SERVER_AUTH_TOKEN.trim();
  }
  for (const origin of config.allowedOrigins!) {
    if (!/^https?:\/\/[^/]+$/.test(origin)) throw new ConfigError(`invalid allowed origin: ${origin} (expected scheme://host[:port])`);
  }
}

/** The listen address (with workers, and no non-loopback listening without auth) and the team settings. */
function checkListenAndTeam(config: ServerConfig, values: ServeValues, env: NodeJS.ProcessEnv): void {
  let listen: Listen;
  try {
    listen = parseListen(config.listen);
  } catch (err) {
    if (values.listen === undefined && err instanceof ConfigError) throw new ConfigError(err.message.replace("--listen", "APP_SERVER_LISTEN"));
    throw err;
  }
  const workers = values.workers ?? env.APP_SERVER_WORKERS;
  if (workers !== undefined) {
    const source = values.workers !== undefined ? "--workers" : "APP_SERVER_WORKERS";
    config.workers = parseWorkers(workers, source);
    if (listen.kind === "stdio") throw new ConfigError(`${source} needs a WebSocket --listen: stdio is one client on one process`);
    if (!config.databaseUrl)
      throw new ConfigError(`${source} needs PostgreSQL (--database-url or DATABASE_URL): the embedded PGlite database belongs to one process`);
  }
  if (listen.kind === "ws" && !isLoopback(listen.host) && config.auth === "none" && !config.authToken && !config.insecureNoAuth)
    throw new ConfigError(
      `refusing to listen on non-loopback address ${listen.host} without authentication (APP_SERVER_AUTH=none): use a token (the default) or --insecure-no-auth`,
    );
  if (config.insecureNoAuth && !isLoopback(listen.kind === "ws" ? listen.host : "localhost") && !config.authToken) config.auth = "none";
  const team = teamSettings(values, env);
  if (Object.keys(team.quotas ?? {}).length || team.stdioUser || team.jwt || team.usersRefreshMs) config.team = team;
  if (team.stdioUser && listen.kind !== "stdio") throw new ConfigError(`${values.user !== undefined ? "--user" : "APP_SERVER_USER"} is for stdio (over WebSocket the client's token says who it is)`);
}

type ServeValues = ReturnType<typeof parseArgs<{ options: typeof SERVE_OPTIONS }>>["values"];

/** Per-user quotas, single sign-on and the stdio user (docs/teams.md). */
function teamSettings(values: ServeValues, env: NodeJS.ProcessEnv): TeamSettings {
  const quotas = Object.fromEntries(
    Object.entries({
      maxConcurrentTurns: positiveInt("max concurrent turns per user", values["max-concurrent-turns-per-user"] ?? env.APP_SERVER_MAX_CONCURRENT_TURNS_PER_USER),
      requestsPerSecond: positiveInt("max requests per second per user", values["max-requests-per-second-per-user"] ?? env.APP_SERVER_MAX_REQUESTS_PER_SECOND_PER_USER),
      tokensPerDay: positiveInt("max tokens per user per day", values["max-tokens-per-user-per-day"] ?? env.APP_SERVER_MAX_TOKENS_PER_USER_PER_DAY),
    }).filter(([, v]) => v !== undefined),
  );
  const settings: TeamSettings = { quotas, stdioUser: values.user ?? env.APP_SERVER_USER ?? null };
  const refresh = positiveInt("APP_SERVER_USERS_REFRESH_MS", env.APP_SERVER_USERS_REFRESH_MS);
  if (refresh !== undefined) settings.usersRefreshMs = refresh;
  const issuer = values["jwt-issuer"] ?? env.APP_SERVER_JWT_ISSUER;
  const audience = values["jwt-audience"] ?? env.APP_SERVER_JWT_AUDIENCE;
  const jwksUrl = values["jwt-jwks-url"] ?? env.APP_SERVER_JWT_JWKS_URL;
  const given = [issuer, audience, jwksUrl].filter((v) => v !== undefined).length;
  if (given > 0 && given < 3) throw new ConfigError("single sign-on needs all of --jwt-issuer, --jwt-audience and --jwt-jwks-url (APP_SERVER_JWT_ISSUER, _AUDIENCE, _JWKS_URL)");
  if (given === 3) {
    let url: URL;
    try {
      url = new URL(jwksUrl!);
    } catch {
      throw new ConfigError(`invalid JWKS URL: ${jwksUrl}`);
    }
    if (url.protocol !== "https:" && !(url.protocol === "http:" && isLoopback(url.hostname.replace(/^\[(.*)\]$/, "$1"))))
      throw new ConfigError(`the JWKS URL must be https:// (http:// only on loopback): ${jwksUrl}`);
    const roots = env.APP_SERVER_JWT_ROOTS?.split(",").map((r) => r.trim()).filter(Boolean) ?? null;
    for (const r of roots ?? []) if (!path.isAbsolute(r)) throw new ConfigError(`APP_SERVER_JWT_ROOTS: roots must be absolute paths: ${r}`);
    settings.jwt = { issuer: issuer!, audience: audience!, jwksUrl: jwksUrl!, userClaim: env.APP_SERVER_JWT_USER_CLAIM || "sub", rootsTemplate: roots && roots.length ? roots : null };
  }
  return settings;
}
