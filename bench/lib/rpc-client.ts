/** A minimal JSON-RPC 2.0 client over one WebSocket (the idea of test/support/client.ts, trimmed). */
import { performance } from "node:perf_hooks";
import WebSocket from "ws";

/**
 * Client-side pacing under the server's per-connection ingress limit (src/rpc/peer.ts
 * DEFAULT_PEER_LIMITS: 200 requests/s sustained, burst 400; beyond it requests get -32001), with
 * some margin. Waiting happens in pace(), outside the timed part of a call.
 */
const PACE = { perSecond: 180, burst: 350 };

export class BenchClient {
  private nextId = 1;
  private tokens = PACE.burst;
  private tokensAt = performance.now();
  private pending = new Map<number, (frame: any) => void>();

  private constructor(private readonly ws: WebSocket) {
    ws.on("message", (data) => {
      const frame = JSON.parse(data.toString());
      for (const f of Array.isArray(frame) ? frame : [frame]) {
        if (f.id !== undefined && f.id !== null && f.method === undefined) {
          const resolve = this.pending.get(f.id);
          if (resolve) {
            this.pending.delete(f.id);
            resolve(f);
          }
        }
        // Notifications (thread/started, ...) are ignored.
      }
    });
    ws.on("close", () => {
      for (const [, resolve] of this.pending) resolve({ error: { code: -1, message: "socket closed" } });
      this.pending.clear();
    });
  }

  static async connect(url: string): Promise<BenchClient> {
    const ws = new WebSocket(url, { perMessageDeflate: false });
    await new Promise<void>((resolve, reject) => {
      ws.once("open", () => resolve());
      ws.once("error", reject);
    });
    const c = new BenchClient(ws);
    await c.request("initialize", { clientInfo: { name: "bench", title: null, version: "0.0.1" }, capabilities: {} });
    c.ws.send(JSON.stringify({ jsonrpc: "2.0", method: "initialized", params: {} }));
    return c;
  }

  /** Resolves when one more request stays within the server's rate limit. */
  async pace(): Promise<void> {
    for (;;) {
      const now = performance.now();
      this.tokens = Math.min(PACE.burst, this.tokens + ((now - this.tokensAt) / 1000) * PACE.perSecond);
      this.tokensAt = now;
      if (this.tokens >= 1) return;
      await new Promise((r) => setTimeout(r, Math.ceil(((1 - this.tokens) / PACE.perSecond) * 1000)));
    }
  }

  async request<T = any>(method: string, params?: unknown, timeoutMs = 30_000): Promise<T> {
    await this.pace(); // immediate unless the caller skipped pace() before timing the call
    this.tokens -= 1;
    const id = this.nextId++;
    const frame = await new Promise<any>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`${method} timed out after ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, (f) => {
        clearTimeout(timer);
        resolve(f);
      });
      this.ws.send(JSON.stringify({ jsonrpc: "2.0", id, method, ...(params === undefined ? {} : { params }) }));
    });
    if (frame.error) throw new Error(`${method}: ${frame.error.code} ${frame.error.message}`);
    return frame.result as T;
  }

  async close(): Promise<void> {
    if (this.ws.readyState === WebSocket.CLOSED) return;
    const closed = new Promise<void>((resolve) => this.ws.once("close", () => resolve()));
    this.ws.close();
    await closed;
  }
}
