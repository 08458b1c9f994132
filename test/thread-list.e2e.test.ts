/** thread/list: keyset pagination, limits, cursors and filters, over a real WebSocket. */
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BACKENDS } from "./support/db.js";
import { startTestServer, type TestServer } from "./support/server.js";
import { TestClient } from "./support/client.js";

type Thread = Record<string, any>;
type ListParams = Record<string, unknown>;

/** Follows nextCursor from the first page to the last; returns the pages. */
async function walk(client: TestClient, params: ListParams): Promise<Thread[][]> {
  const pages: Thread[][] = [];
  let cursor = (params.cursor as string | undefined) ?? null;
  for (let guard = 0; guard < 200; guard++) {
    const res: { data: Thread[]; nextCursor: string | null } = await client.request("thread/list", { ...params, cursor });
    pages.push(res.data);
    if (res.nextCursor === null) return pages;
    expect(typeof res.nextCursor).toBe("string");
    cursor = res.nextCursor;
  }
  throw new Error("nextCursor never ended");
}

const ids = (threads: Thread[]) => threads.map((t) => t.id);

/** Resolves once Date.now() has moved on, so the next write gets a strictly later timestamp. */
async function nextMillisecond(): Promise<void> {
  const t = Date.now();
  while (Date.now() <= t) await new Promise((r) => setTimeout(r, 1));
}

/**
 * Starts threads one after the other, each in a later millisecond than the one before, so that
 * creation order is the created_at order (within one millisecond, thread ids — the tie-breaker —
 * are random: src/ids.ts uuidv7 has no monotonic counter).
 */
async function startThreads(client: TestClient, n: number, params: Record<string, unknown> = {}): Promise<string[]> {
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    await nextMillisecond();
    out.push((await client.request("thread/start", params)).thread.id);
  }
  return out;
}

