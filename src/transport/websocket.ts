/**
 * WebSocket transport on fastify: exactly one JSON-RPC message per text frame, plus
 * GET /healthz (process alive) and GET /readyz (store ready, accepting) on the same port.
 * Frames over the size limit close the connection with 1009 (ws enforces maxPayload).
 */
import websocket from "@fastify/websocket";
import Fastify, { type FastifyInstance } from "fastify";
import type { WebSocket } from "ws";
import type { Logger } from "../log.js";

export interface WebSocketTransportOptions {
  host: string;
  port: number;
  maxFrameBytes: number;
  log: Logger;
  /** Whether the server accepts connections (the store is ready). */
  isReady(): boolean;
  /** A new client: returns the callbacks for its frames and its close. */
  accept(send: (text: string) => void, closeSocket: (code: number, reason: string) => void): { receive(text: string): void; closed(): void };
}

export interface WebSocketTransport {
  readonly url: string;
  /** The fastify instance (tests use inject; the metrics route attaches here later). */
  readonly app: FastifyInstance<any, any, any, any>;
  close(): Promise<void>;
}

export async function startWebSocketTransport(opts: WebSocketTransportOptions): Promise<WebSocketTransport> {
  // Per-request logs would be noise (one WebSocket upgrade per client); warnings and errors stay.
  // Raise the level to warn, never lower it below the configured one (e.g. silent).
  const httpLevel = opts.log.levelVal > opts.log.levels.values.warn! ? opts.log.level : "warn";
  const app = Fastify({ loggerInstance: opts.log.child({ component: "http" }, { level: httpLevel }) });
  const sockets = new Set<WebSocket>();
  await app.register(websocket, {
    options: { maxPayload: opts.maxFrameBytes },
    // A client's protocol error (oversized frame → 1009, invalid UTF-8 → 1007, abrupt reset) is
    // not a server error: ws has already sent the close code; log it briefly and drop the socket.
    errorHandler: (err, socket) => {
      opts.log.warn({ component: "ws", code: (err as NodeJS.ErrnoException).code, error: err.message }, "closed a websocket after a protocol error");
      socket.terminate();
    },
  });

  app.get("/healthz", async () => ({ status: "ok" }));
  app.get("/readyz", async (_req, reply) => {
    if (!opts.isReady()) return reply.code(503).send({ status: "starting" });
    return { status: "ready" };
  });

  app.register(async (scope) => {
    // Refuse upgrades until the store is ready, rather than accept and fail every request.
    scope.addHook("preValidation", async (_req, reply) => {
      if (!opts.isReady()) await reply.code(503).send({ error: "server is starting" });
    });
    scope.get("/", { websocket: true }, (socket: WebSocket) => {
      sockets.add(socket);
      const send = (text: string) => {
        if (socket.readyState === socket.OPEN) socket.send(text);
      };
      const peer = opts.accept(send, (code, reason) => socket.close(code, reason));
      socket.on("message", (data, isBinary) => {
        if (isBinary) {
          send(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32600, message: "Invalid Request: binary frames are not supported; send JSON text frames" } }));
          return;
        }
        peer.receive(data.toString());
      });
      socket.on("error", (err) => opts.log.debug({ err }, "websocket error"));
      socket.on("close", () => {
        sockets.delete(socket);
        peer.closed();
      });
    });
  });

  await app.listen({ host: opts.host, port: opts.port });
  const addr = app.server.address();
  const port = typeof addr === "object" && addr ? addr.port : opts.port;
  const host = opts.host.includes(":") ? `[${opts.host}]` : opts.host;
  return {
    url: `ws://${host}:${port}`,
    app,
    close: async () => {
      for (const s of sockets) s.close(1001, "server shutting down");
      await app.close();
    },
  };
}
