/**
 * WebSocket keepalive and connection hygiene against the real server: pings, closing peers that
 * stop answering them, the initialize deadline, and no echoed subprotocol. Intervals are small
 * and injected; the tests assert what happens (who is closed, with which code), counting pings
 * received rather than measuring time.
 */
import http from "node:http";
import { afterEach, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { INITIALIZE_TIMEOUT_CLOSE_CODE, keepaliveFromEnv, PING_TIMEOUT_CLOSE_CODE } from "../src/transport/keepalive.js";
import { TestClient } from "./support/client.js";
import { startTestServer, type TestServer } from "./support/server.js";

const clientInfo = { name: "keepalive-test", title: null, version: "1.0.0" };

describe("WebSocket keepalive", () => {
  const servers: TestServer[] = [];
  const clients: TestClient[] = [];
  afterEach(async () => {
    for (const c of clients.splice(0)) c.ws.terminate();
    for (const s of servers.splice(0)) await s.close();
  });

  const serve = async (keepalive: { pingIntervalMs: number; maxMissedPongs?: number; initializeTimeoutMs: number }) => {
    const ts = await startTestServer("pglite", { keepalive: { maxMissedPongs: 2, ...keepalive } });
    servers.push(ts);
    return ts;
  };
  const connect = async (url: string, opts: WebSocket.ClientOptions = {}) => {
    const c = await TestClient.connect(url, opts);
    clients.push(c);
    return c;
  };
  /** Resolves once the client has received n pings. */
  const pings = (c: TestClient, n: number) =>
    new Promise<void>((resolve) => {
      let seen = 0;
      c.ws.on("ping", () => {
        if (++seen === n) resolve();
      });
    });

  it("closes a client that stops answering pings with 1001 and a reason", async () => {
    const ts = await serve({ pingIntervalMs: 25, initializeTimeoutMs: 0 });
    const c = await connect(ts.url, { autoPong: false });
    await c.request("initialize", { clientInfo });
    await c.closed;
    expect(c.closeCode).toBe(PING_TIMEOUT_CLOSE_CODE);
    expect(c.closeReason).toMatch(/no pong for 2 pings/);
  });

  it("keeps a client that answers pings open across many intervals, and it still gets answers", async () => {
    const ts = await serve({ pingIntervalMs: 20, initializeTimeoutMs: 0 });
    const c = await connect(ts.url);
    await c.request("initialize", { clientInfo });
    await pings(c, 8); // four times the missed-pong allowance
    expect(c.ws.readyState).toBe(WebSocket.OPEN);
    expect(c.closeCode).toBeNull();
    expect((await c.request("thread/list", {})).data).toEqual([]);
  });

  it("closes a connection that never initializes with 4408, and keeps one that did", async () => {
    const ts = await serve({ pingIntervalMs: 20, initializeTimeoutMs: 100 });
    const idle = await connect(ts.url);
    const ready = await connect(ts.url);
    await ready.request("initialize", { clientInfo });
    ready.notify("initialized", {});
    await idle.closed;
    expect(idle.closeCode).toBe(INITIALIZE_TIMEOUT_CLOSE_CODE);
    expect(idle.closeReason).toBe("initialize not received within 100 ms");
    // 10 pings at 20 ms come after the 100 ms deadline (timers fire in order of expiry).
    await pings(ready, 10);
    expect(ready.ws.readyState).toBe(WebSocket.OPEN);
    expect(ready.closeCode).toBeNull();
  });

  it("a client that only talks without completing initialize is still closed at the deadline", async () => {
    const ts = await serve({ pingIntervalMs: 0, initializeTimeoutMs: 80 });
    const c = await connect(ts.url);
    const refused = await c.requestRaw("thread/list", {});
    expect(refused.error).toMatchObject({ code: -32600, message: "Not initialized" });
    await c.closed;
    expect(c.closeCode).toBe(INITIALIZE_TIMEOUT_CLOSE_CODE);
  });

  it("reads its settings from the environment and refuses nonsense", () => {
    expect(keepaliveFromEnv({})).toEqual({ pingIntervalMs: 30_000, maxMissedPongs: 2, initializeTimeoutMs: 30_000 });
    expect(keepaliveFromEnv({ APP_SERVER_PING_INTERVAL_MS: "0", APP_SERVER_INITIALIZE_TIMEOUT_MS: "5000" })).toEqual({ pingIntervalMs: 0, maxMissedPongs: 2, initializeTimeoutMs: 5000 });
    expect(() => keepaliveFromEnv({ APP_SERVER_PING_INTERVAL_MS: "soon" })).toThrow(/APP_SERVER_PING_INTERVAL_MS must be a whole number of milliseconds/);
    expect(() => keepaliveFromEnv({ APP_SERVER_INITIALIZE_TIMEOUT_MS: "-1" })).toThrow(/APP_SERVER_INITIALIZE_TIMEOUT_MS/);
  });
});

describe("WebSocket subprotocols", () => {
  let ts: TestServer | undefined;
  afterEach(async () => {
    await ts?.close();
    ts = undefined;
  });

  it("selects none of the subprotocols a client offers (it used to echo the first)", async () => {
    ts = await startTestServer("pglite");
    const port = new URL(ts.url).port;
    const headers = await new Promise<http.IncomingHttpHeaders>((resolve, reject) => {
      const req = http.request({
        host: "127.0.0.1",
        port,
        path: "/",
        headers: {
          connection: "Upgrade",
          upgrade: "websocket",
          "sec-websocket-version": "13",
          "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==",
          "sec-websocket-protocol": "made-up.v1, jsonrpc",
        },
      });
      req.on("upgrade", (res, socket) => {
        socket.destroy();
        resolve(res.headers);
      });
      req.on("response", (res) => reject(new Error(`no upgrade: HTTP ${res.statusCode}`)));
      req.on("error", reject);
      req.end();
    });
    expect(headers.upgrade).toBe("websocket");
    expect(headers["sec-websocket-protocol"]).toBeUndefined();
    // A client that offers none connects as always.
    const c = await TestClient.connect(ts.url);
    expect(c.ws.protocol).toBe("");
    c.ws.terminate();
  });
});
