/**
 * WebSocket transport on fastify: exactly one JSON-RPC message per text frame, plus
 * GET /healthz (process alive) and GET /readyz (store ready, accepting) on the same port.
 * Frames over the size limit close the connection with 1009 (ws enforces maxPayload).
 * A plain GET / (no upgrade) serves the web playground from public/ (same origin as the socket).
 */
import { createHash, timingSafeEqual } from "node:crypto";
import websocket from "@fastify/websocket";
import Fastify, { type FastifyInstance, type FastifyReply } from "fastify";
import type { Socket } from "node:net";
import type { WebSocket } from "ws";
import type { Logger } from "../log.js";
import { loadPlayground, PLAYGROUND_CSP } from "../playground.js";
import { DEFAULT_KEEPALIVE, watchSocket, type KeepaliveOptions } from "./keepalive.js";
import type { SendText } from "../rpc/peer.js";
import { PreparedNotification } from "../rpc/prepared-notification.js";
import { deltaHint, OutboundQueue } from "./outbound.js";
import type { Admitted } from "../identity/admission.js";
import type { Principal } from "../identity/principal.js";

export interface WebSocketTransportOptions {
  host: string;
  port: number;
  maxFrameBytes: number;
  log: Logger;
  /** Whether the server accepts connections (the store is ready). */
  isReady(): boolean;
  /** A new client, acting for `who.principal`: returns the callbacks for its frames and its close. */
  accept(
    send: SendText,
    closeSocket: (code: number, reason: string) => void,
    who: { principal: Principal; remote: string | null },
  ): { receive(text: string): void; closed(): void; initialized?(): boolean };
  /** Pings, pong deadline and initialize deadline (default DEFAULT_KEEPALIVE). */
  keepalive?: KeepaliveOptions;
  /**
   * Who a client is (src/identity/admission.ts): its token (or none) decides its principal, or
   * refuses it. `tokenRequired` false: clients without a token are admitted, and then only
   * loopback Host headers are (DNS-rebinding protection).
   */
  admission: { readonly tokenRequired: boolean; admit(headers: Record<string, string | string[] | undefined>, url: string, socket: Socket): Promise<Admitted> };
  /** Browser origins allowed besides the server's own. */
  allowedOrigins?: string[];
  maxConnections?: number;
  outbound?: { highWaterBytes: number; maxBufferedBytes: number };
  /** Prometheus text for GET /metrics (absent: no route). */
  metrics?: () => Promise<string>;
  onCoalesced?(): void;
  onOverflow?(bufferedBytes: number): void;
  onConnectionsChanged?(open: number): void;
}

const sha256 = (s: string) => createHash("sha256").update(s).digest();

/** Constant-time token check (hashing first makes the lengths equal). */
export function tokenMatches(given: string | undefined, expected: string): boolean {
  if (given === undefined) return false;
  return timingSafeEqual(sha256(given), sha256(expected));
}

/**
 * The token a client presented: `Authorization: Bearer <token>`, or — for browsers, which cannot
 * set headers on a WebSocket — a `token` query parameter.
 */
export function presentedToken(headers: Record<string, string | string[] | undefined>, url: string): string | undefined {
  const auth = headers.authorization;
  if (typeof auth === "string") {
    const m = /^Bearer\s+(.+)$/i.exec(auth.trim());
    if (m) return m[1]!.trim();
  }
  return new URL(url, "http://x").searchParams.get("token") ?? undefined;
}

/**
 * DNS-rebinding protection, applied when the server has no auth token: a page on
 * `http://evil.example:4500` whose name the attacker re-points at 127.0.0.1 reaches us with
 * `Host: evil.example:4500` (and that same Origin, so an Origin-vs-Host check alone admits it).
 * Only a loopback name or address *with our listening port* is accepted: `localhost:<port>`,
 * `127.x.y.z:<port>` (all of 127.0.0.0/8 is loopback, and an IP literal cannot be re-pointed by
 * DNS), `[::1]:<port>`. Names are matched case-insensitively; no port means 80 (as HTTP clients
 * omit the default port). Anything else — other names, `*.localhost`, a trailing dot, userinfo,
 * other IPv6 spellings, a missing Host (HTTP/1.1 requires it) — is refused.
 */
