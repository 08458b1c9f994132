/**
 * A JSON-RPC test client over a real WebSocket that keeps every raw frame, so tests can assert
 * on the exact wire sequence of responses, notifications and server requests.
 */
import WebSocket from "ws";

export type Frame = Record<string, any>;

export class RpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
  }
}

export type ServerRequestHandler = (params: any, frame: Frame) => unknown | Promise<unknown>;

export class TestClient {
  /** Every frame received, in order. */
  readonly frames: Frame[] = [];
  private nextId = 1;
  private pending = new Map<string | number, { resolve: (f: Frame) => void }>();
  private waiters: Array<{ match: (f: Frame) => boolean; resolve: (f: Frame) => void }> = [];
  private handlers = new Map<string, ServerRequestHandler>();
  closeCode: number | null = null;
  closeReason = "";
  readonly closed: Promise<void>;

  private constructor(readonly ws: WebSocket) {
    ws.on("message", (data) => this.onFrame(JSON.parse(data.toString())));
    this.closed = new Promise((resolve) =>
      ws.on("close", (code, reason) => {
        this.closeCode = code;
        this.closeReason = reason.toString();
        resolve();
      }),
    );
  }

  static async connect(url: string, opts: WebSocket.ClientOptions = {}): Promise<TestClient> {
    const ws = new WebSocket(url, { perMessageDeflate: false, ...opts });
    await new Promise<void>((resolve, reject) => {
      ws.once("open", () => resolve());
      ws.once("error", reject);
    });
    return new TestClient(ws);
  }

  /** Connects and completes the initialize/initialized handshake. */
  static async initialized(url: string, capabilities: Record<string, unknown> = {}): Promise<TestClient> {
    const c = await TestClient.connect(url);
    await c.request("initialize", { clientInfo: { name: "test", title: null, version: "0.0.1" }, capabilities });
    c.notify("initialized", {});
    return c;
  }

  private onFrame(frame: Frame): void {
    const batch = Array.isArray(frame) ? frame : [frame];
    for (const f of batch) {
      this.frames.push(f);
      if (f.method && f.id !== undefined) void this.answerServerRequest(f);
      else if (f.id !== undefined && f.id !== null && this.pending.has(f.id)) {
        const p = this.pending.get(f.id)!;
        this.pending.delete(f.id);
        p.resolve(f);
      }
      for (const w of [...this.waiters]) {
        if (w.match(f)) {
          this.waiters.splice(this.waiters.indexOf(w), 1);
          w.resolve(f);
        }
      }
    }
  }

  private async answerServerRequest(f: Frame): Promise<void> {
    const handler = this.handlers.get(f.method);
    if (!handler) return; // tests answer by hand with respond()
    try {
      this.respond(f.id, await handler(f.params, f));
    } catch (err) {
      this.send({ id: f.id, error: { code: -32000, message: String(err) } });
    }
  }

  onServerRequest(method: string, handler: ServerRequestHandler): void {
    this.handlers.set(method, handler);
  }

  respond(id: string | number, result: unknown): void {
    this.send({ id, result });
  }

  send(payload: unknown): void {
    this.ws.send(typeof payload === "string" ? payload : JSON.stringify(payload));
  }

  /** Sends a request and resolves with the full response frame. */
  requestRaw(method: string, params?: unknown, id: string | number = this.nextId++): Promise<Frame> {
    const response = new Promise<Frame>((resolve) => this.pending.set(id, { resolve }));
    this.send({ jsonrpc: "2.0", id, method, ...(params === undefined ? {} : { params }) });
    return response;
  }

  /** Sends a request; resolves with `result` or rejects with RpcError. */
  async request<T = any>(method: string, params?: unknown): Promise<T> {
    const f = await this.requestRaw(method, params);
    if (f.error) throw new RpcError(f.error.code, f.error.message, f.error.data);
    return f.result as T;
  }

  notify(method: string, params?: unknown): void {
    this.send({ jsonrpc: "2.0", method, ...(params === undefined ? {} : { params }) });
  }

  /** Resolves with the first frame (already received or future) matching. */
  waitFor(match: (f: Frame) => boolean, timeoutMs = 10_000): Promise<Frame> {
    const seen = this.frames.find(match);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`timed out waiting for a frame; got: ${JSON.stringify(this.frames.slice(-5))}`)), timeoutMs);
      this.waiters.push({
        match,
        resolve: (f) => {
          clearTimeout(timer);
          resolve(f);
        },
      });
    });
  }

  waitForNotification(method: string, pred: (params: any) => boolean = () => true, timeoutMs?: number): Promise<Frame> {
    return this.waitFor((f) => f.method === method && f.id === undefined && pred(f.params), timeoutMs);
  }

  /** Notifications received so far (optionally of one method). */
  notifications(method?: string): Frame[] {
    return this.frames.filter((f) => f.method && f.id === undefined && (!method || f.method === method));
  }

  async close(): Promise<void> {
    if (this.ws.readyState === WebSocket.CLOSED) return;
    this.ws.close();
    await this.closed;
  }
}
