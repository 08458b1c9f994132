/**
 * Where the ACP bridge's Codex protocol goes: an engine started in this process (embedded: the
 * server's runtime with `serve`'s configuration, spoken to over an in-process pipe with the same
 * JSON lines as `serve --listen stdio://`), or a running server over a WebSocket (`--remote`).
 * Either way the bridge is a Codex v2 client like any other: it depends on the protocol, not on
 * the runtime's internals.
 */
import { PassThrough } from "node:stream";
import type { AuthMethod } from "@agentclientprotocol/sdk/unstable";
import { RpcClient, type MessageChannel } from "../client/rpc-client.js";
import { API_KEY_VARIABLES, missingApiKeyWarning, type ServerConfig } from "../config.js";
import type { Logger } from "../log.js";
import type { RunningServer } from "../server.js";

const CLIENT_NAME = "app-server-acp";

export interface Engine {
  readonly codex: RpcClient;
  readonly kind: "embedded" | "remote";
  /** ACP auth methods to offer: only while the embedded engine's provider has no API key. */
  authMethods(): AuthMethod[];
  /** Whether turns cannot run until the user provides a key (authenticate checks again). */
  needsAuth(): boolean;
  /** `authenticate`: checks again; throws while the key is still missing (it comes from the agent's environment). */
  authenticate(methodId: string): void;
  close(): Promise<void>;
}

/** JSON lines over a pair of in-process streams (the server's stdio transport on the other end). */
function pipeChannel(toServer: PassThrough, fromServer: PassThrough): MessageChannel {
  const closeListeners: Array<(code: number, reason: string) => void> = [];
  let buffered = "";
  let closed = false;
  const close = () => {
    if (closed) return;
    closed = true;
    toServer.end();
    for (const l of closeListeners) l(1000, "closed");
  };
  return {
    send: (text) => {
      if (!closed) toServer.write(`${text}\n`);
    },
    close,
    onMessage: (listener) =>
      fromServer.on("data", (chunk: Buffer) => {
        buffered += chunk.toString("utf8");
        let nl: number;
        while ((nl = buffered.indexOf("\n")) >= 0) {
          const line = buffered.slice(0, nl);
          buffered = buffered.slice(nl + 1);
          if (line.trim()) listener(line);
        }
      }),
    onClose: (listener) => closeListeners.push(listener),
  };
}

const noAuth = { authMethods: () => [], needsAuth: () => false, authenticate: () => {} };

/** The embedded engine: `config` as `serve` resolves it (its listen address is ignored). */
export async function startEmbeddedEngine(config: ServerConfig, env: NodeJS.ProcessEnv, log: Logger): Promise<Engine> {
  const toServer = new PassThrough();
  const fromServer = new PassThrough();
  // Loaded here, not at the top: --remote needs none of the server (start-up time of the bridge).
  const [{ startServer }, { describeStartError }, { DirectoryLockedError }] = await Promise.all([import("../server.js"), import("../start-error.js"), import("../store/dir-lock.js")]);
  let server: RunningServer;
  try {
    server = await startServer({
      ...config,
      listen: "stdio://",
      log,
      database: { log, ...(config.databaseSchema ? { schema: config.databaseSchema } : {}) },
      stdio: { input: toServer, output: fromServer },
    });
  } catch (err) {
    if (err instanceof DirectoryLockedError)
      throw new Error(`${err.message} (is \`app-server serve\` running on this home? Connect to it instead: app-server acp --remote ws://127.0.0.1:4500)`);
    throw new Error(`could not start the embedded engine: ${describeStartError(err, config)}`);
  }
  const codex = RpcClient.over(pipeChannel(toServer, fromServer));
  try {
    await codex.initialize(CLIENT_NAME, "app-server acp");
  } catch (err) {
    await server.close();
    throw err;
  }
  const variable = API_KEY_VARIABLES[config.modelProvider];
  const missing = () => missingApiKeyWarning(config.modelProvider, env) !== null;
  return {
    codex,
    kind: "embedded",
    needsAuth: missing,
    authMethods: () =>
      missing() && variable
        ? [
            {
              id: `${variable}`,
              name: `Set ${variable}`,
              description: `The ${config.modelProvider} provider needs an API key: set ${variable} (or ${variable}_FILE, a file holding it) in this agent's environment — the editor's settings for this agent — and restart the agent.`,
            },
          ]
        : [],
    // Some clients authenticate with a method of their own before every session (CodeCompanion's
    // adapters do): with the key present there is nothing to authenticate, whatever the method.
    authenticate: () => {
      if (missing()) throw new Error(`${variable} is not set in this agent's environment: set it in the editor's settings for this agent and restart the agent`);
    },
    close: async () => {
      await codex.close();
      await server.close();
    },
  };
}

/** A running server at `url` (ws:// or wss://), with its token as other clients send it. */
export async function connectRemoteEngine(url: string, token: string | undefined): Promise<Engine> {
  const codex = await RpcClient.connect(url, { token });
  try {
    await codex.initialize(CLIENT_NAME, "app-server acp");
  } catch (err) {
    await codex.close();
    throw err;
  }
  return { codex, kind: "remote", ...noAuth, close: () => codex.close() };
}