export function loopbackHostAllowed(host: string | undefined, port: number): boolean {
  if (host === undefined) return false;
  const m = /^(localhost|127\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})|\[::1\])(?::(\d{1,5}))?$/i.exec(host);
  if (!m) return false;
  if ([m[2], m[3], m[4]].some((octet) => octet !== undefined && Number(octet) > 255)) return false;
  return (m[5] === undefined ? 80 : Number(m[5])) === port;
}

/** Same origin as the server itself (the playground), or listed. Requests without Origin are not browsers. */
export function originAllowed(origin: string | undefined, host: string | undefined, allowed: readonly string[]): boolean {
  if (origin === undefined) return true;
  if (allowed.includes(origin)) return true;
  try {
    return host !== undefined && new URL(origin).host === host;
  } catch {
    return false;
  }
}

const TEXT_FRAME = { binary: false } as const;

/**
 * Frames written to one socket in the same tick leave in one write (writev) instead of one
 * syscall each: the first write of a tick corks the TCP socket, the end of the tick uncorks it.
 * ws corks around each frame itself; corks nest, so its frames stay buffered until ours ends.
 * What is held that way is not backpressure (it goes to the kernel at the end of the tick, as it
 * would have at once before): `held()` is subtracted from `bufferedAmount` for the outbound
 * queue, so a client that reads keeps getting every delta one by one; and a batch is flushed
 * early past FLUSH_BYTES, so the queue's high-water mark and 1013 cap still see a socket that
 * does not drain within one batch. (Measured: with 16 KiB batches a reading client in the same
 * process as the server — test/hardening.e2e.test.ts — started getting merged deltas, i.e. the
 * kernel took less of a large burst; at 4 KiB it gets every one, and most deltas are < 1 KiB.)
 */
const FLUSH_BYTES = 4 * 1024;

interface TickBatch {
  /** Before writing `bytes` (about: the frame header is not counted). */
  add(bytes: number): void;
  /** Bytes written in this tick's batch, not yet handed to the kernel. */
  held(): number;
}

/**
 * `raw`: the TCP socket of the upgrade request (`req.socket`), which ws takes over for the
 * connection and writes its frames to, so corking it batches them. (Absent for a request that came
 * without one, e.g. @fastify/websocket's injectWS: then no batching.)
 */
function writesPerTick(raw: Socket | undefined): TickBatch {
  if (!raw || typeof raw.cork !== "function") return { add: () => {}, held: () => 0 };
  let corked = false;
  let pending = 0;
  const uncork = () => {
    if (!corked) return;
    corked = false;
    pending = 0;
    raw.uncork();
  };
  return {
    add(bytes) {
      if (corked && pending >= FLUSH_BYTES) uncork();
      if (!corked) {
        corked = true;
        raw.cork();
        process.nextTick(uncork);
      }
      pending += bytes;
    },
    held: () => pending,
  };
}

/** URLs in log lines never carry the browser token. */
const withoutToken = (url: string) => url.replace(/([?&]token=)[^&]*/gi, "$1[redacted]");

export interface WebSocketTransport {
  readonly url: string;
  /** Bytes waiting for clients (queued + socket buffers), all connections. */
  bufferedBytes(): number;
  /** The fastify instance (tests use inject; the metrics route attaches here later). */
  readonly app: FastifyInstance<any, any, any, any>;
  close(): Promise<void>;
}

function noRouteSchemas(): never {
  throw new Error("route schemas are not supported (no validator or serializer compiler is loaded)");
}

