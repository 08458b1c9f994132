/**
 * A small JSON-RPC 2.0 client over a message channel — a WebSocket (the `ws` package), or an
 * in-process pipe to an embedded server (src/acp/embedded.ts) — for the `exec`, `threads` and `acp`
 * commands: requests with promises, notifications to listeners, and server → client requests
 * (approvals, dynamic tool calls) answered by registered handlers.
 */
import WebSocket from "ws";
import { RpcError } from "../rpc/errors.js";
import { VERSION } from "../version.js";

/** The same error type the server's handlers throw: a JSON-RPC error with code and data. */
export { RpcError };

/** A message as received (a notification or a server request), after JSON parsing. */
export type Frame = { jsonrpc?: string; id?: string | number | null; method?: string; params?: any; result?: unknown; error?: any; [k: string]: unknown };

export type NotificationListener = (method: string, params: any, frame: Frame) => void;
export type ServerRequestHandler = (params: any, frame: Frame) => unknown | Promise<unknown>;

export interface ConnectOptions {
  /** Sent as `Authorization: Bearer <token>`. */
  token?: string;
  /** Largest accepted message (default 64 MiB). */
  maxPayload?: number;
}

/** Where the client's messages travel: one JSON text per message, both ways. */
export interface MessageChannel {
  /** Sends one message; dropped once the channel is closed. */
  send(text: string): void;
  /** Starts closing; `onClose` listeners run when it is closed. */
  close(): void;
  onMessage(listener: (text: string) => void): void;
  onClose(listener: (code: number, reason: string) => void): void;
}

/** A WebSocket as a MessageChannel (binary frames are ignored). */
function webSocketChannel(ws: WebSocket): MessageChannel {
  ws.on("error", () => {}); // reported through close
  return {
    send: (text) => {
      if (ws.readyState === WebSocket.OPEN) ws.send(text);
    },
    close: () => ws.close(1000, "done"),
    onMessage: (listener) =>
      ws.on("message", (data, isBinary) => {
        if (!isBinary) listener(data.toString());
      }),
    onClose: (listener) => ws.on("close", (code, reason) => listener(code, reason.toString())),
  };
}

export class RpcClient {
  private nextId = 1;
  private readonly pending = new Map<string | number, { resolve(v: unknown): void; reject(e: Error): void }>();
  private readonly listeners = new Set<NotificationListener>();
  private readonly handlers = new Map<string, ServerRequestHandler>();
  private closeInfo: { code: number; reason: string } | null = null;
  /** Resolves when the socket closes, with its close code and reason. */
  readonly closed: Promise<{ code: number; reason: string }>;

  private constructor(private readonly channel: MessageChannel) {
    channel.onMessage((text) => this.onText(text));
    this.closed = new Promise((resolve) =>
      channel.onClose((code, reason) => {
        if (this.closeInfo) return;
        this.closeInfo = { code, reason };
        const err = new Error(`connection closed (${code}${reason ? `: ${reason}` : ""})`);
        for (const p of this.pending.values()) p.reject(err);
        this.pending.clear();
        resolve(this.closeInfo);
      }),
    );
  }

  /** A client over any channel (an embedded server's in-process pipe). */
  static over(channel: MessageChannel): RpcClient {
    return new RpcClient(channel);
  }

  /** Opens the socket; rejects with a readable message when the server cannot be reached or refuses. */
  static connect(url: string, opts: ConnectOptions = {}): Promise<RpcClient> {
    const headers: Record<string, string> = {};
    if (opts.token) headers.authorization = `Bearer ${opts.token}`;
    return new Promise((resolve, reject) => {
      let ws: WebSocket;
      try {
        ws = new WebSocket(url, { headers, perMessageDeflate: false, maxPayload: opts.maxPayload ?? 64 * 1024 * 1024 });
      } catch (err) {
        reject(new Error(`invalid server URL ${url}: ${(err as Error).message}`));
        return;
      }
      ws.once("unexpected-response", (_req, res) => {
        reject(new Error(`the server at ${url} refused the connection: HTTP ${res.statusCode}${res.statusCode === 401 || res.statusCode === 403 ? " (is a token needed? --token)" : ""}`));
        ws.terminate();
      });
      ws.once("error", (err) => reject(new Error(`could not connect to ${url}: ${(err as NodeJS.ErrnoException).code ?? err.message}`)));
      ws.once("open", () => resolve(new RpcClient(webSocketChannel(ws))));
    });
  }

  /** initialize + initialized. */
  async initialize(name: string, title: string | null = null): Promise<any> {
    const result = await this.request("initialize", { clientInfo: { name, title, version: VERSION } });
    this.notify("initialized", {});
    return result;
  }

  request<T = any>(method: string, params?: unknown): Promise<T> {
    if (this.closeInfo) return Promise.reject(new Error("connection closed"));
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      this.send({ id, method, ...(params === undefined ? {} : { params }) });
    });
  }

  notify(method: string, params?: unknown): void {
    this.send({ method, ...(params === undefined ? {} : { params }) });
  }

  /** Listens to every notification; returns the unsubscribe function. */
  onNotification(listener: NotificationListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Answers server requests of `method` (unhandled methods get -32601). */
  handle(method: string, handler: ServerRequestHandler): void {
    this.handlers.set(method, handler);
  }

  async close(): Promise<void> {
    if (this.closeInfo) return;
    this.channel.close();
    await this.closed;
  }

  private send(message: object): void {
    if (!this.closeInfo) this.channel.send(JSON.stringify({ jsonrpc: "2.0", ...message }));
  }

  private onText(text: string): void {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      return;
    }
    for (const frame of (Array.isArray(parsed) ? parsed : [parsed]) as Frame[]) {
      if (!frame || typeof frame !== "object") continue;
      if (typeof frame.method === "string" && frame.id !== undefined && frame.id !== null) void this.answer(frame);
      else if (typeof frame.method === "string") for (const l of [...this.listeners]) l(frame.method, frame.params ?? {}, frame);
      else if (frame.id !== undefined && frame.id !== null && this.pending.has(frame.id)) {
        const p = this.pending.get(frame.id)!;
        this.pending.delete(frame.id);
        if (frame.error) p.reject(new RpcError(frame.error.code, frame.error.message, frame.error.data));
        else p.resolve(frame.result);
      }
    }
  }

  private async answer(frame: Frame): Promise<void> {
    const handler = this.handlers.get(frame.method!);
    if (!handler) {
      this.send({ id: frame.id, error: { code: -32601, message: `Method not found: ${frame.method}` } });
      return;
    }
    try {
      this.send({ id: frame.id, result: await handler(frame.params ?? {}, frame) });
    } catch (err) {
      this.send({ id: frame.id, error: { code: -32603, message: err instanceof Error ? err.message : String(err) } });
    }
  }
}
