import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { BACKENDS } from "./support/db.js";
import { startTestServer, type TestServer } from "./support/server.js";
import { TestClient } from "./support/client.js";

describe.each(BACKENDS)("thread API over WebSocket (%s)", (backend) => {
  let ts: TestServer;
  let client: TestClient;
  beforeEach(async () => {
    ts = await startTestServer(backend);
    client = await TestClient.initialized(ts.url);
  });
  afterEach(async () => {
    await client?.close();
    await ts?.close();
  });

  it("starts a thread: response first, then thread/started with seq 1 and emittedAtMs", async () => {
    const res = await client.request("thread/start", { cwd: ts.home, model: "m1", approvalPolicy: "never", sandbox: "read-only" });
    expect(res.thread).toMatchObject({ cwd: ts.home, model: "m1", modelProvider: "openai", ephemeral: false, status: { type: "idle" }, turns: [] });
    expect(res).toMatchObject({ model: "m1", approvalPolicy: "never", sandbox: { type: "readOnly" } });
    const started = await client.waitForNotification("thread/started");
    const responseIndex = client.frames.findIndex((f) => f.result?.thread?.id === res.thread.id);
    expect(client.frames.indexOf(started)).toBeGreaterThan(responseIndex);
    expect(started.params.thread.id).toBe(res.thread.id);
    expect(started.params.seq).toBe(1);
    expect(started.jsonrpc).toBe("2.0");
    expect(typeof started.emittedAtMs).toBe("number");
  });

  it("lists, reads, renames, archives and unarchives threads", async () => {
    const a = (await client.request("thread/start", {})).thread.id;
    const b = (await client.request("thread/start", {})).thread.id;
    let list = await client.request("thread/list", {});
    expect(list.data.map((t: any) => t.id)).toEqual([b, a]);

    await client.request("thread/name/set", { threadId: a, name: "Fix the parser" });
    const renamed = await client.waitForNotification("thread/name/updated");
    expect(renamed.params).toMatchObject({ threadId: a, threadName: "Fix the parser" });
    expect((await client.request("thread/read", { threadId: a })).thread.name).toBe("Fix the parser");

    await client.request("thread/archive", { threadId: a });
    await client.waitForNotification("thread/archived", (p) => p.threadId === a);
    list = await client.request("thread/list", {});
    expect(list.data.map((t: any) => t.id)).toEqual([b]);
    list = await client.request("thread/list", { archived: true });
    expect(list.data.map((t: any) => t.id)).toEqual([a]);

    const un = await client.request("thread/unarchive", { threadId: a });
    expect(un.thread.id).toBe(a);
    await client.waitForNotification("thread/unarchived", (p) => p.threadId === a);
    const seqs = client.notifications().filter((f) => f.params.threadId === a || f.params.thread?.id === a).map((f) => f.params.seq);
    expect(seqs).toEqual([1, 2, 3, 4]);
  });

  it("answers an unknown thread id with -32600 naming the id", async () => {
    for (const method of ["thread/read", "thread/archive", "thread/unarchive"]) {
      const f = await client.requestRaw(method, { threadId: "no-such-thread" });
      expect(f.error).toMatchObject({ code: -32600, message: "thread not found: no-such-thread" });
    }
    const f = await client.requestRaw("thread/name/set", { threadId: "nope", name: "x" });
    expect(f.error.code).toBe(-32600);
  });

  it("rejects invalid params with -32602 and the zod issues in data", async () => {
    const f = await client.requestRaw("thread/start", { approvalPolicy: "sometimes" });
    expect(f.error.code).toBe(-32602);
    expect(f.error.data.issues[0].path).toEqual(["approvalPolicy"]);
    const g = await client.requestRaw("thread/list", { limit: 101 });
    expect(g.error.code).toBe(-32602);
    const h = await client.requestRaw("thread/list", { cursor: "garbage" });
    expect(h.error.code).toBe(-32602);
    // Nothing was created by the rejected start.
    expect((await client.request("thread/list", {})).data).toEqual([]);
  });
});