export async function startWebSocketTransport(opts: WebSocketTransportOptions): Promise<WebSocketTransport> {
  const app = await httpApp(opts);
  const sockets = new Set<WebSocket>();
  const queues = new Set<OutboundQueue>();

  // The port actually bound (known after listen, so port 0 works); until then, refuse.
  let listeningPort: number | undefined;
  if (!opts.admission.tokenRequired) refuseNonLoopbackHosts(app, opts.log, () => listeningPort);

  const sendPlayground = playgroundRoutes(app);
  /** The principal of each admitted upgrade, until its socket handler takes it. */
  const admitted = new WeakMap<object, Principal>();
  probeRoutes(app, opts);

  app.register(async (scope) => {
    // Refuse upgrades until the store is ready, rather than accept and fail every request.
    // (The playground page itself is served while starting; it retries the socket.)
    // Then, still before any JSON-RPC: the connection limit, the origin (cross-site WebSocket
    // hijacking) and the token. The page itself needs none of these: it asks for the token.
    scope.addHook("preValidation", async (req, reply) => {
      if (!req.ws) return;
      if (!opts.isReady()) return reply.code(503).send({ error: "server is starting" });
      if (opts.maxConnections !== undefined && sockets.size >= opts.maxConnections)
        return reply.code(503).send({ error: `too many connections (limit ${opts.maxConnections})` });
      // "Same origin" compares with the Host header: without a token, it passed the loopback
      // check above (onRequest runs first), so a rebound name cannot make itself "same origin".
      if (!originAllowed(req.headers.origin, req.headers.host, opts.allowedOrigins ?? []))
        return reply.code(403).send({ error: "origin not allowed" });
      const who = await opts.admission.admit(req.headers, req.url, req.socket);
      if (!who.ok) return refuse(reply, who);
      admitted.set(req.raw, who.principal);
    });
    scope.route({
      method: "GET",
      url: "/",
      // A plain GET (a browser opening the page): the playground.
      handler: (_req, reply) => sendPlayground(reply, "index.html"),
      // An upgrade: one JSON-RPC connection.
      wsHandler: (socket: WebSocket, req) => {
        const principal = admitted.get(req.raw);
        admitted.delete(req.raw);
        if (!principal) {
          socket.close(1011, "not admitted");
          return;
        }
        openConnection(opts, { sockets, queues }, socket, req.socket, principal);
      },
    });
  });

  await app.listen({ host: opts.host, port: opts.port });
  const addr = app.server.address();
  const port = typeof addr === "object" && addr ? addr.port : opts.port;
  listeningPort = port;
  const host = opts.host.includes(":") ? `[${opts.host}]` : opts.host;
  return {
    url: `ws://${host}:${port}`,
    app,
    bufferedBytes: () => [...queues].reduce((n, q) => n + q.bufferedBytes, 0),
    close: async () => {
      for (const s of sockets) s.close(1001, "server shutting down");
      // A peer that never answers the close frame (a hung browser) must not hold the shutdown for
      // ws's 30 s closing timeout: after a short grace its socket is dropped.
      const grace = setTimeout(() => {
        for (const s of sockets) s.terminate();
      }, 2_000);
      try {
        await app.close();
      } finally {
        clearTimeout(grace);
      }
    },
  };
}

/** The fastify instance with the websocket plugin registered (before any hook or route). */
async function httpApp(opts: WebSocketTransportOptions): Promise<FastifyInstance<any, any, any, any>> {
  // Per-request logs would be noise (one WebSocket upgrade per client); warnings and errors stay.
  // Raise the level to warn, never lower it below the configured one (e.g. silent).
  const httpLevel = opts.log.levelVal > opts.log.levels.values.warn! ? opts.log.level : "warn";
  const app = Fastify({
    loggerInstance: opts.log.child(
      { component: "http" },
      { level: httpLevel, serializers: { req: (req: { method?: string; url?: string }) => ({ method: req.method, url: withoutToken(req.url ?? "") }) } },
    ),
    // No route has a JSON schema: without these factories fastify loads ajv and
    // fast-json-stringify (~40 ms of start-up) for nothing. A route with a schema fails loudly.
    schemaController: { compilersFactory: { buildValidator: noRouteSchemas, buildSerializer: noRouteSchemas } },
  });
  await app.register(websocket, {
    options: {
      maxPayload: opts.maxFrameBytes,
      // No subprotocol is selected, whatever the client offers (ws would echo the first one,
      // claiming a protocol we know nothing about). Codex's clients offer none; JSON-RPC has no
      // registered subprotocol name. A client that insists on one sees the handshake without it.
      handleProtocols: () => false,
    },
    // A client's protocol error (oversized frame → 1009, invalid UTF-8 → 1007, abrupt reset) is
    // not a server error: ws has already sent the close code; log it briefly and drop the socket.
    errorHandler: (err, socket) => {
      opts.log.warn({ component: "ws", code: (err as NodeJS.ErrnoException).code, error: err.message }, "closed a websocket after a protocol error");
      socket.terminate();
    },
  });
  return app;
}

