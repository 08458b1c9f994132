/**
 * DNS-rebinding protection over real connections: without an auth token the server answers only
 * requests whose Host is a loopback name or address with its own port (403 otherwise, before any
 * route or JSON-RPC) — WebSocket upgrades and plain HTTP alike. With a token, any Host is accepted
 * (the token is the protection).
 */
import http from "node:http";
import net from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { loopbackHostAllowed } from "../src/transport/websocket.js";
import { BACKENDS } from "./support/db.js";
import { TestClient } from "./support/client.js";
import { startTestServer, type TestServer } from "./support/server.js";
import { upgradeStatus } from "./support/http.js";

const backend = BACKENDS[BACKENDS.length - 1]!;
const TOKEN = "test-token-0123456789abcdef";

let ts: TestServer | undefined;
const clients: TestClient[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) await c.close().catch(() => {});
  await ts?.close();
  ts = undefined;
});

const portOf = (url: string) => Number(new URL(url).port);

/** A plain GET to 127.0.0.1:port with an explicit Host header. */
function get(port: number, path: string, host: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: "127.0.0.1", port, path, method: "GET", headers: { ...headers, host }, agent: false }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (d) => (body += d));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

/** Raw bytes over TCP (requests node:http would not send, e.g. without Host); the status code. */
function rawStatus(port: number, request: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, "127.0.0.1", () => socket.write(request));
    let data = "";
    socket.setEncoding("utf8");
    socket.on("data", (d) => (data += d));
    socket.on("error", reject);
    socket.on("close", () => {
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(data);
      if (m) resolve(Number(m[1]));
      else reject(new Error(`no HTTP status in ${JSON.stringify(data.slice(0, 200))}`));
    });
  });
}

describe("loopbackHostAllowed", () => {
  it("accepts loopback names and addresses with the port, nothing else", () => {
    for (const host of ["localhost:4500", "LocalHost:4500", "127.0.0.1:4500", "127.1.2.3:4500", "[::1]:4500"]) expect(loopbackHostAllowed(host, 4500), host).toBe(true);
    expect(loopbackHostAllowed("localhost", 80)).toBe(true); // default port omitted
    for (const host of [
      undefined,
      "",
      "evil.example:4500",
      "localhost",
      "localhost:4501",
      "localhost:",
      "localhost.:4500",
      "app.localhost:4500",
      "localhost.evil.example:4500",
      "127.0.0.1.evil.example:4500",
      "127.0.0.256:4500",
      "127.1:4500",
      "0.0.0.0:4500",
      "10.0.0.1:4500",
      "[::ffff:127.0.0.1]:4500",
      "[0:0:0:0:0:0:0:1]:4500",
      "::1:4500",
      "user@localhost:4500",
      "localhost:4500@evil.example",
      "localhost:4500, evil.example:4500",
      " localhost:4500",
    ])
      expect(loopbackHostAllowed(host, 4500), String(host)).toBe(false);
  });
});