describe.each(BACKENDS)("thread/list pagination (%s)", (backend) => {
  let ts: TestServer;
  let client: TestClient;
  let all: string[] = []; // in creation order
  let renamed: string[] = [];
  const N = 60;

  beforeAll(async () => {
    ts = await startTestServer(backend);
    client = await TestClient.initialized(ts.url);
    all = await startThreads(client, N);
    // Touch a few old threads so updated_at order differs from created_at order.
    await nextMillisecond();
    renamed = [all[3]!, all[17]!, all[42]!];
    for (const id of renamed) {
      await client.request("thread/name/set", { threadId: id, name: `renamed ${id}` });
      await nextMillisecond();
    }
  });
  afterAll(async () => {
    await client?.close();
    await ts?.close();
  });

  describe.each(["created_at", "updated_at"] as const)("sortKey %s", (sortKey) => {
    it.each(["desc", "asc"] as const)("walking nextCursor with limit 7 (%s) visits every thread exactly once, in the one-page order", async (sortDirection) => {
      const pages = await walk(client, { limit: 7, sortKey, sortDirection });
      expect(pages).toHaveLength(Math.ceil(N / 7));
      expect(pages.slice(0, -1).every((p) => p.length === 7)).toBe(true);
      const walked = ids(pages.flat());
      expect(walked).toHaveLength(N);
      expect(new Set(walked).size).toBe(N);
      expect([...walked].sort()).toEqual([...all].sort());

      const onePage = await client.request("thread/list", { limit: 100, sortKey, sortDirection });
      expect(onePage.nextCursor).toBeNull();
      expect(ids(onePage.data)).toEqual(walked);

      // The order follows the key (seconds on the wire, so only non-strictly).
      const field = sortKey === "created_at" ? "createdAt" : "updatedAt";
      const values = pages.flat().map((t) => t[field] as number);
      const sorted = [...values].sort((a, b) => (sortDirection === "asc" ? a - b : b - a));
      expect(values).toEqual(sorted);

      // A second walk gives the same order (stable), and the other direction is its reverse.
      expect(ids((await walk(client, { limit: 7, sortKey, sortDirection })).flat())).toEqual(walked);
      const other = ids((await walk(client, { limit: 7, sortKey, sortDirection: sortDirection === "asc" ? "desc" : "asc" })).flat());
      expect(other).toEqual([...walked].reverse());
    });
  });

  it("orders by creation for created_at and by last change for updated_at", async () => {
    const created = ids((await client.request("thread/list", { limit: 100 })).data);
    expect(created).toEqual([...all].reverse());
    const updated = ids((await client.request("thread/list", { limit: 100, sortKey: "updated_at" })).data);
    expect(updated.slice(0, 3)).toEqual([...renamed].reverse());
    expect(updated.slice(3)).toEqual([...all].reverse().filter((id) => !renamed.includes(id)));
  });

  it("defaults to 25 per page", async () => {
    const pages = await walk(client, {});
    expect(pages.map((p) => p.length)).toEqual([25, 25, 10]);
    const first = await client.request("thread/list", { limit: null });
    expect(first.data).toHaveLength(25);
  });

  it("accepts limit 1 and 100; rejects 0, 101, fractions and negatives with -32602", async () => {
    expect((await client.request("thread/list", { limit: 1 })).data).toHaveLength(1);
    const max = await client.request("thread/list", { limit: 100 });
    expect(max.data).toHaveLength(N);
    for (const limit of [0, 101, 1000, 2.5, -1, "10"]) {
      const f = await client.requestRaw("thread/list", { limit });
      expect(f.error?.code, `limit ${JSON.stringify(limit)}`).toBe(-32602);
      expect(f.error.data.issues[0].path).toEqual(["limit"]);
    }
  });

  it("rejects a cursor made for the other sortKey with -32602", async () => {
    const byCreated = await client.request("thread/list", { limit: 5 });
    const f = await client.requestRaw("thread/list", { limit: 5, sortKey: "updated_at", cursor: byCreated.nextCursor });
    expect(f.error).toMatchObject({ code: -32602 });
    expect(f.error.message).toMatch(/sortKey/);
    const byUpdated = await client.request("thread/list", { limit: 5, sortKey: "updated_at" });
    const g = await client.requestRaw("thread/list", { limit: 5, cursor: byUpdated.nextCursor });
    expect(g.error).toMatchObject({ code: -32602 });
  });

  it("rejects cursors it did not make with -32602", async () => {
    const forged = (obj: unknown) => Buffer.from(JSON.stringify(obj)).toString("base64url");
    for (const cursor of [
      "garbage",
      "",
      forged({ key: "created_at", value: "x", id: "a" }),
      forged({ key: "name", value: 1, id: "a" }),
      forged({ key: "created_at", value: 1.5, id: "a" }),
      forged({ key: "created_at", value: 1, id: 7 }),
      forged([1, 2]),
      forged(null),
    ]) {
      const f = await client.requestRaw("thread/list", { cursor });
      if (cursor === "") {
        // An empty cursor is "no cursor" (the first page), like null.
        expect(f.result?.data).toHaveLength(25);
        continue;
      }
      expect(f.error?.code, `cursor ${cursor}`).toBe(-32602);
    }
  });

  it("keeps its place when the thread a cursor points at is archived meanwhile", async () => {
    const first = await client.request("thread/list", { limit: 10 });
    const boundary = first.data[9].id;
    await client.request("thread/archive", { threadId: boundary });
    try {
      const rest = ids((await walk(client, { limit: 10, cursor: first.nextCursor })).flat());
      const expected = [...all].reverse().slice(10);
      expect(rest).toEqual(expected);
    } finally {
      await client.request("thread/unarchive", { threadId: boundary });
    }
  });
});

