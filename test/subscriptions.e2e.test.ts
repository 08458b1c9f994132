/** thread/loaded/list, thread/unsubscribe and who receives a thread's notifications. */
import WebSocket from "ws";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { BACKENDS } from "./support/db.js";
import { startTestServer, type TestServer } from "./support/server.js";
import { TestClient } from "./support/client.js";
import { untilItHolds } from "./support/retry.js";


/**
 * Everything the server sent `client` before this call has arrived once this resolves: the
 * server writes a connection's frames in order, so a response is a barrier.
 */
async function barrier(client: TestClient): Promise<void> {
  await client.request("thread/loaded/list", {});
}

describe.each(BACKENDS)("loaded threads and subscriptions (%s)", (backend) => {
  let ts: TestServer;
  const clients: TestClient[] = [];
  const client = async () => {
    const c = await TestClient.initialized(ts.url);
    clients.push(c);
    return c;
  };
  const loaded = async (c: TestClient, params: Record<string, unknown> = {}): Promise<string[]> =>
    (await c.request("thread/loaded/list", params)).data;

  beforeAll(async () => {
    ts = await startTestServer(backend);
  });
  afterEach(async () => {
    // Closing every client unloads every (non-running) thread, so each test starts with none loaded.
    await Promise.all(clients.splice(0).map((c) => c.close()));
    const probe = await TestClient.initialized(ts.url);
    await untilItHolds(async () => expect(await loaded(probe)).toEqual([]));
    await probe.close();
  });
  afterAll(async () => {
    await ts?.close();
  });

  it("thread/loaded/list lists the threads loaded in this process, sorted, with cursor paging", async () => {
    const a = await client();
    expect(await a.request("thread/loaded/list", {})).toEqual({ data: [], nextCursor: null });
    const started: string[] = [];
    for (let i = 0; i < 5; i++) started.push((await a.request("thread/start", {})).thread.id);
    const sorted = [...started].sort();
    // Visible from any connection: "loaded" is a property of the process.
    const b = await client();
    expect(await loaded(b)).toEqual(sorted);

    const pages: string[][] = [];
    let cursor: string | null = null;
    do {
      const res: { data: string[]; nextCursor: string | null } = await b.request("thread/loaded/list", { limit: 2, cursor });
      pages.push(res.data);
      cursor = res.nextCursor;
    } while (cursor !== null && pages.length < 10);
    expect(pages).toEqual([sorted.slice(0, 2), sorted.slice(2, 4), sorted.slice(4)]);

    expect(await loaded(b, { limit: 5 })).toEqual(sorted);
    expect((await b.request("thread/loaded/list", { limit: 5 })).nextCursor).toBeNull();
    for (const limit of [0, -1, 1.5]) expect((await b.requestRaw("thread/loaded/list", { limit })).error?.code).toBe(-32602);
  });

  it("thread/unsubscribe answers notLoaded, notSubscribed and unsubscribed, and unloads unwatched threads", async () => {
    const a = await client();
    const b = await client();
    const id = (await a.request("thread/start", {})).thread.id;

    expect(await b.request("thread/unsubscribe", { threadId: "no-such-thread" })).toEqual({ status: "notLoaded" });
    expect(await b.request("thread/unsubscribe", { threadId: id })).toEqual({ status: "notSubscribed" });
    expect(await loaded(a)).toEqual([id]);
    expect(await a.request("thread/unsubscribe", { threadId: id })).toEqual({ status: "unsubscribed" });
    expect(await loaded(a)).toEqual([]);
    expect(await a.request("thread/unsubscribe", { threadId: id })).toEqual({ status: "notLoaded" });

    // Unloaded, not gone.
    expect((await b.request("thread/read", { threadId: id })).thread.status).toEqual({ type: "notLoaded" });
    const [listed] = (await b.request("thread/list", { includedThreadIds: [id] })).data;
    expect(listed.status).toEqual({ type: "notLoaded" });
    expect((await b.requestRaw("thread/unsubscribe", {})).error?.code).toBe(-32602);
  });

  it("thread/unsubscribe right after the thread/resume response unsubscribes (the subscription counts from the response)", async () => {
    const a = await client();
    const id = (await a.request("thread/start", {})).thread.id;
    await a.request("thread/unsubscribe", { threadId: id });
    const b = await client();
    // The resume's subscription step runs after its response goes out; an unsubscribe sent as
    // soon as the response arrives must still find (and cancel) it, and the thread must unload.
    for (let i = 0; i < 20; i++) {
      await b.request("thread/resume", { threadId: id, ...(i % 2 ? { afterSeq: 0 } : {}) });
      expect(await b.request("thread/unsubscribe", { threadId: id })).toEqual({ status: "unsubscribed" });
    }
    await untilItHolds(async () => expect(await loaded(b)).toEqual([]));
    // A closed connection's pending subscription is dropped too.
    const c = await client();
    await c.request("thread/resume", { threadId: id });
    await c.close();
    await untilItHolds(async () => expect(await loaded(b)).toEqual([]));
  });

  it("an unsubscribed connection stops receiving the thread's notifications", async () => {
    const a = await client();
    const id = (await a.request("thread/start", {})).thread.id;
    await a.waitForNotification("thread/started");
    await a.request("thread/unsubscribe", { threadId: id });
    const b = await client();
    await b.request("thread/name/set", { threadId: id, name: "renamed by b" });
    await b.waitForNotification("thread/name/updated", (p) => p.threadId === id);
    await barrier(a);
    expect(a.notifications().map((f) => f.method)).toEqual(["thread/started"]);
  });

  it("a connection that did not start a thread receives none of its notifications", async () => {
    const a = await client();
    const b = await client();
    const id = (await a.request("thread/start", {})).thread.id;
    await a.request("thread/name/set", { threadId: id, name: "only for a" });
    await a.waitForNotification("thread/name/updated", (p) => p.threadId === id);
    await barrier(b);
    expect(b.notifications()).toEqual([]);
    expect(a.notifications().map((f) => [f.method, f.params.seq])).toEqual([
      ["thread/started", 1],
      ["thread/name/updated", 2],
    ]);
  });

  it("thread/archive from another connection notifies the requester and the subscribers, nobody else", async () => {
    const owner = await client();
    const other = await client();
    const bystander = await client();
    const id = (await owner.request("thread/start", {})).thread.id;

    expect(await other.request("thread/archive", { threadId: id })).toEqual({});
    const toOther = await other.waitForNotification("thread/archived", (p) => p.threadId === id);
    const toOwner = await owner.waitForNotification("thread/archived", (p) => p.threadId === id);
    expect(toOther.params).toEqual(toOwner.params);
    expect(toOwner.params).toEqual({ threadId: id, seq: 2 });
    // The requester did not become a subscriber: later events of the thread skip it.
    await owner.request("thread/name/set", { threadId: id, name: "after archive" });
    await owner.waitForNotification("thread/name/updated", (p) => p.threadId === id);
    await barrier(other);
    await barrier(bystander);
    expect(other.notifications().map((f) => f.method)).toEqual(["thread/archived"]);
    expect(bystander.notifications()).toEqual([]);

    await other.request("thread/unarchive", { threadId: id });
    await other.waitForNotification("thread/unarchived", (p) => p.threadId === id);
    const un = await owner.waitForNotification("thread/unarchived", (p) => p.threadId === id);
    expect(un.params.seq).toBe(4);
  });

  it("archiving a thread nobody has loaded notifies only the requester, with the next seq", async () => {
    const owner = await client();
    const id = (await owner.request("thread/start", {})).thread.id;
    await owner.request("thread/unsubscribe", { threadId: id });
    const other = await client();
    await other.request("thread/archive", { threadId: id });
    const archived = await other.waitForNotification("thread/archived", (p) => p.threadId === id);
    expect(archived.params.seq).toBeGreaterThan(1);
    await barrier(owner);
    expect(owner.notifications("thread/archived")).toEqual([]);
    expect(await loaded(other)).toEqual([]);
    expect((await other.request("thread/read", { threadId: id })).thread.status).toEqual({ type: "notLoaded" });
  });

  it("closing a connection unloads the threads only it watched; an ephemeral one is then gone", async () => {
    const a = await TestClient.initialized(ts.url);
    const b = await client();
    const durable = (await a.request("thread/start", {})).thread.id;
    const ephemeral = (await a.request("thread/start", { ephemeral: true })).thread.id;
    expect(await loaded(b)).toEqual([durable, ephemeral].sort());
    await a.close();
    await untilItHolds(async () => expect(await loaded(b)).toEqual([]));
    expect((await b.request("thread/read", { threadId: durable })).thread.id).toBe(durable);
    const gone = await untilItHolds(async () => {
      const f = await b.requestRaw("thread/read", { threadId: ephemeral });
      expect(f.error).toBeDefined();
      return f;
    });
    expect(gone.error).toEqual({ code: -32600, message: `thread not found: ${ephemeral}` });
  });

  // KNOWN BUG (src/runtime/threads.ts, not ours to edit): when a client disconnects while its
  // `thread/start {ephemeral: true}` is still committing, maybeUnload() runs
  // store.deleteThreads() at once, outside the thread's commit pipeline. On Postgres (a pool of
  // connections) the delete runs before the insert has committed, deletes nothing, and the
  // ephemeral row stays forever (shutdown() only deletes threads still loaded): ~29 of 30 leaked
  // in a trial. PGlite passes only because its single connection serialises the two. Fix:
  // enqueue the delete on the thread's pipeline (thread.enqueue(() => deleteThreads([id]))).
  it("deletes the ephemeral threads of clients that vanish while thread/start is in flight", async () => {
    await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        const ws = new WebSocket(ts.url, { perMessageDeflate: false });
        await new Promise<void>((resolve, reject) => {
          ws.once("open", () => resolve());
          ws.once("error", reject);
        });
        ws.send(JSON.stringify({ id: 1, method: "initialize", params: { clientInfo: { name: `gone-${i}`, version: "1" } } }));
        ws.send(JSON.stringify({ id: 2, method: "thread/start", params: { ephemeral: true, cwd: "/vanishing" } }));
        ws.terminate();
      }),
    );
    const probe = await client();
    await untilItHolds(async () => expect(await loaded(probe)).toEqual([]));
    const rows = await untilItHolds(async () => {
      const r = await ts.server.db.sql<{ id: string }[]>`select id from threads where cwd = '/vanishing'`;
      expect(r).toEqual([]);
      return r;
    }, 80);
    expect(rows).toEqual([]);
  });
});
