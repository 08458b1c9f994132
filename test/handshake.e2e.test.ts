/** The initialize handshake and the JSON-RPC wire rules, over a real WebSocket. */
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { BACKENDS } from "./support/db.js";
import { startTestServer, type TestServer } from "./support/server.js";
import { TestClient, type Frame } from "./support/client.js";

const clientInfo = { name: "handshake-test", title: null, version: "9.8.7" };

describe.each(BACKENDS)("handshake and wire rules over WebSocket (%s)", (backend) => {
  let ts: TestServer;
  const clients: TestClient[] = [];
  const connect = async () => {
    const c = await TestClient.connect(ts.url);
    clients.push(c);
    return c;
  };
  const initialized = async (capabilities: Record<string, unknown> = {}) => {
    const c = await TestClient.initialized(ts.url, capabilities);
    clients.push(c);
    return c;
  };
  /** A cwd no other test uses, so thread/list can be filtered to this test's threads. */
  const uniqueCwd = () => path.join(ts.home, `cwd-${Math.random().toString(36).slice(2)}`);

  beforeAll(async () => {
    ts = await startTestServer(backend);
  });
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close()));
  });
  afterAll(async () => {
    await ts?.close();
  });

  it("refuses every request before initialize with -32600 'Not initialized' and does nothing", async () => {
    const c = await connect();
    const cwd = uniqueCwd();
    for (const [method, params] of [
      ["thread/start", { cwd }],
      ["thread/list", {}],
      ["thread/read", { threadId: "x" }],
      ["no/such/method", {}],
    ] as const) {
      const f = await c.requestRaw(method, params);
      expect(f).toEqual({ jsonrpc: "2.0", id: f.id, error: { code: -32600, message: "Not initialized" } });
    }
    // A notification before initialize is not answered either way.
    c.notify("initialized", {});
    await c.request("initialize", { clientInfo });
    expect((await c.request("thread/list", { cwd })).data).toEqual([]);
    expect(c.frames.filter((f) => f.error && f.id === null)).toEqual([]);
  });

  it("answers a second initialize with -32600 'Already initialized' and keeps the session", async () => {
    const c = await initialized();
    const again = await c.requestRaw("initialize", { clientInfo });
    expect(again.error).toEqual({ code: -32600, message: "Already initialized" });
    // Also when the second initialize is invalid: the handshake state wins over params validation.
    const invalid = await c.requestRaw("initialize", {});
    expect(invalid.error).toMatchObject({ code: -32600, message: "Already initialized" });
    const list = await c.request("thread/list", {});
    expect(Array.isArray(list.data)).toBe(true);
  });

  it("returns {userAgent, codexHome, platformFamily, platformOs} with codexHome = the server home", async () => {
    const c = await connect();
    const f = await c.requestRaw("initialize", { clientInfo, capabilities: null });
    expect(f.jsonrpc).toBe("2.0");
    expect(Object.keys(f.result).sort()).toEqual(["codexHome", "platformFamily", "platformOs", "userAgent"]);
    expect(f.result.codexHome).toBe(ts.home);
    expect(path.isAbsolute(f.result.codexHome)).toBe(true);
    expect(f.result.platformFamily).toBe(process.platform === "win32" ? "windows" : "unix");
    expect(f.result.platformOs).toBe(process.platform === "darwin" ? "macos" : process.platform);
    expect(f.result.userAgent).toMatch(/^agent-app-server\/\d+\.\d+\.\d+/);
    expect(f.result.userAgent).toContain("handshake-test/9.8.7");
    expect(f.result.userAgent).toContain(os.platform());
  });

  it("rejects invalid initialize params with -32602 (issues in data) and accepts a corrected retry", async () => {
    const c = await connect();
    const bad = await c.requestRaw("initialize", { clientInfo: { name: "x" }, capabilities: { optOutNotificationMethods: "thread/started" } });
    expect(bad.error.code).toBe(-32602);
    const paths = bad.error.data.issues.map((i: Frame) => i.path.join("."));
    expect(paths).toEqual(expect.arrayContaining(["clientInfo.version", "capabilities.optOutNotificationMethods"]));
    const missing = await c.requestRaw("initialize", {});
    expect(missing.error.code).toBe(-32602);
    expect(missing.error.data.issues[0].path).toEqual(["clientInfo"]);
    const ok = await c.requestRaw("initialize", { clientInfo });
    expect(ok.result.codexHome).toBe(ts.home);
  });

  it("suppresses exactly the opted-out notification, for that connection only", async () => {
    const optedOut = await initialized({ optOutNotificationMethods: ["thread/started"] });
    const normal = await initialized();

    const a = (await optedOut.request("thread/start", { cwd: uniqueCwd() })).thread.id;
    const b = (await normal.request("thread/start", { cwd: uniqueCwd() })).thread.id;
    await normal.waitForNotification("thread/started", (p) => p.thread.id === b);

    // Other notifications still reach the opted-out connection; once the rename (recorded and
    // published after thread/started in seq order) arrives, thread/started would have too.
    await optedOut.request("thread/name/set", { threadId: a, name: "renamed" });
    const renamed = await optedOut.waitForNotification("thread/name/updated", (p) => p.threadId === a);
    expect(renamed.params.seq).toBe(2);
    expect(optedOut.notifications("thread/started")).toEqual([]);

    await normal.request("thread/name/set", { threadId: b, name: "renamed too" });
    await normal.waitForNotification("thread/name/updated", (p) => p.threadId === b);
    expect(normal.notifications().map((f) => f.method)).toEqual(["thread/started", "thread/name/updated"]);
  });

  describe("wire rules on a real socket", () => {
    it("answers a parse error with id null and keeps the connection open", async () => {
      const c = await initialized();
      c.send('{"id": 1, "method": "thread/list"');
      const err = await c.waitFor((f) => f.error?.code === -32700);
      expect(err).toEqual({ jsonrpc: "2.0", id: null, error: { code: -32700, message: "Parse error" } });
      expect((await c.requestRaw("thread/list", {})).result).toBeDefined();
    });

    it('accepts requests without "jsonrpc" and keeps string and number ids apart', async () => {
      const c = await connect();
      c.send({ id: "1", method: "initialize", params: { clientInfo } });
      const init = await c.waitFor((f) => f.id === "1");
      expect(init.jsonrpc).toBe("2.0");
      expect(init.result.codexHome).toBe(ts.home);
      c.send({ id: 1, method: "thread/list", params: { limit: 1 } });
      c.send({ id: "1x", method: "thread/list", params: { limit: 0 } });
      const num = await c.waitFor((f) => f.id === 1);
      const str = await c.waitFor((f) => f.id === "1x");
      expect(num).toMatchObject({ jsonrpc: "2.0", result: { data: expect.any(Array) } });
      expect(str).toMatchObject({ jsonrpc: "2.0", error: { code: -32602 } });
    });

    it("rejects ids that are not a string, number or null with -32600 and id null", async () => {
      const c = await initialized();
      for (const text of ['{"id":true,"method":"thread/list"}', '{"id":{},"method":"thread/list"}', '{"id":[1],"method":"thread/list"}']) {
        const before = c.frames.length;
        c.send(text);
        await c.waitFor((f) => c.frames.indexOf(f) >= before && f.error?.code === -32600);
      }
      const errors = c.frames.filter((f) => f.error?.code === -32600);
      expect(errors).toHaveLength(3);
      expect(errors.every((f) => f.id === null && f.jsonrpc === "2.0")).toBe(true);
    });

    it("accepts id null, fractions and integers beyond 2^53, echoing each id's exact text", async () => {
      const c = await initialized();
      for (const idText of ["null", "1.5", "9007199254740993", "-123456789012345678901234567890"]) {
        const answered = new Promise<string>((resolve) => c.ws.once("message", (data) => resolve(data.toString())));
        c.send(`{"jsonrpc":"2.0","id":${idText},"method":"thread/list","params":{"limit":1}}`);
        expect(await answered).toMatch(new RegExp(`^\\{"jsonrpc":"2.0","id":${idText.replace(".", "\\.")},"result":\\{"data":`));
      }
    });

    it("answers an unknown method with -32601 after initialize", async () => {
      const c = await initialized();
      const f = await c.requestRaw("thread/frobnicate", {}, "q");
      expect(f).toEqual({ jsonrpc: "2.0", id: "q", error: { code: -32601, message: "Method not found" } });
    });

    it("answers a batch with an array of only the requests' responses; an empty batch with one -32600", async () => {
      const c = await initialized();
      const cwd = uniqueCwd();
      c.send([
        { id: "b1", method: "thread/start", params: { cwd } },
        { method: "initialized", params: {} },
        { id: "b2", method: "thread/list", params: { limit: 0 } },
      ]);
      const batch = await c.waitFor((f) => f.id === "b2");
      const b1 = c.frames.find((f) => f.id === "b1")!;
      expect(b1.result.thread.cwd).toBe(cwd);
      expect(batch.error.code).toBe(-32602);

      const raw: unknown[] = [];
      c.ws.on("message", (data) => raw.push(JSON.parse(data.toString())));
      c.send([{ id: "single", method: "thread/list", params: { cwd } }]);
      await c.waitFor((f) => f.id === "single");
      c.send("[]");
      await c.waitFor((f) => f.id === null && f.error?.code === -32600);
      // The raw frames: the one-request batch came back as an array; the empty batch as an object.
      const single = raw.find((r) => Array.isArray(r)) as Frame[];
      expect(single).toHaveLength(1);
      expect(single[0]).toMatchObject({ jsonrpc: "2.0", id: "single", result: { data: [{ cwd }] } });
      expect(raw.find((r) => !Array.isArray(r) && (r as Frame).error)).toMatchObject({ id: null, error: { code: -32600 } });
    });

    it("answers null, numbers and strings sent as messages with -32600", async () => {
      const c = await initialized();
      for (const text of ["null", "17", '"thread/list"']) c.send(text);
      await c.waitFor(() => c.frames.filter((f) => f.error?.code === -32600).length >= 3);
      const errs = c.frames.filter((f) => f.error?.code === -32600);
      expect(errs).toHaveLength(3);
      expect(errs.every((f) => f.id === null)).toBe(true);
    });
  });
});
