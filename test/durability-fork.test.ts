/**
 * Durable threads, part 2: thread/fork. A fork is a new thread pointing at its parent and the fork
 * point (no history copied): it shows the parent's turns up to that point with their ids, its first
 * model request extends the parent's request at the fork point byte for byte, and nothing the
 * parent does afterwards (new turns, a rollback) reaches it.
 */
import { describe, expect, it } from "vitest";
import { BACKENDS } from "./support/db.js";
import { PROVIDERS, text, turnCompleted, type ProviderName } from "./support/turns.js";
import { afterFirstTextDelta } from "./support/wire.js";
import { deferred, expectExtends, rowCounts, threadRowCounts, useTurnSession } from "./support/durability.js";
import { ThreadForkResponse } from "../src/protocol/thread.js";

const backend = BACKENDS[BACKENDS.length - 1]!; // Postgres when available (faster per test), else PGlite

function setup(provider: ProviderName = "openai") {
  return useTurnSession(backend, provider);
}

describe("thread/fork", () => {
  const { ctx, turn, read } = setup();

  it("a new thread with forkedFromId, announced with thread/started, holding the parent's turns (same ids)", async () => {
    const { client } = ctx;
    const parent = (await client.request("thread/start", {})).thread.id;
    const t1 = await turn(parent, "alpha");
    const t2 = await turn(parent, "beta");
    const parentRead = await read(parent);

    const forked = await client.request("thread/fork", { threadId: parent });
    expect(ThreadForkResponse.parse(forked)).toEqual(forked);
    const fork = forked.thread;
    expect(fork.id).not.toBe(parent);
    expect(fork).toMatchObject({ forkedFromId: parent, preview: "alpha", status: { type: "idle" }, ephemeral: false });
    expect(forked).toMatchObject({ model: "mock-model", modelProvider: "openai" });
    expect(fork.turns.map((t: any) => t.id)).toEqual([t1.id, t2.id]);
    expect(fork.turns).toEqual(parentRead.turns);
    const started = await client.waitForNotification("thread/started", (p) => p.thread.id === fork.id);
    expect(started.params.thread).toMatchObject({ id: fork.id, forkedFromId: parent });
    expect(started.params.seq).toBe(1);

    expect((await read(fork.id)).turns).toEqual(parentRead.turns);
    expect((await client.request("thread/read", { threadId: fork.id })).thread.turns).toEqual([]);
    const listed = (await client.request("thread/list", {})).data.map((t: any) => t.id);
    expect(listed).toEqual(expect.arrayContaining([parent, fork.id]));
    // excludeTurns: the same fork without turns.
    const bare = await client.request("thread/fork", { threadId: parent, excludeTurns: true });
    expect(bare.thread.turns).toEqual([]);
    expect((await read(bare.thread.id)).turns.map((t: any) => t.id)).toEqual([t1.id, t2.id]);
  });

  it("lastTurnId forks through that turn only; a turn of another thread or an unknown one → -32600", async () => {
    const { client } = ctx;
    const parent = (await client.request("thread/start", {})).thread.id;
    const t1 = await turn(parent, "alpha");
    const t2 = await turn(parent, "beta");
    await turn(parent, "gamma");
    const fork = (await client.request("thread/fork", { threadId: parent, lastTurnId: t2.id })).thread;
    expect(fork.turns.map((t: any) => t.id)).toEqual([t1.id, t2.id]);
    expect((await read(fork.id)).turns.map((t: any) => t.id)).toEqual([t1.id, t2.id]);
    const first = (await client.request("thread/fork", { threadId: parent, lastTurnId: t1.id })).thread;
    expect(first.turns.map((t: any) => t.id)).toEqual([t1.id]);

    const other = (await client.request("thread/start", {})).thread.id;
    const foreign = await turn(other, "elsewhere");
    await expect(client.request("thread/fork", { threadId: parent, lastTurnId: foreign.id })).rejects.toMatchObject({ code: -32600 });
    await expect(client.request("thread/fork", { threadId: parent, lastTurnId: "no-such-turn" })).rejects.toMatchObject({ code: -32600 });
    await expect(client.request("thread/fork", { threadId: "no-such-thread" })).rejects.toMatchObject({ code: -32600 });
  });

  it("forking at a running turn → -32600; forking at an earlier turn while it runs works", async () => {
    const { h, client } = ctx;
    const parent = (await client.request("thread/start", {})).thread.id;
    const t1 = await turn(parent, "alpha");
    const gate = deferred();
    h.mock.enqueue({ text: ["be", "ta"], gate: { afterEvents: afterFirstTextDelta("openai"), wait: gate.promise } });
    const running = (await client.request("turn/start", { threadId: parent, input: text("beta") })).turn;
    await client.waitForNotification("item/agentMessage/delta");
    await expect(client.request("thread/fork", { threadId: parent, lastTurnId: running.id })).rejects.toMatchObject({ code: -32600 });
    const fork = (await client.request("thread/fork", { threadId: parent, lastTurnId: t1.id })).thread;
    expect(fork.turns.map((t: any) => t.id)).toEqual([t1.id]);
    gate.open();
    await turnCompleted(client, running.id);
    // The running turn never reached the fork.
    expect((await read(fork.id)).turns.map((t: any) => t.id)).toEqual([t1.id]);
    const next = await turn(fork.id, "fork-only");
    expect(next.request.rawBody).not.toContain("beta");
    expect(next.request.rawBody).toContain("alpha");
  });

  it("a fork of a fork works, and reading it walks the ancestry", async () => {
    const { client } = ctx;
    const p = (await client.request("thread/start", {})).thread.id;
    const t1 = await turn(p, "alpha");
    const t2 = await turn(p, "beta");
    const f1 = (await client.request("thread/fork", { threadId: p })).thread.id;
    const t3 = await turn(f1, "gamma");
    const f2fork = await client.request("thread/fork", { threadId: f1 });
    const f2 = f2fork.thread.id;
    expect(f2fork.thread.forkedFromId).toBe(f1);
    expect(f2fork.thread.turns.map((t: any) => t.id)).toEqual([t1.id, t2.id, t3.id]);
    const t4 = await turn(f2, "delta");
    // Each level extends the one above at its fork point.
    expectExtends("openai", t3.request, t4.request, { sameThread: false });
    expect((await read(f2)).turns.map((t: any) => t.id)).toEqual([t1.id, t2.id, t3.id, t4.id]);
    expect((await read(f1)).turns.map((t: any) => t.id)).toEqual([t1.id, t2.id, t3.id]);
    expect((await read(p)).turns.map((t: any) => t.id)).toEqual([t1.id, t2.id]);
    // The items come from the thread that owns each turn.
    const f2Read = await read(f2);
    expect(f2Read.turns.map((t: any) => t.items.map((i: any) => i.text ?? i.content?.[0]?.text))).toEqual([
      ["alpha", "re:alpha"],
      ["beta", "re:beta"],
      ["gamma", "re:gamma"],
      ["delta", "re:delta"],
    ]);

    // A fork of the fork of the fork, at a turn its grandparent owns.
    const f3 = (await client.request("thread/fork", { threadId: f2, lastTurnId: t1.id })).thread;
    expect(f3.turns.map((t: any) => t.id)).toEqual([t1.id]);
    const t5 = await turn(f3.id, "epsilon");
    expectExtends("openai", t1.request, t5.request, { sameThread: false });
    for (const gone of ["beta", "gamma", "delta"]) expect(t5.request.rawBody).not.toContain(gone);
    expect((await read(f3.id)).turns.map((t: any) => t.id)).toEqual([t1.id, t5.id]);
  });

  it("the parent goes on independently, and a rollback in the parent does not change the fork", async () => {
    const { client } = ctx;
    const parent = (await client.request("thread/start", {})).thread.id;
    const t1 = await turn(parent, "alpha");
    const t2 = await turn(parent, "beta");
    const fork = (await client.request("thread/fork", { threadId: parent })).thread.id;
    const p3 = await turn(parent, "parent-only");
    expectExtends("openai", t2.request, p3.request);
    const rolled = await client.request("thread/rollback", { threadId: parent, numTurns: 2 });
    expect(rolled.thread.turns.map((t: any) => t.id)).toEqual([t1.id]);

    expect((await read(fork)).turns.map((t: any) => t.id)).toEqual([t1.id, t2.id]);
    const f1 = await turn(fork, "fork-only");
    expectExtends("openai", t2.request, f1.request, { sameThread: false });
    expect(f1.request.rawBody).not.toContain("parent-only");
    expect(f1.request.rawBody).toContain("re:beta");

    const p4 = await turn(parent, "parent-again");
    expectExtends("openai", t1.request, p4.request);
    for (const gone of ["beta", "parent-only", "fork-only"]) expect(p4.request.rawBody).not.toContain(gone);
    expect((await read(parent)).turns.map((t: any) => t.id)).toEqual([t1.id, p4.id]);
    expect((await read(fork)).turns.map((t: any) => t.id)).toEqual([t1.id, t2.id, f1.id]);
  });

  it("a rollback in a fork reaches into the turns it inherited, without touching the parent", async () => {
    const { client } = ctx;
    const parent = (await client.request("thread/start", {})).thread.id;
    const t1 = await turn(parent, "alpha");
    const t2 = await turn(parent, "beta");
    const fork = (await client.request("thread/fork", { threadId: parent })).thread.id;
    const f1 = await turn(fork, "fork-one");
    const rolled = await client.request("thread/rollback", { threadId: fork, numTurns: 2 });
    expect(rolled.thread.turns.map((t: any) => t.id)).toEqual([t1.id]);
    const f2 = await turn(fork, "fork-two");
    expectExtends("openai", t1.request, f2.request, { sameThread: false });
    for (const gone of ["beta", "fork-one"]) expect(f2.request.rawBody).not.toContain(gone);
    expect((await read(fork)).turns.map((t: any) => t.id)).toEqual([t1.id, f2.id]);
    // The parent still has both its turns, in its thread and in what it sends the model.
    expect((await read(parent)).turns.map((t: any) => t.id)).toEqual([t1.id, t2.id]);
    const p3 = await turn(parent, "gamma");
    expectExtends("openai", t2.request, p3.request);
    expect(f1.id).not.toBe(p3.id);
  });

  it("a fork made after a rollback has the rolled-back turns neither in its thread nor in its context", async () => {
    const { client } = ctx;
    const parent = (await client.request("thread/start", {})).thread.id;
    const t1 = await turn(parent, "alpha");
    const t2 = await turn(parent, "beta");
    await client.request("thread/rollback", { threadId: parent, numTurns: 1 });
    const fork = (await client.request("thread/fork", { threadId: parent })).thread;
    expect(fork.turns.map((t: any) => t.id)).toEqual([t1.id]);
    const f1 = await turn(fork.id, "fork-one");
    expectExtends("openai", t1.request, f1.request, { sameThread: false });
    expect(f1.request.rawBody).not.toContain("beta");
    expect((await read(fork.id)).turns.map((t: any) => t.id)).toEqual([t1.id, f1.id]);
    // A rolled-back turn is no longer part of the thread: it cannot be a fork point.
    await expect(client.request("thread/fork", { threadId: parent, lastTurnId: t2.id })).rejects.toMatchObject({ code: -32600 });
  });

  it("is cheap: forking a thread with many turns adds the fork's thread row and its thread/started event, nothing else", async () => {
    const { h, client } = ctx;
    const sql = h.ts.server.db.sql;
    const big = (await client.request("thread/start", {})).thread.id;
    const bigTurns: string[] = [];
    for (let i = 0; i < 15; i++) bigTurns.push((await turn(big, `step ${i}`)).id);
    const small = (await client.request("thread/start", {})).thread.id;
    await turn(small, "only");
    const bigRows = await threadRowCounts(sql, big);
    expect(bigRows.model_messages).toBeGreaterThan(30);

    const delta = async (params: object) => {
      const before = await rowCounts(sql);
      const fork = (await client.request("thread/fork", { ...params, excludeTurns: true })).thread.id;
      const after = await rowCounts(sql);
      return { fork, added: Object.fromEntries(Object.keys(before).map((k) => [k, after[k]! - before[k]!])) };
    };
    const nothingCopied = { threads: 1, turns: 0, items: 0, model_messages: 0, thread_events: 1 };
    const ofBig = await delta({ threadId: big });
    const ofSmall = await delta({ threadId: small });
    const atTurn = await delta({ threadId: big, lastTurnId: bigTurns[7] });
    expect(ofBig.added).toEqual(nothingCopied);
    expect(ofSmall.added).toEqual(nothingCopied);
    expect(atTurn.added).toEqual(nothingCopied);
    expect(await threadRowCounts(sql, ofBig.fork)).toEqual(nothingCopied);
    // A settings override costs exactly one message of the fork's own.
    const withSettings = await delta({ threadId: big, approvalPolicy: "never" });
    expect(withSettings.added).toEqual({ ...nothingCopied, model_messages: 1 });
    // The parent is untouched.
    expect(await threadRowCounts(sql, big)).toEqual(bigRows);
    // And the fork is whole: all the parent's turns, and a next request that extends the parent's.
    expect((await read(ofBig.fork)).turns.map((t: any) => t.id)).toEqual(bigTurns);
    expect((await read(atTurn.fork)).turns.map((t: any) => t.id)).toEqual(bigTurns.slice(0, 8));
  });

  it("a fork of a thread with no turns yet, with settings overrides: its first request still opens with the environment context", async () => {
    const { client } = ctx;
    const parent = (await client.request("thread/start", {})).thread.id;
    const fork = await client.request("thread/fork", { threadId: parent, approvalPolicy: "never", developerInstructions: "Be terse." });
    expect(fork.approvalPolicy).toBe("never");
    const t1 = await turn(fork.thread.id, "hello");
    const body = t1.request.rawBody;
    expect(body.split("<environment_context>").length - 1).toBe(1);
    expect(body).toContain("<approval_policy>never</approval_policy>");
    expect(body).toContain("Be terse.");
    const t2 = await turn(fork.thread.id, "again");
    expectExtends("openai", t1.request, t2.request);
  });
});

describe.each(PROVIDERS)("the fork's first request extends the parent's at the fork point (%s)", (provider) => {
  const { ctx, turn } = setup(provider);

  it("system/instructions and tools identical, the parent's conversation up to the fork point a prefix", async () => {
    const { client } = ctx;
    const parent = (await client.request("thread/start", { developerInstructions: "Be brief." })).thread.id;
    const t1 = await turn(parent, "alpha");
    const t2 = await turn(parent, "beta");

    const atT1 = (await client.request("thread/fork", { threadId: parent, lastTurnId: t1.id })).thread.id;
    const f1 = await turn(atT1, "fork at one");
    expectExtends(provider, t1.request, f1.request, { sameThread: false });
    expect(f1.request.rawBody).not.toContain("beta");

    const whole = (await client.request("thread/fork", { threadId: parent })).thread.id;
    const f2 = await turn(whole, "fork at two");
    expectExtends(provider, t2.request, f2.request, { sameThread: false });

    // The parent's next request extends its own last one, without anything of the forks.
    const t3 = await turn(parent, "gamma");
    expectExtends(provider, t2.request, t3.request);
    expect(t3.request.rawBody).not.toContain("fork at");
  });
});