describe("without an auth token", () => {
  it("refuses a WebSocket upgrade for a foreign Host with 403, even with a matching Origin", async () => {
    ts = await startTestServer(backend);
    const port = portOf(ts.url);
    const evil = `evil.example:${port}`;
    expect(await upgradeStatus(ts.url, { host: evil, origin: `http://${evil}` })).toBe(403);
    expect(await upgradeStatus(ts.url, { host: evil })).toBe(403);
    // Wrong port, or none, on a loopback name: refused too.
    expect(await upgradeStatus(ts.url, { host: `127.0.0.1:${port + 1}` })).toBe(403);
    expect(await upgradeStatus(ts.url, { host: "localhost" })).toBe(403);
    expect(await upgradeStatus(ts.url, { host: `localhost.:${port}` })).toBe(403);
  });

  it("refuses every plain HTTP request for a foreign Host with a JSON 403 (playground, files, probes, metrics)", async () => {
    ts = await startTestServer(backend);
    const port = portOf(ts.url);
    for (const path of ["/", "/app.js", "/style.css", "/healthz", "/readyz", "/metrics", "/no-such-page"]) {
      const res = await get(port, path, `evil.example:${port}`);
      expect(res.status, path).toBe(403);
      expect(JSON.parse(res.body).error, path).toMatch(/host not allowed/);
      expect((await get(port, path, `localhost:${port + 1}`)).status, path).toBe(403);
    }
    // No Host at all: HTTP/1.0 gets our 403; HTTP/1.1 is refused by node itself (400).
    expect(await rawStatus(port, "GET /healthz HTTP/1.0\r\n\r\n")).toBe(403);
    expect(await rawStatus(port, "GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n")).toBeGreaterThanOrEqual(400);
    expect(await rawStatus(port, `GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: close\r\n\r\n`)).toBe(200);
  });

  it("accepts localhost, 127.x.y.z and [::1] with the listening port (upgrade and GET)", async () => {
    ts = await startTestServer(backend);
    const port = portOf(ts.url);
    for (const host of [`localhost:${port}`, `LOCALHOST:${port}`, `127.0.0.1:${port}`, `127.9.8.7:${port}`, `[::1]:${port}`]) {
      expect(await upgradeStatus(ts.url, { host }), host).toBe(101);
      expect((await get(port, "/healthz", host)).status, host).toBe(200);
      expect((await get(port, "/readyz", host)).status, host).toBe(200);
      expect((await get(port, "/", host)).status, host).toBe(200);
    }
    // The playground's own origin (page and socket on the same loopback host) still connects,
    // and the Origin check still refuses a foreign page on a loopback Host.
    expect(await upgradeStatus(ts.url, { host: `localhost:${port}`, origin: `http://localhost:${port}` })).toBe(101);
    expect(await upgradeStatus(ts.url, { host: `127.0.0.1:${port}`, origin: `http://127.0.0.1:${port}` })).toBe(101);
    expect(await upgradeStatus(ts.url, { host: `127.0.0.1:${port}`, origin: "http://evil.example" })).toBe(403);
    // A client that lets its library set Host (ws://127.0.0.1:PORT) speaks JSON-RPC as usual.
    const c = await TestClient.initialized(ts.url);
    clients.push(c);
    expect((await c.request("thread/start", {})).thread.id).toEqual(expect.any(String));
  });

  it("accepts clients of a server listening on [::1]", async (ctx) => {
    const v6 = await new Promise<boolean>((resolve) => {
      const s = net.createServer();
      s.once("error", () => resolve(false));
      s.listen(0, "::1", () => s.close(() => resolve(true)));
    });
    if (!v6) ctx.skip();
    ts = await startTestServer(backend, { listen: "ws://[::1]:0" });
    expect(ts.url).toMatch(/^ws:\/\/\[::1\]:\d+$/);
    const port = portOf(ts.url);
    expect(await upgradeStatus(ts.url)).toBe(101); // Host: [::1]:PORT
    expect(await upgradeStatus(ts.url, { host: `evil.example:${port}` })).toBe(403);
    const c = await TestClient.initialized(ts.url);
    clients.push(c);
  });
});

describe("with an auth token", () => {
  it("accepts any Host when the token is right (the token is the protection)", async () => {
    ts = await startTestServer(backend, { authToken: TOKEN });
    const port = portOf(ts.url);
    const host = `app.example.com:${port}`;
    expect(await upgradeStatus(ts.url, { host, authorization: `Bearer ${TOKEN}` })).toBe(101);
    expect(await upgradeStatus(ts.url, { host, origin: `https://${host}`, authorization: `Bearer ${TOKEN}` })).toBe(101);
    expect(await upgradeStatus(`${ts.url}/?token=${TOKEN}`, { host })).toBe(101);
    expect(await upgradeStatus(ts.url, { host })).toBe(401);
    expect(await upgradeStatus(ts.url, { host, authorization: "Bearer wrong-token-0123456789" })).toBe(401);
    expect((await get(port, "/healthz", host)).status).toBe(200);
    expect((await get(port, "/", host)).status).toBe(200);
    expect((await get(port, "/metrics", host)).status).toBe(401);
    expect((await get(port, "/metrics", host, { authorization: `Bearer ${TOKEN}` })).status).toBe(200);
  });
});
