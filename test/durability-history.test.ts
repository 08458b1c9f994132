/**
 * Durable threads, part 3: thread/rollback and compaction (manual, on provider context overflow,
 * and on the usage share of the context window), and fork/rollback/compaction round trips through
 * a server restart on both backends. History is append-only: a rollback and a compaction are
 * markers, the old turns stay stored and readable, and what the model is sent changes only from
 * the marker on.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { BACKENDS, freshDatabase, type TestDatabase } from "./support/db.js";
import { TestClient } from "./support/client.js";
import { startMockModelServer, type MockModelServer, type RecordedRequest } from "./support/mock-model-server.js";
import { startServerOn, type TestServer } from "./support/server.js";
import { mockProviders, text, turnCompleted } from "./support/turns.js";
import { afterFirstTextDelta } from "./support/wire.js";
import { allEvents, deferred, expectExtends, useTurnSession } from "./support/durability.js";
import type { StartOptions } from "../src/server.js";

const backend = BACKENDS[BACKENDS.length - 1]!; // Postgres when available (faster per test), else PGlite
const SUMMARIZE = "Summarize the conversation so far";

function setup(overrides: Partial<StartOptions> = {}) {
  return useTurnSession(backend, "openai", overrides);
}

const ids = (turns: any[]) => turns.map((t) => t.id);
const itemTypes = (t: any) => t.items.map((i: any) => i.type);

describe("thread/rollback", () => {
  const { ctx, turn, read } = setup();

  it("drops the last N turns from the thread and from what the model is sent; their items stay stored", async () => {
    const { h, client } = ctx;
    const sql = h.ts.server.db.sql;
    const threadId = (await client.request("thread/start", {})).thread.id;
    const t1 = await turn(threadId, "alpha");
    const t2 = await turn(threadId, "beta");
    const t3 = await turn(threadId, "gamma");
    const before = await read(threadId);

    const rolled = await client.request("thread/rollback", { threadId, numTurns: 2 });
    expect(ids(rolled.thread.turns)).toEqual([t1.id]);
    expect(rolled.thread.turns[0]).toEqual(before.turns[0]);
    expect(rolled.thread.id).toBe(threadId);
    expect(ids((await read(threadId)).turns)).toEqual([t1.id]);

    const t4 = await turn(threadId, "delta");
    expectExtends("openai", t1.request, t4.request);
    for (const gone of ["beta", "re:beta", "gamma", "re:gamma"]) expect(t4.request.rawBody).not.toContain(gone);
    expect(ids((await read(threadId)).turns)).toEqual([t1.id, t4.id]);

    // Nothing was deleted: the turns, their items and their events are all still stored.
    const turnRows = await sql<{ id: string; status: string }[]>`select id, status from turns where thread_id = ${threadId} order by ordinal`;
    expect(turnRows.map((r) => r.id)).toEqual([t1.id, t2.id, t3.id, t4.id]);
    const itemRows = await sql<{ turnId: string; type: string; payload: any }[]>`
      select turn_id, type, payload from items where turn_id in ${sql([t2.id, t3.id])} order by turn_id, ordinal`;
    expect(itemRows.map((r) => r.payload)).toEqual([...before.turns[1].items, ...before.turns[2].items]);
    const markers = await sql<{ kind: string }[]>`select kind from model_messages where thread_id = ${threadId} and kind <> 'message'`;
    expect(markers.map((m) => m.kind)).toEqual(["rollback"]);
    const events = await allEvents(client, threadId, 0, 50);
    for (const id of [t2.id, t3.id]) expect(events.some((e) => e.method === "turn/completed" && e.params.turn.id === id)).toBe(true);

    // Rolling back again counts only the visible turns.
    const again = await client.request("thread/rollback", { threadId, numTurns: 1 });
    expect(ids(again.thread.turns)).toEqual([t1.id]);
    const t5 = await turn(threadId, "epsilon");
    expectExtends("openai", t1.request, t5.request);
    expect(t5.request.rawBody).not.toContain("delta");
  });

  it("is rejected while a turn runs (-32600), for more turns than the thread has (-32600) and for 0 turns (-32602)", async () => {
    const { h, client } = ctx;
    const threadId = (await client.request("thread/start", {})).thread.id;
    await expect(client.request("thread/rollback", { threadId, numTurns: 1 })).rejects.toMatchObject({ code: -32600 });
    const t1 = await turn(threadId, "alpha");
    const t2 = await turn(threadId, "beta");
    await expect(client.request("thread/rollback", { threadId, numTurns: 3 })).rejects.toMatchObject({ code: -32600 });
    await expect(client.request("thread/rollback", { threadId, numTurns: 0 })).rejects.toMatchObject({ code: -32602 });
    await expect(client.request("thread/rollback", { threadId, numTurns: -1 })).rejects.toMatchObject({ code: -32602 });
    await expect(client.request("thread/rollback", { threadId: "no-such-thread", numTurns: 1 })).rejects.toMatchObject({ code: -32600 });

    const gate = deferred();
    h.mock.enqueue({ text: ["ga", "mma"], gate: { afterEvents: afterFirstTextDelta("openai"), wait: gate.promise } });
    const running = (await client.request("turn/start", { threadId, input: text("gamma") })).turn;
    await client.waitForNotification("item/agentMessage/delta");
    await expect(client.request("thread/rollback", { threadId, numTurns: 1 })).rejects.toMatchObject({ code: -32600 });
    gate.open();
    await turnCompleted(client, running.id);
    // None of the refused rollbacks took effect.
    expect(ids((await read(threadId)).turns)).toEqual([t1.id, t2.id, running.id]);
    const rolled = await client.request("thread/rollback", { threadId, numTurns: 2 });
    expect(ids(rolled.thread.turns)).toEqual([t1.id]);
  });
});

describe("thread/compact/start", () => {
  const { ctx, turn, read } = setup();

  it("runs a turn with a contextCompaction item; later requests carry the summary instead of the old turns, which stay readable", async () => {
    const { h, client } = ctx;
    const threadId = (await client.request("thread/start", {})).thread.id;
    const t1 = await turn(threadId, "alpha");
    const t2 = await turn(threadId, "beta");
    const before = await read(threadId);

    h.mock.enqueue({ text: "SUMMARY-MANUAL of the talk." });
    expect(await client.request("thread/compact/start", { threadId })).toEqual({});
    const started = await client.waitForNotification("turn/started", (p) => p.threadId === threadId && p.turn.id !== t1.id && p.turn.id !== t2.id);
    const compactTurnId = started.params.turn.id;
    const done = await turnCompleted(client, compactTurnId);
    expect(done.params.turn).toMatchObject({ status: "completed", error: null });
    const itemStarted = client.notifications("item/started").filter((f) => f.params.turnId === compactTurnId);
    const itemCompleted = client.notifications("item/completed").filter((f) => f.params.turnId === compactTurnId);
    expect(itemStarted.map((f) => f.params.item.type)).toEqual(["contextCompaction"]);
    expect(itemCompleted.map((f) => f.params.item.type)).toEqual(["contextCompaction"]);
    expect(itemCompleted[0]!.params.item.id).toBe(itemStarted[0]!.params.item.id);

    // The summarization request: the whole conversation, then the instruction to summarize.
    const summarize = h.mock.requests[2]!;
    expect(summarize.rawBody).toContain(SUMMARIZE);
    for (const s of ["alpha", "re:alpha", "beta", "re:beta"]) expect(summarize.rawBody).toContain(s);
    expect(JSON.stringify(summarize.body.input[summarize.body.input.length - 1])).toContain(SUMMARIZE);

    const t4 = await turn(threadId, "gamma");
    expect(t4.request.rawBody).toContain("SUMMARY-MANUAL of the talk.");
    // The old turns' answers are replaced by the summary; the user's messages stay verbatim (as Codex keeps them).
    for (const gone of ["re:alpha", "re:beta", SUMMARIZE]) expect(t4.request.rawBody).not.toContain(gone);
    for (const kept of ["alpha", "beta"]) expect(t4.request.rawBody).toContain(kept);
    expect(t4.request.body.instructions).toBe(t1.request.body.instructions);
    expect(t4.request.body.tools).toEqual(t1.request.body.tools);
    expect(t4.request.body.input[0]).toEqual(t1.request.body.input[0]); // the environment context opens it still
    const t5 = await turn(threadId, "delta");
    expectExtends("openai", t4.request, t5.request);

    // The old turns are still there to read, unchanged; so is the compaction turn.
    const after = await read(threadId);
    expect(after.turns.slice(0, 2)).toEqual(before.turns);
    expect(ids(after.turns)).toEqual([t1.id, t2.id, compactTurnId, t4.id, t5.id]);
    expect(itemTypes(after.turns[2])).toEqual(["contextCompaction"]);
    expect(after.turns[2].items[0]).toEqual(itemCompleted[0]!.params.item);
  });

  it("a compaction turn counts as a turn: a rollback across it removes it from the thread", async () => {
    const { h, client } = ctx;
    const threadId = (await client.request("thread/start", {})).thread.id;
    const t1 = await turn(threadId, "alpha");
    const t2 = await turn(threadId, "beta");
    h.mock.enqueue({ text: "SUMMARY-R" });
    await client.request("thread/compact/start", { threadId });
    const compactTurn = (await client.waitForNotification("turn/started", (p) => p.threadId === threadId && ![t1.id, t2.id].includes(p.turn.id))).params.turn.id;
    await turnCompleted(client, compactTurn);
    const t4 = await turn(threadId, "gamma");
    expect(ids((await read(threadId)).turns)).toEqual([t1.id, t2.id, compactTurn, t4.id]);
    const rolled = await client.request("thread/rollback", { threadId, numTurns: 2 });
    expect(ids(rolled.thread.turns)).toEqual([t1.id, t2.id]);
    expect(ids((await read(threadId)).turns)).toEqual([t1.id, t2.id]);
    const t5 = await turn(threadId, "delta");
    expect(t5.request.rawBody).not.toContain("gamma");
    expect(ids((await read(threadId)).turns)).toEqual([t1.id, t2.id, t5.id]);
  });

  it("a compaction turn that failed (it wrote nothing to the history) stays a turn of the thread, until a rollback removes it", async () => {
    const { h, client } = ctx;
    const sql = h.ts.server.db.sql;
    const threadId = (await client.request("thread/start", {})).thread.id;
    const t1 = await turn(threadId, "alpha");
    h.mock.enqueue({ kind: "error", status: 400, message: "summary refused" });
    await client.request("thread/compact/start", { threadId });
    const failed = (await client.waitForNotification("turn/started", (p) => p.threadId === threadId && p.turn.id !== t1.id)).params.turn.id;
    expect((await turnCompleted(client, failed)).params.turn.status).toBe("failed");
    // Clients saw it start and fail: thread/read and thread/turns/list show it (it read as rolled back).
    expect(ids((await read(threadId)).turns)).toEqual([t1.id, failed]);
    expect(ids((await client.request("thread/turns/list", { threadId })).data).sort()).toEqual([t1.id, failed].sort());
    const t3 = await turn(threadId, "beta");
    expect(ids((await read(threadId)).turns)).toEqual([t1.id, failed, t3.id]);
    // A rollback of two turns takes it and the one after it; the marker names the range it covers.
    const rolled = await client.request("thread/rollback", { threadId, numTurns: 2 });
    expect(ids(rolled.thread.turns)).toEqual([t1.id]);
    const [marker] = await sql<{ message: any }[]>`select message from model_messages where thread_id = ${threadId} and kind = 'rollback'`;
    expect(marker!.message).toMatchObject({ kind: "rollback", fromTurnOrdinal: 1, toTurnOrdinal: 3 });
    const t4 = await turn(threadId, "gamma");
    expect(ids((await read(threadId)).turns)).toEqual([t1.id, t4.id]);
  });

  it("on a thread with nothing to compact yet (the TUI's /compact right after start): a compaction turn without a model call", async () => {
    const { h, client } = ctx;
    const threadId = (await client.request("thread/start", {})).thread.id;
    expect(await client.request("thread/compact/start", { threadId })).toEqual({});
    const started = await client.waitForNotification("turn/started", (p) => p.threadId === threadId);
    const done = await turnCompleted(client, started.params.turn.id);
    expect(done.params.turn).toMatchObject({ status: "completed", error: null });
    expect(client.notifications("item/completed").filter((f) => f.params.turnId === started.params.turn.id).map((f) => f.params.item.type)).toEqual(["contextCompaction"]);
    expect(h.mock.requests).toHaveLength(0);
    // The thread goes on as usual; its first request opens with the environment context.
    const t = await turn(threadId, "alpha");
    expect(JSON.stringify(t.request.body.input[0])).toContain("environment");
  });

  it("is refused while a turn runs, and for an unknown thread (-32600)", async () => {
    const { h, client } = ctx;
    const threadId = (await client.request("thread/start", {})).thread.id;
    await expect(client.request("thread/compact/start", { threadId: "no-such-thread" })).rejects.toMatchObject({ code: -32600 });
    const gate = deferred();
    h.mock.enqueue({ text: ["a", "b"], gate: { afterEvents: afterFirstTextDelta("openai"), wait: gate.promise } });
    const running = (await client.request("turn/start", { threadId, input: text("hi") })).turn;
    await client.waitForNotification("item/agentMessage/delta");
    await expect(client.request("thread/compact/start", { threadId })).rejects.toMatchObject({ code: -32600 });
    gate.open();
    await turnCompleted(client, running.id);
    expect(h.mock.requests).toHaveLength(1);
  });

  it("on provider context overflow: compacts inside the turn, retries, and the turn completes", async () => {
    const { h, client } = ctx;
    const threadId = (await client.request("thread/start", {})).thread.id;
    await turn(threadId, "alpha");
    h.mock.enqueue({ kind: "error", status: 400, contextOverflow: true }, { text: "SUMMARY-OVERFLOW" }, { text: "fits now" });
    const { turn: t2 } = await client.request("turn/start", { threadId, input: text("beta") });
    const done = await turnCompleted(client, t2.id);
    expect(done.params.turn).toMatchObject({ status: "completed", error: null });
    const [, overflowed, summarize, retried] = h.mock.requests;
    expect(overflowed!.rawBody).toContain("alpha");
    expect(summarize!.rawBody).toContain(SUMMARIZE);
    expect(retried!.rawBody).toContain("SUMMARY-OVERFLOW");
    expect(retried!.rawBody).toContain("beta"); // the turn's own input is kept
    expect(retried!.rawBody).not.toContain("re:alpha"); // answers go; user messages stay verbatim
    expect(retried!.rawBody).toContain("alpha");
    const turnItems = (m: string) => client.notifications(m).filter((f) => f.params.turnId === t2.id).map((f) => f.params.item.type);
    expect(turnItems("item/completed")).toEqual(["userMessage", "contextCompaction", "agentMessage"]);
    expect(turnItems("item/started")).toEqual(["userMessage", "contextCompaction", "agentMessage"]);
    const stored = (await read(threadId)).turns[1];
    expect(itemTypes(stored)).toEqual(["userMessage", "contextCompaction", "agentMessage"]);
    expect(h.mock.requests).toHaveLength(4);
  });

  it("overflow again after compacting: the turn fails with contextWindowExceeded", async () => {
    const { h, client } = ctx;
    const threadId = (await client.request("thread/start", {})).thread.id;
    await turn(threadId, "alpha");
    h.mock.enqueue({ kind: "error", status: 400, contextOverflow: true }, { text: "SUMMARY" }, { kind: "error", status: 400, contextOverflow: true });
    const { turn: t2 } = await client.request("turn/start", { threadId, input: text("beta") });
    const done = await turnCompleted(client, t2.id);
    expect(done.params.turn.status).toBe("failed");
    expect(done.params.turn.error.codexErrorInfo).toBe("contextWindowExceeded");
    expect(h.mock.requests).toHaveLength(4); // the turn, the summary, the retry: no second compaction
    expect(client.notifications("item/completed").filter((f) => f.params.turnId === t2.id).map((f) => f.params.item.type)).toEqual([
      "userMessage",
      "contextCompaction",
    ]);
    const thread = (await client.request("thread/read", { threadId })).thread;
    expect(thread.status).toEqual({ type: "systemError" });
  });
});

describe("automatic compaction by the usage share of the context window", () => {
  // A window the summary request (system prompt and tool schemas included) can fit in.
  const { ctx, turn, read } = setup({ turns: { contextWindow: 20_000, autoCompactShare: 0.5 } });

  it("a turn after a call that used 90% of the window compacts first; below the share nothing happens", async () => {
    const { h, client } = ctx;
    const threadId = (await client.request("thread/start", {})).thread.id;
    h.mock.enqueue({ text: "small", usage: { input: 8000 } });
    const t1 = (await client.request("turn/start", { threadId, input: text("alpha") })).turn;
    await turnCompleted(client, t1.id);
    h.mock.enqueue({ text: "big", usage: { input: 18000 } });
    const t2 = (await client.request("turn/start", { threadId, input: text("beta") })).turn;
    await turnCompleted(client, t2.id);
    expect(h.mock.requests).toHaveLength(2); // 8000 < 10000: no compaction before t2

    h.mock.enqueue({ text: "SUMMARY-USAGE" }, { text: "after compaction", usage: { input: 100 } });
    const t3 = (await client.request("turn/start", { threadId, input: text("gamma") })).turn;
    const done = await turnCompleted(client, t3.id);
    expect(done.params.turn.status).toBe("completed");
    expect(h.mock.requests).toHaveLength(4);
    const [, , summarize, answer] = h.mock.requests;
    expect(summarize!.rawBody).toContain(SUMMARIZE);
    expect(answer!.rawBody).toContain("SUMMARY-USAGE");
    expect(answer!.rawBody).toContain("gamma");
    for (const gone of ["small", "big"]) expect(answer!.rawBody).not.toContain(`"${gone}"`);
    expect(itemTypes((await read(threadId)).turns[2])).toEqual(["userMessage", "contextCompaction", "agentMessage"]);

    // After it, the usage is low again: the next turn does not compact.
    await turn(threadId, "delta");
    expect(h.mock.requests).toHaveLength(5);
  });

  it("the share is remembered when the thread is unloaded between turns (every client gone)", async () => {
    const { h } = ctx;
    let client = ctx.client;
    const threadId = (await client.request("thread/start", {})).thread.id;
    h.mock.enqueue({ text: "big", usage: { input: 18000 } });
    const t1 = (await client.request("turn/start", { threadId, input: text("alpha") })).turn;
    await turnCompleted(client, t1.id);
    await client.close();
    client = ctx.client = await TestClient.initialized(h.ts.url);
    expect((await client.request("thread/loaded/list", {})).data).not.toContain(threadId);
    await client.request("thread/resume", { threadId });
    h.mock.enqueue({ text: "SUMMARY-AGAIN" }, { text: "after" });
    const t2 = (await client.request("turn/start", { threadId, input: text("beta") })).turn;
    expect((await turnCompleted(client, t2.id)).params.turn.status).toBe("completed");
    expect(h.mock.requests).toHaveLength(3);
    expect(h.mock.requests[1]!.rawBody).toContain(SUMMARIZE);
    expect(h.mock.requests[2]!.rawBody).toContain("SUMMARY-AGAIN");
    // And once compacted, unloading again does not compact a second time.
    await client.close();
    client = ctx.client = await TestClient.initialized(h.ts.url);
    await client.request("thread/resume", { threadId });
    await turn(threadId, "gamma");
    expect(h.mock.requests).toHaveLength(4);
  });
});

describe.each(BACKENDS)("fork, rollback and compaction survive a restart (%s)", (persistBackend) => {
  let mock: MockModelServer;
  let db: TestDatabase;
  let ts: TestServer | undefined;
  let client: TestClient | undefined;
  beforeEach(async () => {
    mock = await startMockModelServer();
    db = await freshDatabase(persistBackend);
  });
  afterEach(async () => {
    await client?.close();
    await ts?.close();
    ts = undefined;
    await mock.close();
    await db.cleanup();
  });
  const start = async (reopen: boolean) => {
    ts = await startServerOn(
      db,
      {
        modelProvider: "anthropic",
        model: "mock-model",
        providers: mockProviders(mock),
      },
      reopen,
    );
    client = await TestClient.initialized(ts.url);
  };
  const turn = async (threadId: string, input: string): Promise<{ id: string; request: RecordedRequest }> => {
    mock.enqueue({ text: `re:${input}` });
    const { turn: t } = await client!.request("turn/start", { threadId, input: text(input) });
    expect((await turnCompleted(client!, t.id)).params.turn.status).toBe("completed");
    return { id: t.id, request: mock.requests[mock.requests.length - 1]! };
  };
  const read = async (threadId: string) => (await client!.request("thread/read", { threadId, includeTurns: true })).thread;

  it("the threads read the same after the restart, and each next request extends the last one before it", async () => {
    await start(false);
    const p = (await client!.request("thread/start", {})).thread.id;
    const t1 = await turn(p, "alpha");
    const t2 = await turn(p, "beta");
    const t3 = await turn(p, "gamma");
    const f = (await client!.request("thread/fork", { threadId: p, lastTurnId: t2.id })).thread.id;
    const g = (await client!.request("thread/fork", { threadId: f })).thread.id; // a fork of the fork
    expect(ids((await client!.request("thread/rollback", { threadId: p, numTurns: 1 })).thread.turns)).toEqual([t1.id, t2.id]);
    mock.enqueue({ text: "SUMMARY-P" });
    await client!.request("thread/compact/start", { threadId: p });
    const compactTurn = (await client!.waitForNotification("turn/started", (x) => x.threadId === p && ![t1.id, t2.id, t3.id].includes(x.turn.id))).params.turn.id;
    await turnCompleted(client!, compactTurn);
    const p5 = await turn(p, "after-compaction");
    const f4 = await turn(f, "eff-turn");
    const g1 = await turn(g, "gee-turn");
    expect(p5.request.rawBody).toContain("SUMMARY-P");
    expect(f4.request.rawBody).toContain("re:beta");
    expect(f4.request.rawBody).not.toContain("gamma");

    // Status aside (a thread is notLoaded in a new process until someone uses it).
    const readAll = async () => Object.fromEntries(await Promise.all(Object.entries({ p, f, g }).map(async ([k, id]) => [k, { ...(await read(id)), status: null }])));
    const readBefore = await readAll();
    const eventsBefore = await allEvents(client!, p, 0, 100);
    await client!.close();
    await ts!.close();
    await start(true);

    expect(await readAll()).toEqual(readBefore);
    expect(await allEvents(client!, p, 0, 100)).toEqual(eventsBefore);
    expect(ids(readBefore.g.turns)).toEqual([t1.id, t2.id, g1.id]);
    expect(ids(readBefore.p.turns)).toEqual([t1.id, t2.id, compactTurn, p5.id]);
    expect(ids(readBefore.f.turns)).toEqual([t1.id, t2.id, f4.id]);

    // Each thread's context came back from the store exactly: same bytes, extended.
    const p6 = await turn(p, "p-after-restart");
    expectExtends("anthropic", p5.request, p6.request);
    // Compacted: the old answers are gone (user messages stay verbatim); the rolled-back turn is gone entirely.
    for (const gone of ["re:alpha", "gamma"]) expect(p6.request.rawBody).not.toContain(gone);
    const f5 = await turn(f, "f-after-restart");
    expectExtends("anthropic", f4.request, f5.request);
    expect(f5.request.rawBody).not.toContain("gamma");
    expect(f5.request.rawBody).not.toContain("SUMMARY-P");
    const g2 = await turn(g, "g-after-restart");
    expectExtends("anthropic", g1.request, g2.request);
    expect(g2.request.rawBody).not.toContain("eff-turn");
    // The event log went on above everything the first process handed out.
    const eventsAfter = await allEvents(client!, p, 0, 100);
    expect(eventsAfter.slice(0, eventsBefore.length)).toEqual(eventsBefore);
    const seqs = eventsAfter.map((e) => e.seq);
    for (let i = 1; i < seqs.length; i++) expect(seqs[i]).toBeGreaterThan(seqs[i - 1]);
    expect(seqs.length).toBeGreaterThan(eventsBefore.length);
    // And the rollback still holds for a new fork made after the restart.
    const h = (await client!.request("thread/fork", { threadId: p, lastTurnId: t1.id })).thread;
    expect(ids(h.turns)).toEqual([t1.id]);
    const h1 = await turn(h.id, "h");
    expectExtends("anthropic", t1.request, h1.request);
  }, 90_000); // two server start-ups (PGlite: WASM boot) on a loaded 2-core box
});
