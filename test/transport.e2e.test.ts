/** The WebSocket transport: health endpoints, frame limits, hostile input, abrupt disconnects. */
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import pino from "pino";
import WebSocket from "ws";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { BACKENDS } from "./support/db.js";
import { startTestServer, testLogger, type TestServer } from "./support/server.js";
import { startServer } from "../src/server.js";
import { TestClient } from "./support/client.js";
import { untilItHolds } from "./support/retry.js";

const KiB = 1024;


/** A request round-trip that proves a connection (and the server behind it) still works. */
async function works(c: TestClient): Promise<void> {
  const res = await c.request("thread/list", { limit: 1 });
  expect(Array.isArray(res.data)).toBe(true);
}

async function healthy(ts: TestServer): Promise<void> {
  const health = await fetch(`${ts.httpUrl}/healthz`);
  expect(health.status).toBe(200);
  const ready = await fetch(`${ts.httpUrl}/readyz`);
  expect(ready.status).toBe(200);
  const fresh = await TestClient.initialized(ts.url);
  await works(fresh);
  await fresh.close();
}

describe.each(BACKENDS)("WebSocket transport with a 64 KiB frame limit (%s)", (backend) => {
  let ts: TestServer;
  const clients: TestClient[] = [];
  const initialized = async () => {
    const c = await TestClient.initialized(ts.url);
    clients.push(c);
    return c;
  };

  /** The server's log lines at warn and above (client misbehaviour must not show up as errors). */
  const logged: Array<{ level: number; msg: string }> = [];

  beforeAll(async () => {
    const log = pino({ level: "warn" }, { write: (line: string) => void logged.push(JSON.parse(line)) });
    ts = await startTestServer(backend, { maxFrameBytes: 64 * KiB, log });
  });
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close()));
  });
  afterAll(async () => {
    await ts?.close();
  });

  it("answers GET /healthz and GET /readyz with 200 once started", async () => {
    const health = await fetch(`${ts.httpUrl}/healthz`);
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ status: "ok" });
    const ready = await fetch(`${ts.httpUrl}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: "ready" });
    expect((await fetch(`${ts.httpUrl}/no-such-path`)).status).toBe(404);
  });

  it("closes only the connection that sent an oversized frame, with 1009", async () => {
    const big = await initialized();
    const bystander = await initialized();
    // Just under the limit is fine.
    const nearLimit = { jsonrpc: "2.0", id: "near", method: "thread/list", params: { searchTerm: "x".repeat(60 * KiB) } };
    expect(Buffer.byteLength(JSON.stringify(nearLimit))).toBeLessThan(64 * KiB);
    big.send(nearLimit);
    expect((await big.waitFor((f) => f.id === "near")).result.data).toEqual([]);

    big.send({ jsonrpc: "2.0", id: "big", method: "thread/list", params: { searchTerm: "x".repeat(65 * KiB) } });
    await big.closed;
    expect(big.closeCode).toBe(1009);
    expect(big.frames.find((f) => f.id === "big")).toBeUndefined();
    await works(bystander);
    await healthy(ts);
    // Logged as a warning about that client, not as a server error with a stack trace.
    expect(logged.filter((l) => l.level >= 50)).toEqual([]);
    expect(logged.some((l) => l.level === 40 && /websocket/.test(l.msg))).toBe(true);
  });

  it("answers binary frames with -32600 and keeps the connection", async () => {
    const c = await initialized();
    c.ws.send(Buffer.from(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "thread/list", params: {} })), { binary: true });
    const err = await c.waitFor((f) => f.error?.code === -32600);
    expect(err).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32600 } });
    expect(err.error.message).toMatch(/binary/);
    c.ws.send(randomBytes(4 * KiB), { binary: true });
    await c.waitFor(() => c.frames.filter((f) => f.error?.code === -32600).length === 2);
    await works(c);
  });
});

describe.each(BACKENDS)("WebSocket transport under hostile input (%s)", (backend) => {
  let ts: TestServer;
  const clients: TestClient[] = [];
  /** An initialized client whose `frames` hold only what came after the handshake. */
  const initialized = async () => {
    const c = await TestClient.initialized(ts.url);
    c.frames.length = 0;
    clients.push(c);
    return c;
  };
  let bystander: TestClient;

  beforeAll(async () => {
    ts = await startTestServer(backend);
    bystander = await TestClient.initialized(ts.url);
  });
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close()));
    // Whatever a test sent, another connection keeps working and the server stays healthy.
    await works(bystander);
    await healthy(ts);
  });
  afterAll(async () => {
    await bystander?.close();
    await ts?.close();
  });

  it("answers invalid JSON of every kind with -32700 and stays usable", async () => {
    const c = await initialized();
    const garbage = ["{", "}", "{]", '{"id":1,"method":}', "undefined", "NaN", "{'id':1}", '{"a":1}}', "\u0000", "   ", "\ufeff{}", '{"id":1,"method":"thread/list"'];
    for (const text of garbage) c.send(text);
    await c.waitFor(() => c.frames.filter((f) => f.error?.code === -32700).length === garbage.length);
    expect(c.frames.every((f) => f.id === null && f.jsonrpc === "2.0")).toBe(true);
    await works(c);
  });

  it("survives deeply nested JSON: as a message, and inside params that reach the store", async () => {
    const c = await initialized();
    const depth = 100_000;
    c.send("[".repeat(depth) + "]".repeat(depth));
    c.send('{"a":'.repeat(depth) + "1" + "}".repeat(depth));
    await c.waitFor(() => c.frames.filter((f) => f.id === null && f.error).length === 2);
    for (const f of c.frames) expect([-32700, -32600]).toContain(f.error.code);

    // thread/start's `config` is free-form JSON that is stored: deep values are refused up front.
    for (const [i, d] of [1_000, 10_000, depth].entries()) {
      const id = `deep-${i}`;
      c.send(`{"jsonrpc":"2.0","id":"${id}","method":"thread/start","params":{"config":${'{"a":'.repeat(d)}1${"}".repeat(d)}}}`);
      const f = await c.waitFor((fr) => fr.id === id);
      // Nesting is bounded by the params schema: a clear -32602, nothing stored.
      expect(f.error.code).toBe(-32602);
      expect(f.error.message).toMatch(/nested deeper/);
      expect(JSON.stringify(f)).not.toMatch(/\bat .*\.(ts|js):\d+/);
    }
    await works(c);
    // The store still takes writes.
    expect((await c.request("thread/start", {})).thread.id).toEqual(expect.any(String));
  });

  it("handles 1 MB string values in requests", async () => {
    const c = await initialized();
    const mb = "é".repeat(512 * KiB); // 1 MiB of UTF-8
    const list = await c.requestRaw("thread/list", { searchTerm: mb });
    expect(list.result.data).toEqual([]);
    const id = (await c.request("thread/start", { cwd: `/tmp/${"d".repeat(1000 * KiB)}` })).thread.id;
    // Names are capped by the schema: an oversized one is invalid params, not a crash.
    const name = await c.requestRaw("thread/name/set", { threadId: id, name: mb });
    expect(name.error.code).toBe(-32602);
    const unknown = await c.requestRaw(`method/${"m".repeat(1000 * KiB)}`, {});
    expect(unknown.error.code).toBe(-32601);
    const initAgain = await c.requestRaw("initialize", { clientInfo: { name: mb, version: mb } });
    expect(initAgain.error.code).toBe(-32600);
    await works(c);
  });

  it("survives random bytes as text and as binary frames", async () => {
    const binary = await initialized();
    for (let i = 0; i < 20; i++) binary.ws.send(randomBytes(1 + i * 97), { binary: true });
    await binary.waitFor(() => binary.frames.filter((f) => f.error?.code === -32600).length === 20);

    // Random bytes in a text frame are (almost surely) invalid UTF-8: ws closes that connection
    // with 1007 before our code sees it. If they happen to decode, we answer with an error.
    const text = await initialized();
    text.ws.send(Buffer.from([0xff, 0xfe, 0xfd, ...randomBytes(64)]), { binary: false });
    await text.closed;
    expect(text.closeCode).toBe(1007);

    const printable = await initialized();
    for (let i = 0; i < 20; i++) printable.send(randomBytes(50 + i).toString("latin1"));
    await printable.waitFor(() => printable.frames.filter((f) => f.error).length === 20);
    expect(printable.frames.every((f) => f.id === null)).toBe(true);
  });

  it("stays healthy when many clients connect and vanish abruptly, mid-request", async () => {
    const n = 40;
    const clientsGone = Array.from({ length: n }, async (_, i) => {
      const ws = new WebSocket(ts.url, { perMessageDeflate: false });
      // Every fourth client waits until its thread exists; the others vanish at once.
      const started = new Promise<void>((resolve) => {
        if (i % 4 !== 2) return resolve();
        ws.on("message", (data) => {
          if (JSON.parse(data.toString()).id === 2) resolve();
        });
      });
      await new Promise<void>((resolve, reject) => {
        ws.once("open", () => resolve());
        ws.once("error", reject);
      });
      if (i % 2 === 0) {
        ws.send(JSON.stringify({ id: 1, method: "initialize", params: { clientInfo: { name: `c${i}`, version: "1" } } }));
        ws.send(JSON.stringify({ id: 2, method: "thread/start", params: { ephemeral: i % 4 === 0, cwd: "/abrupt" } }));
        ws.send(JSON.stringify({ id: 3, method: "thread/list", params: {} }));
      }
      await started;
      ws.terminate();
    });
    await Promise.all(clientsGone);

    // Every thread those clients loaded is unloaded again once the server sees the sockets gone.
    const probe = await initialized();
    await untilItHolds(async () => expect((await probe.request("thread/loaded/list", {})).data).toEqual([]));
    // No ephemeral thread outlives its connection; durable ones stay listed.
    const listed = (await probe.request("thread/list", { cwd: "/abrupt", limit: 100 })).data;
    expect(listed).toHaveLength(n / 4);
    expect(listed.every((t: { ephemeral: boolean }) => !t.ephemeral)).toBe(true);
  });
});

describe("readiness while the store is not open yet", () => {
  it("answers /healthz 200 but /readyz 503 and refuses WebSocket upgrades; a failed start releases the port", async () => {
    // A "database" that accepts connections and never answers: the store's first query waits.
    const held = new Set<net.Socket>();
    const silent = net.createServer((s) => held.add(s));
    await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
    const dbPort = (silent.address() as net.AddressInfo).port;
    const probe = net.createServer();
    await new Promise<void>((r) => probe.listen(0, "127.0.0.1", r));
    const port = (probe.address() as net.AddressInfo).port;
    await new Promise((r) => probe.close(r));
    const home = await mkdtemp(path.join(os.tmpdir(), "aas-ready-"));
    try {
      const starting = startServer({
        listen: `ws://127.0.0.1:${port}`,
        databaseUrl: `postgres://nobody@127.0.0.1:${dbPort}/nothing`,
        home,
        modelProvider: "openai",
        model: "m",
        maxFrameBytes: 64 * KiB,
        log: testLogger(),
      });
      const outcome = starting.then(
        () => "started",
        (err: Error) => err,
      );
      const http = `http://127.0.0.1:${port}`;
      await untilItHolds(async () => expect((await fetch(`${http}/healthz`)).status).toBe(200));
      const ready = await fetch(`${http}/readyz`);
      expect(ready.status).toBe(503);
      expect(await ready.json()).toEqual({ status: "starting" });
      const refused = await new Promise<number>((resolve, reject) => {
        const ws = new WebSocket(`ws://127.0.0.1:${port}`);
        ws.once("unexpected-response", (_req, res) => resolve(res.statusCode ?? 0));
        ws.once("open", () => reject(new Error("upgrade accepted before the store was ready")));
        ws.once("error", () => {});
      });
      expect(refused).toBe(503);

      // The database goes away: start-up fails, and the port is closed again.
      for (const s of held) s.destroy();
      await new Promise((r) => silent.close(r));
      expect(await outcome).toBeInstanceOf(Error);
      await expect(fetch(`${http}/healthz`)).rejects.toThrow();
    } finally {
      for (const s of held) s.destroy();
      silent.close();
      await rm(home, { recursive: true, force: true });
    }
  });
});
