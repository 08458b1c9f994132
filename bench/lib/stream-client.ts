/**
 * A JSON-RPC client over one WebSocket that also sees notifications, each stamped with
 * process.hrtime.bigint() when its frame arrived (before parsing): what the turn, delta-latency
 * and load benchmarks need. The model mock runs in the same process and stamps the chunks it
 * writes with the same clock, so "chunk written → delta received" is one subtraction.
 */
import WebSocket from "ws";

export type NotificationListener = (method: string, params: any, recvNs: bigint) => void;

interface Waiter {
  method: string;
  match: (params: any) => boolean;
  resolve: (v: { params: any; recvNs: bigint }) => void;
}

export class StreamClient {
  private nextId = 1;
  private pending = new Map<number, { resolve: (f: any) => void }>();
  private waiters: Waiter[] = [];
  /** Every notification, in arrival order (besides the waiters). */
  onNotification: NotificationListener | null = null;
  /** Frames received (responses and notifications). */
  frames = 0;
  /** Resolves with the close code and reason once the socket is closed. */
  readonly closed: Promise<{ code: number; reason: string }>;

  private constructor(private readonly ws: WebSocket) {
    this.closed = new Promise((resolve) => ws.once("close", (code, reason) => resolve({ code, reason: reason.toString() })));
    ws.on("message", (data) => {
      const recvNs = process.hrtime.bigint();
      this.frames++;
      const f = JSON.parse(data.toString());
      if (f.method === undefined) {
        const p = this.pending.get(f.id);
        if (p) {
          this.pending.delete(f.id);
          p.resolve({ ...f, recvNs, bytes: (data as Buffer).length });
        }
        return;
      }
      this.onNotification?.(f.method, f.params, recvNs);
      if (this.waiters.length) {
        for (let i = 0; i < this.waiters.length; i++) {
          const w = this.waiters[i]!;
          if (w.method === f.method && w.match(f.params)) {
            this.waiters.splice(i, 1);
            w.resolve({ params: f.params, recvNs });
            break;
          }
        }
      }
    });
    ws.on("error", () => {});
    void this.closed.then(() => {
      for (const [, p] of this.pending) p.resolve({ error: { code: -1, message: "socket closed" } });
      this.pending.clear();
    });
  }

  static async connect(url: string, name = "bench", timeoutMs = 30_000): Promise<StreamClient> {
    const ws = new WebSocket(url, { perMessageDeflate: false, handshakeTimeout: timeoutMs });
    await new Promise<void>((resolve, reject) => {
      ws.once("open", () => resolve());
      ws.once("error", reject);
      ws.once("unexpected-response", (_req, res) => reject(new Error(`upgrade refused: HTTP ${res.statusCode}`)));
    });
    const c = new StreamClient(ws);
    await c.request("initialize", { clientInfo: { name, title: null, version: "0.0.1" }, capabilities: {} });
    ws.send(JSON.stringify({ jsonrpc: "2.0", method: "initialized", params: {} }));
    return c;
  }

  /** Sends a request; resolves with its result and the hrtime at which it was sent / answered. */
  async call<T = any>(method: string, params?: unknown, timeoutMs = 60_000): Promise<{ result: T; sentNs: bigint; recvNs: bigint; bytes: number }> {
    const id = this.nextId++;
    let sentNs = 0n;
    const frame = await new Promise<any>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`${method} timed out after ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, {
        resolve: (f) => {
          clearTimeout(timer);
          resolve(f);
        },
      });
      sentNs = process.hrtime.bigint();
      this.ws.send(JSON.stringify({ jsonrpc: "2.0", id, method, ...(params === undefined ? {} : { params }) }));
    });
    if (frame.error) throw new Error(`${method}: ${frame.error.code} ${frame.error.message}`);
    return { result: frame.result as T, sentNs, recvNs: frame.recvNs as bigint, bytes: frame.bytes as number };
  }

  async request<T = any>(method: string, params?: unknown, timeoutMs = 60_000): Promise<T> {
    return (await this.call<T>(method, params, timeoutMs)).result;
  }

  /** The next notification `method` whose params match (registered before it can arrive). */
  waitFor(method: string, match: (params: any) => boolean, timeoutMs = 60_000): Promise<{ params: any; recvNs: bigint }> {
    return new Promise((resolve, reject) => {
      const w: Waiter = {
        method,
        match,
        resolve: (v) => {
          clearTimeout(timer);
          resolve(v);
        },
      };
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((x) => x !== w);
        reject(new Error(`no ${method} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.waiters.push(w);
    });
  }

  /** Stops reading from the socket (the kernel buffers fill, then the server's). */
  pauseReading(): void {
    (this.ws as unknown as { _socket: import("node:net").Socket })._socket.pause();
  }

  resumeReading(): void {
    (this.ws as unknown as { _socket: import("node:net").Socket })._socket.resume();
  }

  get isOpen(): boolean {
    return this.ws.readyState === WebSocket.OPEN;
  }

  async close(): Promise<void> {
    if (this.ws.readyState === WebSocket.CLOSED) return;
    this.ws.close();
    const t = setTimeout(() => this.ws.terminate(), 3_000);
    await this.closed;
    clearTimeout(t);
  }

  terminate(): void {
    this.ws.terminate();
  }
}

/** Connects `n` clients, `concurrency` at a time. */
export async function connectMany(url: string, n: number, concurrency = 25): Promise<StreamClient[]> {
  const out: StreamClient[] = new Array(n);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, n) }, async () => {
      while (next < n) {
        const i = next++;
        out[i] = await StreamClient.connect(url, `bench-${i}`);
      }
    }),
  );
  return out;
}

/** Runs `fn` over items, `concurrency` at a time. */
export async function pool<T, R>(items: T[], concurrency: number, fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await fn(items[i]!, i);
      }
    }),
  );
  return out;
}
