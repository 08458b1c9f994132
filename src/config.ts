/** Server configuration from flags with environment fallbacks (DESIGN.md §10). */
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";

export const DEFAULT_LISTEN = "ws://127.0.0.1:4500";
export const DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024;

export const DEFAULT_MODELS: Record<string, string> = {
  anthropic: "claude-sonnet-4-5",
  openai: "gpt-5",
  "openai-chat": "gpt-4o-mini",
};

export interface ServerConfig {
  listen: string;
  databaseUrl: string | undefined;
  home: string;
  modelProvider: string;
  model: string;
  maxFrameBytes: number;
}

export type Listen = { kind: "ws"; host: string; port: number } | { kind: "stdio" };

export class ConfigError extends Error {}

export function parseListen(url: string): Listen {
  if (url === "stdio://" || url === "stdio") return { kind: "stdio" };
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new ConfigError(`invalid listen URL: ${url} (expected ws://HOST:PORT or stdio://)`);
  }
  if (u.protocol !== "ws:") throw new ConfigError(`unsupported listen URL scheme: ${u.protocol} (expected ws:// or stdio://)`);
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
  home: { type: "string" },
  "model-provider": { type: "string" },
  model: { type: "string" },
  "max-frame-bytes": { type: "string" },
  help: { type: "boolean", short: "h" },
} as const;

export function resolveServeConfig(argv: string[], env: NodeJS.ProcessEnv): ServerConfig {
  const { values } = parseArgs({ args: argv, options: SERVE_OPTIONS, allowPositionals: false, strict: true });
  const modelProvider = values["model-provider"] ?? env.APP_SERVER_MODEL_PROVIDER ?? "openai";
  if (!(modelProvider in DEFAULT_MODELS))
    throw new ConfigError(`unknown model provider: ${modelProvider} (expected ${Object.keys(DEFAULT_MODELS).join(", ")})`);
  const home = path.resolve(values.home ?? env.APP_SERVER_HOME ?? path.join(os.homedir(), ".agent-app-server"));
  const maxFrame = values["max-frame-bytes"] ?? env.APP_SERVER_MAX_FRAME_BYTES;
  const maxFrameBytes = maxFrame === undefined ? DEFAULT_MAX_FRAME_BYTES : Number(maxFrame);
  if (!Number.isSafeInteger(maxFrameBytes) || maxFrameBytes < 1024) throw new ConfigError(`invalid max frame size: ${maxFrame}`);
  const config: ServerConfig = {
    listen: values.listen ?? env.APP_SERVER_LISTEN ?? DEFAULT_LISTEN,
    databaseUrl: values["database-url"] ?? (env.DATABASE_URL || undefined),
    home,
    modelProvider,
    model: values.model ?? env.APP_SERVER_MODEL ?? DEFAULT_MODELS[modelProvider]!,
    maxFrameBytes,
  };
  const listen = parseListen(config.listen);
  // Auth arrives with the hardening work; until then only loopback is allowed.
  if (listen.kind === "ws" && !isLoopback(listen.host))
    throw new ConfigError(`refusing to listen on non-loopback address ${listen.host}: authentication is not configured`);
  return config;
}
