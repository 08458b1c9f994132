/**
 * A client connection for the CLI commands: to the server at `--url`, or, without one, to an
 * embedded server started in this process (ws://127.0.0.1:0, same home and database defaults as
 * `app-server serve`) and stopped again by close().
 */
import { ConfigError, missingApiKeyWarning, resolveServeConfig } from "../config.js";
import { createLogger, routeConsoleWarnings } from "../log.js";
import { describeStartError } from "../start-error.js";
import { startServer, type RunningServer } from "../server.js";
import { DirectoryLockedError } from "../store/dir-lock.js";
import { clientToken } from "./home-token.js";
import { RpcClient } from "./rpc-client.js";

export interface SessionOptions {
  url?: string;
  home?: string;
  token?: string;
  /** Embedded server only: its default provider and model. */
  modelProvider?: string;
  model?: string;
  env: NodeJS.ProcessEnv;
  /** Embedded server only: where to say that the provider has no API key (exec; not threads). */
  warn?: (message: string) => void;
}

export interface ClientSession {
  client: RpcClient;
  /** The server's URL (the embedded one's when no --url was given). */
  url: string;
  embedded: boolean;
  close(): Promise<void>;
}

/** A usage problem (bad flag value): the command exits 2. */
export class UsageError extends Error {}

export async function openSession(opts: SessionOptions, clientName: string): Promise<ClientSession> {
  let server: RunningServer | null = null;
  let url = opts.url;
  let token = opts.token;
  if (!url) {
    const args = ["--listen", "ws://127.0.0.1:0"];
    if (opts.home) args.push("--home", opts.home);
    if (opts.modelProvider) args.push("--model-provider", opts.modelProvider);
    if (opts.model) args.push("--model", opts.model);
    let config;
    try {
      config = resolveServeConfig(args, opts.env);
    } catch (err) {
      if (err instanceof ConfigError || err instanceof TypeError) throw new UsageError(err.message);
      throw err;
    }
    // Server logs would interleave with the turn's output: errors only, unless asked for.
    const log = createLogger(opts.env.APP_SERVER_LOG_LEVEL ?? "error");
    // The SDKs' console warnings (model deprecation) go to that log too, once each.
    routeConsoleWarnings(log);
    const keyWarning = missingApiKeyWarning(config.modelProvider, opts.env);
    if (keyWarning) opts.warn?.(keyWarning);
    try {
      server = await startServer({ ...config, log, ...(config.databaseSchema ? { database: { schema: config.databaseSchema } } : {}) });
    } catch (err) {
      if (err instanceof DirectoryLockedError)
        throw new Error(`${err.message}\n  (is \`app-server serve\` running on this home? connect to it with --url ws://127.0.0.1:4500)`);
      throw new Error(`could not start the embedded server: ${describeStartError(err, config)}`);
    }
    url = server.url;
    // The embedded server requires a token too (another local user could reach its port): send it.
    token ??= server.authToken ?? undefined;
  } else {
    token ??= await clientToken(url, opts);
  }
  let client: RpcClient;
  try {
    client = await RpcClient.connect(url, { token });
    await client.initialize(clientName, `app-server ${clientName.replace(/^app-server-/, "")}`);
  } catch (err) {
    await server?.close();
    throw err;
  }
  return {
    client,
    url,
    embedded: server !== null,
    close: async () => {
      await client.close();
      await server?.close();
    },
  };
}
