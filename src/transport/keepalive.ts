/**
 * WebSocket liveness: the server pings every client at an interval and closes one that has
 * missed several pongs in a row (a vanished peer — laptop lid closed, NAT entry dropped — would
 * otherwise hold its connection, subscriptions and buffers forever); and it closes a connection
 * that has not completed `initialize` within a deadline (a socket that never speaks is not a
 * client). Any frame from the client counts as a sign of life too.
 */
import type { WebSocket } from "ws";

export interface KeepaliveOptions {
  /** Ping interval; 0 disables pings. */
  pingIntervalMs: number;
  /** Consecutive unanswered pings before the connection is closed. */
  maxMissedPongs: number;
  /** Time a connection has to complete `initialize`; 0 disables the deadline. */
  initializeTimeoutMs: number;
}

export const DEFAULT_KEEPALIVE: KeepaliveOptions = { pingIntervalMs: 30_000, maxMissedPongs: 2, initializeTimeoutMs: 30_000 };

/** Closed for not answering pings: 1001 "going away" is what the peer has, in effect, done. */
export const PING_TIMEOUT_CLOSE_CODE = 1001;
/** Closed for not initializing: 4408 (application range; 408 as HTTP's Request Timeout, as graphql-ws uses it). */
export const INITIALIZE_TIMEOUT_CLOSE_CODE = 4408;

/** After sending a close frame to a peer that may be gone, how long to wait for its answer before dropping the TCP connection. */
const CLOSE_GRACE_MS = 1000;

/** Reads a non-negative integer of milliseconds from the environment (absent or invalid: the default). */
export function keepaliveFromEnv(env: NodeJS.ProcessEnv): KeepaliveOptions {
  const ms = (name: string, fallback: number) => {
    const raw = env[name];
    if (raw === undefined || raw === "") return fallback;
    const n = Number(raw);
    if (!Number.isSafeInteger(n) || n < 0) throw new Error(`${name} must be a whole number of milliseconds (0 disables), got ${JSON.stringify(raw)}`);
    return n;
  };
  return {
    pingIntervalMs: ms("APP_SERVER_PING_INTERVAL_MS", DEFAULT_KEEPALIVE.pingIntervalMs),
    maxMissedPongs: DEFAULT_KEEPALIVE.maxMissedPongs,
    initializeTimeoutMs: ms("APP_SERVER_INITIALIZE_TIMEOUT_MS", DEFAULT_KEEPALIVE.initializeTimeoutMs),
  };
}

export interface KeepaliveHooks {
  /** Whether the connection has completed `initialize`. */
  initialized(): boolean;
  /** Logged once when the connection is closed for one of these reasons. */
  onTimeout(reason: "ping" | "initialize"): void;
}

/** Watches one socket until it closes. */
export function watchSocket(socket: WebSocket, opts: KeepaliveOptions, hooks: KeepaliveHooks): void {
  let missed = 0;
  const alive = () => {
    missed = 0;
  };
  socket.on("pong", alive);
  socket.on("message", alive);

  const closeFor = (reason: "ping" | "initialize", code: number, text: string) => {
    stop();
    hooks.onTimeout(reason);
    socket.close(code, text);
    // A peer that stopped answering pings will not answer the close frame either.
    setTimeout(() => socket.terminate(), CLOSE_GRACE_MS).unref();
  };

  const pinger =
    opts.pingIntervalMs > 0
      ? setInterval(() => {
          if (missed >= opts.maxMissedPongs) {
            closeFor("ping", PING_TIMEOUT_CLOSE_CODE, `no pong for ${missed} pings (every ${opts.pingIntervalMs} ms)`);
            return;
          }
          missed++;
          if (socket.readyState === socket.OPEN) socket.ping();
        }, opts.pingIntervalMs)
      : null;
  pinger?.unref();

  const deadline =
    opts.initializeTimeoutMs > 0
      ? setTimeout(() => {
          if (!hooks.initialized()) closeFor("initialize", INITIALIZE_TIMEOUT_CLOSE_CODE, `initialize not received within ${opts.initializeTimeoutMs} ms`);
        }, opts.initializeTimeoutMs)
      : null;
  deadline?.unref();

  function stop() {
    if (pinger) clearInterval(pinger);
    if (deadline) clearTimeout(deadline);
  }
  socket.once("close", stop);
}