/**
 * Without a token: the DNS-rebinding check (loopbackHostAllowed) on every request — WebSocket
 * upgrades, the playground, /healthz, /readyz, /metrics and 404s alike. Health probes leak
 * nothing, but one rule for everything is simpler to reason about; a probe on this host uses
 * 127.0.0.1:<port> anyway. Answered 403 with a short JSON error, before any route or JSON-RPC
 * (403 rather than 421: this is a refusal, not a hint to retry on another connection).
 * Added after the websocket plugin, whose own onRequest hook marks upgrades (req.ws) so that its
 * onResponse hook closes the socket of a refused one. `port()` is the one actually bound
 * (undefined until listen: then, refuse). With a token, the token is the protection and any Host
 * is accepted as before.
 */
function refuseNonLoopbackHosts(app: FastifyInstance<any, any, any, any>, log: Logger, port: () => number | undefined): void {
  app.addHook("onRequest", async (req, reply) => {
    const listeningPort = port();
    if (listeningPort !== undefined && loopbackHostAllowed(req.headers.host, listeningPort)) return;
    log.warn({ component: "http", host: req.headers.host?.slice(0, 200) ?? null, remote: req.ip }, "refused a request for a non-loopback Host (no auth token set)");
    return reply.code(403).send({ error: "host not allowed: without an auth token only loopback Host headers (localhost, 127.0.0.1, [::1]) with the server's port are accepted" });
  });
}

type SendPlayground = (reply: FastifyReply<any, any, any, any>, name: string) => FastifyReply<any, any, any, any>;

/** The page's scripts (ES modules), styles and vendored markdown-it (src/playground.ts); returns how to send a file of it. */
function playgroundRoutes(app: FastifyInstance<any, any, any, any>): SendPlayground {
  const playground = loadPlayground();
  const sendPlayground: SendPlayground = (reply, name) => {
    const file = playground.get(name);
    if (!file) return reply.code(404).type("text/plain; charset=utf-8").send("the playground is not installed (public/ is missing)\n");
    return reply
      .type(file.type)
      .header("cache-control", "no-cache")
      .header("x-content-type-options", "nosniff")
      .header("referrer-policy", "no-referrer")
      .header("content-security-policy", PLAYGROUND_CSP)
      .send(file.body);
  };
  for (const name of playground.keys()) if (name !== "index.html") app.get(`/${name}`, (_req, reply) => sendPlayground(reply, name));
  return sendPlayground;
}

const refuse = (reply: FastifyReply<any, any, any, any>, a: Extract<Admitted, { ok: false }>) =>
  a.status === 401 ? reply.code(401).header("www-authenticate", "Bearer").send({ error: a.error }) : reply.code(a.status).send({ error: a.error });