describe.each(BACKENDS)("thread/list filters (%s)", (backend) => {
  let ts: TestServer;
  let client: TestClient;
  const cwdFor = (name: string) => path.join(ts.home, "projects", name);

  beforeAll(async () => {
    ts = await startTestServer(backend);
    client = await TestClient.initialized(ts.url);
  });
  afterAll(async () => {
    await client?.close();
    await ts?.close();
  });

  it("filters archived threads before paginating", async () => {
    const cwd = cwdFor("archived");
    const started = await startThreads(client, 10, { cwd });
    const archived = started.filter((_, i) => i % 3 !== 0); // 6 archived, 4 live
    for (const id of archived) await client.request("thread/archive", { threadId: id });

    const live = await walk(client, { cwd, limit: 3 });
    expect(live.map((p) => p.length)).toEqual([3, 1]);
    expect(ids(live.flat())).toEqual(started.filter((id) => !archived.includes(id)).reverse());

    const arch = await walk(client, { cwd, limit: 4, archived: true });
    expect(arch.map((p) => p.length)).toEqual([4, 2]);
    expect(ids(arch.flat()).sort()).toEqual([...archived].sort());

    const explicitFalse = await walk(client, { cwd, limit: 3, archived: false });
    expect(ids(explicitFalse.flat())).toEqual(ids(live.flat()));
  });

  it("filters by one cwd or a list of cwds, exactly", async () => {
    const a = await startThreads(client, 3, { cwd: cwdFor("a") });
    const b = await startThreads(client, 2, { cwd: cwdFor("b") });
    const c = await startThreads(client, 1, { cwd: cwdFor("c") });
    await startThreads(client, 1, { cwd: cwdFor("a") + "-suffix" });

    expect(ids((await client.request("thread/list", { cwd: cwdFor("a") })).data).sort()).toEqual([...a].sort());
    const ac = await walk(client, { cwd: [cwdFor("a"), cwdFor("c")], limit: 2 });
    expect(ac.map((p) => p.length)).toEqual([2, 2]);
    expect(ids(ac.flat()).sort()).toEqual([...a, ...c].sort());
    expect(ids((await client.request("thread/list", { cwd: [cwdFor("b")] })).data).sort()).toEqual([...b].sort());
    expect((await client.request("thread/list", { cwd: cwdFor("nowhere") })).data).toEqual([]);
    for (const t of (await client.request("thread/list", { cwd: [cwdFor("a"), cwdFor("b")] })).data) {
      expect([cwdFor("a"), cwdFor("b")]).toContain(t.cwd);
    }
  });

  it("treats an empty cwd list as matching no thread (not as an error)", async () => {
    await startThreads(client, 1, { cwd: cwdFor("empty-list") });
    const f = await client.requestRaw("thread/list", { cwd: [] });
    expect(f.error).toBeUndefined();
    expect(f.result.data).toEqual([]);
  });

  it("matches searchTerm case-insensitively against name and preview, with % and _ taken literally", async () => {
    const cwd = cwdFor("search");
    const names = ["Fix the Parser", "parser bug in lexer", "100% done", "100 percent", "snake_case name", "snakeXcase", "back\\slash", "plain"];
    const byName: Record<string, string> = {};
    for (const name of names) {
      const id = (await client.request("thread/start", { cwd })).thread.id;
      await client.request("thread/name/set", { threadId: id, name });
      byName[name] = id;
    }
    // A thread without a name whose preview (first user message, set by turns) matches.
    const withPreview = (await client.request("thread/start", { cwd })).thread.id;
    await ts.server.db.sql`update threads set preview = ${"Please refactor the TOKENIZER"} where id = ${withPreview}`;

    const search = async (searchTerm: string, extra: ListParams = {}) =>
      ids((await walk(client, { cwd, searchTerm, limit: 2, ...extra })).flat()).sort();
    const expectIds = (...ns: string[]) => ns.map((n) => byName[n]!).sort();

    expect(await search("PARSER")).toEqual(expectIds("Fix the Parser", "parser bug in lexer"));
    expect(await search("parser bug")).toEqual(expectIds("parser bug in lexer"));
    expect(await search("%")).toEqual(expectIds("100% done"));
    expect(await search("0% d")).toEqual(expectIds("100% done"));
    expect(await search("_")).toEqual(expectIds("snake_case name"));
    expect(await search("e_c")).toEqual(expectIds("snake_case name"));
    expect(await search("\\")).toEqual(expectIds("back\\slash"));
    expect(await search("tokenizer")).toEqual([withPreview]);
    expect(await search("no such words")).toEqual([]);
    // An empty search term is no filter.
    expect(await search("")).toHaveLength(names.length + 1);
    // Combined with another filter: archived threads are searched only with archived: true.
    await client.request("thread/archive", { threadId: byName["Fix the Parser"] });
    expect(await search("parser")).toEqual(expectIds("parser bug in lexer"));
    expect(await search("parser", { archived: true })).toEqual(expectIds("Fix the Parser"));
  });

  it("filters by modelProviders (an empty list means every provider)", async () => {
    const cwd = cwdFor("providers");
    const anthropic = await startThreads(client, 2, { cwd, modelProvider: "anthropic" });
    const openai = await startThreads(client, 2, { cwd, modelProvider: "openai" });
    const chat = await startThreads(client, 1, { cwd, modelProvider: "openai-chat" });
    const list = async (modelProviders: unknown) => ids((await walk(client, { cwd, modelProviders, limit: 1 })).flat()).sort();
    expect(await list(["anthropic"])).toEqual([...anthropic].sort());
    expect(await list(["anthropic", "openai-chat"])).toEqual([...anthropic, ...chat].sort());
    expect(await list(["nobody"])).toEqual([]);
    expect(await list([])).toEqual([...anthropic, ...openai, ...chat].sort());
    expect(await list(null)).toEqual([...anthropic, ...openai, ...chat].sort());
    const data = (await client.request("thread/list", { cwd, modelProviders: ["openai"] })).data;
    expect(data.every((t: Thread) => t.modelProvider === "openai")).toBe(true);
  });

  it("applies includedThreadIds and excludedThreadIds before paginating", async () => {
    const cwd = cwdFor("included");
    const started = await startThreads(client, 6, { cwd });
    const included = [started[0]!, started[2]!, started[4]!, started[5]!];
    const got = await walk(client, { cwd, includedThreadIds: included, excludedThreadIds: [started[5]], limit: 2 });
    expect(got.map((p) => p.length)).toEqual([2, 1]);
    expect(ids(got.flat()).sort()).toEqual([started[0], started[2], started[4]].sort());
    expect((await client.request("thread/list", { cwd, includedThreadIds: [] })).data).toEqual([]);
  });

  it("never lists ephemeral threads", async () => {
    const cwd = cwdFor("ephemeral");
    const eph = (await client.request("thread/start", { cwd, ephemeral: true })).thread;
    expect(eph.ephemeral).toBe(true);
    const durable = (await client.request("thread/start", { cwd })).thread.id;
    expect(ids((await client.request("thread/list", { cwd })).data)).toEqual([durable]);
    expect((await client.request("thread/list", { cwd, archived: true })).data).toEqual([]);
    expect(ids((await client.request("thread/list", { includedThreadIds: [eph.id, durable] })).data)).toEqual([durable]);
    // It exists, though: it can be read while loaded.
    expect((await client.request("thread/read", { threadId: eph.id })).thread.ephemeral).toBe(true);
  });

  it("lists a thread as soon as thread/start has answered", async () => {
    const cwd = cwdFor("immediate");
    for (let i = 0; i < 5; i++) {
      const id = (await client.request("thread/start", { cwd })).thread.id;
      const list = await client.request("thread/list", { cwd, limit: 1 });
      expect(ids(list.data)).toEqual([id]);
      const read = await client.request("thread/read", { threadId: id });
      expect(read.thread.id).toBe(id);
    }
  });

  it("lists threads with the stored settings and status", async () => {
    const cwd = cwdFor("shape");
    const started = (await client.request("thread/start", { cwd, model: "m-shape", modelProvider: "anthropic" })).thread;
    const [listed] = (await client.request("thread/list", { cwd })).data;
    expect(listed).toMatchObject({ id: started.id, cwd, model: "m-shape", modelProvider: "anthropic", ephemeral: false, status: { type: "idle" }, turns: [] });
    expect(listed.createdAt).toBe(started.createdAt);
  });
});