/** GET /healthz, /metrics (when given) and /readyz. */
function probeRoutes(app: FastifyInstance<any, any, any, any>, opts: WebSocketTransportOptions): void {
  app.get("/healthz", async () => ({ status: "ok" }));
  if (opts.metrics) {
    const render = opts.metrics;
    app.get("/metrics", async (req, reply) => {
      // Every user's numbers are in it (tokens per user): for admins only.
      const who = await opts.admission.admit(req.headers, req.url, req.socket);
      if (!who.ok) return refuse(reply, who);
      if (!who.principal.admin) return reply.code(403).send({ error: "metrics are for admins" });
      return reply.type("text/plain; version=0.0.4; charset=utf-8").send(await render());
    });
  }
  app.get("/readyz", async (_req, reply) => {
    if (!opts.isReady()) return reply.code(503).send({ status: "starting" });
    return { status: "ready" };
  });
}

/** One admitted upgrade becomes a JSON-RPC connection: its outbound queue, keepalive, frames in and close. */
function openConnection(
  opts: WebSocketTransportOptions,
  open: { sockets: Set<WebSocket>; queues: Set<OutboundQueue> },
  socket: WebSocket,
  raw: Socket,
  principal: Principal,
): void {
  open.sockets.add(socket);
  opts.onConnectionsChanged?.(open.sockets.size);
  const batch = writesPerTick(raw);
  // A notification shared by every connection is written as its prepared frame, one buffer per
  // message (ws.send frames it again for each socket and writes header and payload apart). Only
  // where ws would write the same bytes: its own socket, and no extension negotiated (with
  // permessage-deflate, ws may compress or hold frames in its queue). ws's own frames (responses,
  // pings, close) go to the same socket synchronously too, so the order of frames is kept.
  const framesDirect = raw !== undefined && (socket as unknown as { _socket?: unknown })._socket === raw && socket.extensions === "";
  const outbound = new OutboundQueue(
    {
      get bufferedAmount() {
        return Math.max(0, socket.bufferedAmount - batch.held());
      },
      write: (data, source) => {
        if (socket.readyState !== socket.OPEN) return;
        if (framesDirect && source instanceof PreparedNotification) {
          const frame = source.frame;
          batch.add(frame.length);
          raw.write(frame);
          return;
        }
        batch.add(data.length);
        // Shared bytes go out as a text frame as they are (ws would send a Buffer as binary).
        socket.send(data, TEXT_FRAME);
      },
      close: (code, reason) => socket.close(code, reason),
    },
    {
      highWaterBytes: opts.outbound?.highWaterBytes ?? 1024 * 1024,
      maxBufferedBytes: opts.outbound?.maxBufferedBytes ?? 32 * 1024 * 1024,
      onCoalesced: opts.onCoalesced,
      onOverflow: (bytes) => {
        opts.log.warn({ component: "ws", bufferedBytes: bytes }, "closed a connection that stopped reading (outbound buffer full)");
        opts.onOverflow?.(bytes);
      },
    },
  );
  open.queues.add(outbound);
  // A notification serialised once for every connection (PreparedNotification): its bytes,
  // and a coalescing hint only if it has to wait. Anything else: the text, as before.
  const send: SendText = (text, message) =>
    message instanceof PreparedNotification ? outbound.push(message.bytes, message) : outbound.push(text, message ? deltaHint(message) : undefined);
  const peer = opts.accept(send, (code, reason) => socket.close(code, reason), { principal, remote: raw.remoteAddress ?? null });
  watchSocket(socket, opts.keepalive ?? DEFAULT_KEEPALIVE, {
    initialized: () => peer.initialized?.() ?? true,
    onTimeout: (reason) =>
      opts.log.warn(
        { component: "ws", reason },
        reason === "ping" ? "closed a connection that stopped answering pings" : "closed a connection that did not initialize in time",
      ),
  });
  socket.on("message", (data, isBinary) => {
    if (isBinary) {
      send(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32600, message: "Invalid Request: binary frames are not supported; send JSON text frames" } }));
      return;
    }
    peer.receive(data.toString());
  });
  socket.on("error", (err) => opts.log.debug({ err }, "websocket error"));
  socket.on("close", () => {
    open.sockets.delete(socket);
    open.queues.delete(outbound);
    outbound.close();
    opts.onConnectionsChanged?.(open.sockets.size);
    peer.closed();
  });
}
