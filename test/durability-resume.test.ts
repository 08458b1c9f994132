/**
 * Durable threads, part 1: thread/resume (Codex's response shape, subscribing, settings overrides
 * as one appended developer message) and event replay (`afterSeq`, thread/events/list): every
 * stored notification after a seq exactly once, in order, with its original seq and emittedAtMs,
 * then the live ones — also across a reconnect in the middle of a streaming turn.
 */
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { BACKENDS } from "./support/db.js";
import { TestClient, type Frame } from "./support/client.js";
import { PROVIDERS, startTurnHarness, text, turnCompleted, type ProviderName, type TurnHarness } from "./support/turns.js";
import { afterFirstTextDelta, LOOKUP_TOOL } from "./support/wire.js";
import { allEvents, conversationUnits, deferred, expectExtends, isDelta, threadNotifications } from "./support/durability.js";
import { ThreadResumeResponse } from "../src/protocol/thread.js";

const backend = BACKENDS[BACKENDS.length - 1]!; // Postgres when available (faster per test), else PGlite

/** Codex's ThreadResumeResponse fields (reference schema v2), nothing more. */
const RESUME_RESPONSE_KEYS = [
  "activePermissionProfile",
  "approvalPolicy",
  "approvalsReviewer",
  "collaborationMode",
  "cwd",
  "disabledPluginIds",
  "initialTurnsPage",
  "instructionSources",
  "itemsBackwardsCursor",
  "model",
  "modelProvider",
  "reasoningEffort",
  "sandbox",
  "serviceTier",
  "thread",
  "turnsBackwardsCursor",
];

const answer42 = () => ({ contentItems: [{ type: "inputText", text: "42" }], success: true });

/** Notifications that are stored in the event log (not deltas, not per-connection ones). */
const storable = (f: Frame) => !isDelta(f.method) && f.method !== "serverRequest/resolved";

function setup(provider: ProviderName = "openai") {
  const ctx = {} as { h: TurnHarness; client: TestClient; others: TestClient[]; dirs: string[] };
  beforeEach(async () => {
    ctx.h = await startTurnHarness(backend, provider);
    ctx.client = await TestClient.initialized(ctx.h.ts.url);
    ctx.others = [];
    ctx.dirs = [];
  });
  afterEach(async () => {
    for (const c of ctx.others) await c.close();
    await ctx.client?.close();
    await ctx.h?.close();
    for (const d of ctx.dirs) await rm(d, { recursive: true, force: true });
  });
  const connect = async () => {
    const c = await TestClient.initialized(ctx.h.ts.url);
    ctx.others.push(c);
    return c;
  };
  const tmpDir = async () => {
    const d = await mkdtemp(path.join(os.tmpdir(), "aas-cwd-"));
    ctx.dirs.push(d);
    return d;
  };
  return { ctx, connect, tmpDir };
}

describe("thread/resume", () => {
  const { ctx, connect } = setup();

  it("answers with Codex's ThreadResumeResponse: the thread with its turns (none with excludeTurns), settings, null cursors", async () => {
    const { h, client } = ctx;
    const started = await client.request("thread/start", {});
    const threadId = started.thread.id;
    h.mock.enqueue({ text: "one" });
    const { turn } = await client.request("turn/start", { threadId, input: text("first") });
    await turnCompleted(client, turn.id);
    const read = await client.request("thread/read", { threadId, includeTurns: true });

    const other = await connect();
    const resumed = await other.request("thread/resume", { threadId });
    expect(Object.keys(resumed).sort()).toEqual(RESUME_RESPONSE_KEYS);
    // Exactly the schema's shape: parsing (which drops unknown keys) changes nothing.
    expect(ThreadResumeResponse.parse(resumed)).toEqual(resumed);
    expect(resumed).toMatchObject({
      model: "mock-model",
      modelProvider: "openai",
      cwd: started.cwd,
      approvalPolicy: started.approvalPolicy,
      approvalsReviewer: "user",
      sandbox: started.sandbox,
      reasoningEffort: null,
      collaborationMode: null,
      turnsBackwardsCursor: null,
      itemsBackwardsCursor: null,
    });
    expect(resumed.thread).toMatchObject({ id: threadId, preview: "first", status: { type: "idle" }, forkedFromId: null });
    expect(resumed.thread.turns).toEqual(read.thread.turns);
    expect(resumed.thread.turns.map((t: any) => t.id)).toEqual([turn.id]);
    expect(resumed.thread.turns[0].items.map((i: any) => i.type)).toEqual(["userMessage", "agentMessage"]);

    const bare = await other.request("thread/resume", { threadId, excludeTurns: true });
    expect(Object.keys(bare).sort()).toEqual(RESUME_RESPONSE_KEYS);
    expect(bare.thread.turns).toEqual([]);
    expect({ ...bare, thread: { ...bare.thread, turns: resumed.thread.turns } }).toEqual(resumed);
  });

  it("subscribes: a client that resumes while a turn streams gets the rest of that turn", async () => {
    const { h, client } = ctx;
    const threadId = (await client.request("thread/start", {})).thread.id;
    const gate = deferred();
    h.mock.enqueue({ text: ["Hel", "lo ", "wor", "ld"], gate: { afterEvents: afterFirstTextDelta("openai"), wait: gate.promise } });
    const { turn } = await client.request("turn/start", { threadId, input: text("hi") });
    await client.waitForNotification("item/agentMessage/delta");

    const late = await connect();
    const resumed = await late.request("thread/resume", { threadId });
    expect(resumed.thread.status).toEqual({ type: "active", activeFlags: [] });
    expect(resumed.thread.turns.map((t: any) => [t.id, t.status])).toEqual([[turn.id, "inProgress"]]);
    gate.open();
    const done = await turnCompleted(late, turn.id);
    expect(done.params.turn.status).toBe("completed");
    await turnCompleted(client, turn.id);

    // The late client got the rest of the turn, with the same seqs as the first client.
    const lateSeen = threadNotifications(late, threadId);
    expect(lateSeen.map((f) => f.method)).toEqual(expect.arrayContaining(["item/agentMessage/delta", "item/completed", "thread/tokenUsage/updated", "thread/status/changed", "turn/completed"]));
    const bySeq = new Map(threadNotifications(client, threadId).map((f) => [f.params.seq, f]));
    for (const f of lateSeen) expect(bySeq.get(f.params.seq)?.params).toEqual(f.params);
    const agent = late.notifications("item/completed").find((f) => f.params.item.type === "agentMessage")!;
    expect(agent.params.item.text).toBe("Hello world");
    const lateDeltas = late.notifications("item/agentMessage/delta").map((f) => f.params.delta).join("");
    expect("Hello world".endsWith(lateDeltas) && lateDeltas.length > 0).toBe(true);
  });

  it("unknown thread → -32600", async () => {
    await expect(ctx.client.request("thread/resume", { threadId: "no-such-thread" })).rejects.toMatchObject({ code: -32600 });
    await expect(ctx.client.request("thread/resume", { threadId: "no-such-thread", afterSeq: 0 })).rejects.toMatchObject({ code: -32600 });
  });

  it("settings overrides while a turn runs → -32600 (a plain resume is fine)", async () => {
    const { h, client } = ctx;
    const threadId = (await client.request("thread/start", {})).thread.id;
    const gate = deferred();
    h.mock.enqueue({ text: ["a", "b"], gate: { afterEvents: afterFirstTextDelta("openai"), wait: gate.promise } });
    const { turn } = await client.request("turn/start", { threadId, input: text("hi") });
    await client.waitForNotification("item/agentMessage/delta");
    const other = await connect();
    for (const override of [{ approvalPolicy: "never" }, { sandbox: "read-only" }, { cwd: os.tmpdir() }, { developerInstructions: "Be terse." }]) {
      await expect(other.request("thread/resume", { threadId, ...override }), JSON.stringify(override)).rejects.toMatchObject({ code: -32600 });
    }
    const plain = await other.request("thread/resume", { threadId });
    expect(plain.approvalPolicy).toBe("on-request");
    gate.open();
    await turnCompleted(client, turn.id);
    // Nothing of the refused overrides was applied.
    const after = await other.request("thread/resume", { threadId, excludeTurns: true });
    expect(after).toMatchObject({ approvalPolicy: "on-request", sandbox: { type: "workspaceWrite" } });
  });
});

describe.each(PROVIDERS)("thread/resume settings overrides with %s", (provider) => {
  const { ctx, tmpDir } = setup(provider);

  it("append ONE developer settings message after the earlier messages; nothing earlier is rewritten", async () => {
    const { h, client } = ctx;
    const threadId = (await client.request("thread/start", { developerInstructions: "Be brief." })).thread.id;
    h.mock.enqueue({ text: "one" }, { text: "two" }, { text: "three" });
    const t1 = (await client.request("turn/start", { threadId, input: text("first") })).turn;
    await turnCompleted(client, t1.id);

    const cwd = await tmpDir();
    const resumed = await client.request("thread/resume", {
      threadId,
      cwd,
      approvalPolicy: "never",
      sandbox: "read-only",
      developerInstructions: "Answer in French.",
    });
    expect(resumed).toMatchObject({ cwd, approvalPolicy: "never", sandbox: { type: "readOnly" } });
    expect(resumed.thread.cwd).toBe(cwd);

    const t2 = (await client.request("turn/start", { threadId, input: text("second") })).turn;
    await turnCompleted(client, t2.id);
    const [r1, r2] = h.mock.requests;
    // Same system prompt and tools; the first request's conversation is a byte-exact prefix.
    expectExtends(provider, r1!, r2!);
    const before = conversationUnits(provider, r1!.body);
    const added = conversationUnits(provider, r2!.body).slice(before.length);
    // The assistant's answer, the one settings message, the new user message.
    expect(added).toHaveLength(3);
    expect(added[0]).toContain("one");
    expect(added[2]).toContain("second");
    const settings = added[1]!;
    expect(settings).toContain("settings_changed");
    expect(settings).toContain(cwd);
    expect(settings).toContain("never");
    expect(settings).toContain("read-only");
    expect(settings).toContain("Answer in French.");
    expect(added.filter((u) => u.includes("settings_changed"))).toHaveLength(1);
    expect(r2!.rawBody.split("settings_changed").length - 1).toBe(2); // open + close tag of one message

    // A resume that changes nothing appends nothing.
    await client.request("thread/resume", { threadId, cwd, approvalPolicy: "never", sandbox: "read-only" });
    const t3 = (await client.request("turn/start", { threadId, input: text("third") })).turn;
    await turnCompleted(client, t3.id);
    const r3 = h.mock.requests[2]!;
    expectExtends(provider, r2!, r3);
    const added3 = conversationUnits(provider, r3.body).slice(conversationUnits(provider, r2!.body).length);
    expect(added3).toHaveLength(2);
    expect(added3.some((u) => u.includes("settings_changed"))).toBe(false);
  });

  it("developer instructions given on resume before the first turn reach the model", async () => {
    const { h, client } = ctx;
    const threadId = (await client.request("thread/start", {})).thread.id;
    await client.request("thread/resume", { threadId, developerInstructions: "Use metric units." });
    h.mock.enqueue({ text: "ok" }, { text: "ok again" });
    const t1 = (await client.request("turn/start", { threadId, input: text("first") })).turn;
    await turnCompleted(client, t1.id);
    expect(h.mock.requests[0]!.rawBody).toContain("Use metric units.");
    // The thread still opens with its environment context, stated once.
    expect(h.mock.requests[0]!.rawBody.split("<environment_context>").length - 1).toBe(1);
    const t2 = (await client.request("turn/start", { threadId, input: text("second") })).turn;
    await turnCompleted(client, t2.id);
    expectExtends(provider, h.mock.requests[0]!, h.mock.requests[1]!);
  });
});

describe("replay with afterSeq", () => {
  const { ctx, connect } = setup();

  /** A finished turn with a tool call (many events), on a thread whose client answers tools. */
  async function toolTurn(threadId: string, key: string) {
    const { h, client } = ctx;
    h.mock.enqueue({ text: "Looking.", toolCalls: [{ name: "lookup", arguments: { key } }] }, { text: ["It ", "is ", "42."] });
    const { turn } = await client.request("turn/start", { threadId, input: text(`look ${key} up`) });
    await turnCompleted(client, turn.id);
    return turn;
  }

  it("afterSeq 0: every stored notification in order with its original seq and emittedAtMs, then the live ones", async () => {
    const { client } = ctx;
    client.onServerRequest("item/tool/call", answer42);
    const threadId = (await client.request("thread/start", { dynamicTools: [LOOKUP_TOOL] })).thread.id;
    const t1 = await toolTurn(threadId, "a");
    const stored = await allEvents(client, threadId, 0, 3);
    expect(stored.length).toBeGreaterThan(10);
    expect(stored[0]).toMatchObject({ seq: 1, method: "thread/started" });
    // The log holds no deltas; the live deltas did carry seqs, which are not in the log.
    expect(stored.filter((e) => isDelta(e.method))).toEqual([]);
    const liveDeltas = client.notifications().filter((f) => f.params?.threadId === threadId && isDelta(f.method));
    expect(liveDeltas.length).toBeGreaterThan(0);
    for (const d of liveDeltas) expect(Number.isInteger(d.params.seq)).toBe(true);
    const storedSeqs = new Set(stored.map((e) => e.seq));
    for (const d of liveDeltas) expect(storedSeqs.has(d.params.seq)).toBe(false);
    // The log is exactly what the live client was sent, minus deltas and per-connection notices.
    const live = threadNotifications(client, threadId).filter(storable);
    expect(live.map((f) => [f.params.seq, f.method, f.params])).toEqual(stored.map((e) => [e.seq, e.method, e.params]));

    const other = await connect();
    other.onServerRequest("item/tool/call", answer42);
    await other.request("thread/resume", { threadId, afterSeq: 0 });
    await turnCompleted(other, t1.id);
    const replayed = threadNotifications(other, threadId);
    expect(replayed.map((f) => ({ seq: f.params.seq, method: f.method, params: f.params, emittedAtMs: f.emittedAtMs }))).toEqual(
      stored.map((e) => ({ seq: e.seq, method: e.method, params: e.params, emittedAtMs: e.emittedAtMs })),
    );

    // Then live: a new turn reaches both; the resumed client sees every stored seq exactly once.
    const t2 = await toolTurn(threadId, "b");
    await turnCompleted(other, t2.id);
    const all = await allEvents(client, threadId, 0, 5);
    const seen = threadNotifications(other, threadId);
    const seqs = seen.map((f) => f.params.seq);
    for (let i = 1; i < seqs.length; i++) expect(seqs[i]).toBeGreaterThan(seqs[i - 1]);
    expect(seen.filter(storable).map((f) => f.params.seq)).toEqual(all.map((e) => e.seq));
    expect(seen.filter((f) => isDelta(f.method)).length).toBeGreaterThan(0);
  });

  it("live notifications carry the emittedAtMs that is stored (a replay repeats the original time)", async () => {
    const { client } = ctx;
    client.onServerRequest("item/tool/call", answer42);
    const threadId = (await client.request("thread/start", { dynamicTools: [LOOKUP_TOOL] })).thread.id;
    await toolTurn(threadId, "a");
    const stored = new Map((await allEvents(client, threadId, 0, 100)).map((e) => [e.seq, e.emittedAtMs]));
    const live = threadNotifications(client, threadId).filter(storable);
    expect(live.length).toBe(stored.size);
    expect(live.map((f) => [f.params.seq, f.emittedAtMs])).toEqual(live.map((f) => [f.params.seq, stored.get(f.params.seq)]));
  });

  it("afterSeq in the middle: exactly the stored notifications after it", async () => {
    const { client } = ctx;
    client.onServerRequest("item/tool/call", answer42);
    const threadId = (await client.request("thread/start", { dynamicTools: [LOOKUP_TOOL] })).thread.id;
    const t1 = await toolTurn(threadId, "a");
    const stored = await allEvents(client, threadId);
    const middle = stored[Math.floor(stored.length / 2)]!.seq;

    const other = await connect();
    await other.request("thread/resume", { threadId, afterSeq: middle, excludeTurns: true });
    await turnCompleted(other, t1.id);
    expect(threadNotifications(other, threadId).map((f) => f.params.seq)).toEqual(stored.filter((e) => e.seq > middle).map((e) => e.seq));

    // afterSeq at the end: nothing is replayed, but the client is subscribed.
    const last = stored[stored.length - 1]!.seq;
    const third = await connect();
    third.onServerRequest("item/tool/call", answer42);
    await third.request("thread/resume", { threadId, afterSeq: last, excludeTurns: true });
    const t2 = await toolTurn(threadId, "b");
    await turnCompleted(third, t2.id);
    const thirdSeqs = threadNotifications(third, threadId).filter(storable).map((f) => f.params.seq);
    expect(thirdSeqs).toEqual((await allEvents(client, threadId, last)).map((e) => e.seq));
    expect(Math.min(...thirdSeqs)).toBeGreaterThan(last);
  });

  it("reconnect mid-stream: B resumes with A's last seen seq and sees a gap-free continuation", async () => {
    const { h, client } = ctx;
    const threadId = (await client.request("thread/start", {})).thread.id;
    const gate = deferred();
    h.mock.enqueue({ text: ["Hel", "lo ", "wor", "ld"], gate: { afterEvents: afterFirstTextDelta("openai"), wait: gate.promise } });
    const { turn } = await client.request("turn/start", { threadId, input: text("hi") });
    await client.waitForNotification("item/agentMessage/delta");
    const aSeen = threadNotifications(client, threadId);
    const lastSeen = aSeen[aSeen.length - 1]!.params.seq as number;
    expect(aSeen[aSeen.length - 1]!.method).toBe("item/agentMessage/delta");
    await client.close(); // A goes away in the middle of the stream

    const b = await connect();
    const resumed = await b.request("thread/resume", { threadId, afterSeq: lastSeen });
    expect(resumed.thread.turns.map((t: any) => t.status)).toEqual(["inProgress"]);
    gate.open();
    const done = await turnCompleted(b, turn.id);
    expect(done.params.turn.status).toBe("completed");

    const bSeen = threadNotifications(b, threadId);
    const seqs = bSeen.map((f) => f.params.seq as number);
    expect(Math.min(...seqs)).toBeGreaterThan(lastSeen);
    for (let i = 1; i < seqs.length; i++) expect(seqs[i]).toBeGreaterThan(seqs[i - 1]!);
    // Every stored seq after lastSeen exactly once, in order.
    const stored = await allEvents(b, threadId, lastSeen, 2);
    expect(bSeen.filter(storable).map((f) => f.params.seq)).toEqual(stored.map((e) => e.seq));
    // And together A and B saw the whole text.
    const aText = aSeen.filter((f) => f.method === "item/agentMessage/delta").map((f) => f.params.delta).join("");
    const bText = bSeen.filter((f) => f.method === "item/agentMessage/delta").map((f) => f.params.delta).join("");
    expect(aText + bText).toBe("Hello world");
    const completed = bSeen.find((f) => f.method === "item/completed" && f.params.item.type === "agentMessage")!;
    expect(completed.params.item.text).toBe("Hello world");
    // No notification B got is missing from the full log, nor any B got twice.
    expect(new Set(seqs).size).toBe(seqs.length);
  });

  it("a replay longer than one store page (500) is complete and in order", async () => {
    const { client } = ctx;
    const threadId = (await client.request("thread/start", {})).thread.id;
    // Renames are one stored event each: the cheapest way to a long log.
    for (let i = 0; i < 510; i++) await client.request("thread/name/set", { threadId, name: `name ${i}` });
    const stored = await allEvents(client, threadId, 0, 1000);
    expect(stored).toHaveLength(511);
    const other = await connect();
    await other.request("thread/resume", { threadId, afterSeq: 0, excludeTurns: true });
    await other.waitForNotification("thread/name/updated", (p) => p.threadName === "name 509");
    const replayed = threadNotifications(other, threadId);
    expect(replayed.map((f) => [f.params.seq, f.method, f.params, f.emittedAtMs])).toEqual(stored.map((e) => [e.seq, e.method, e.params, e.emittedAtMs]));
  });

  it("thread/events/list pages through the log with nextAfterSeq", async () => {
    const { client } = ctx;
    client.onServerRequest("item/tool/call", answer42);
    const threadId = (await client.request("thread/start", { dynamicTools: [LOOKUP_TOOL] })).thread.id;
    await toolTurn(threadId, "a");
    const everything = await client.request("thread/events/list", { threadId, afterSeq: 0, limit: 1000 });
    expect(everything.nextAfterSeq).toBeNull();
    const n = everything.data.length;
    expect(n).toBeGreaterThan(5);
    for (const e of everything.data) expect(Object.keys(e).sort()).toEqual(["emittedAtMs", "method", "params", "seq"]);
    for (let i = 1; i < n; i++) expect(everything.data[i].seq).toBeGreaterThan(everything.data[i - 1].seq);
    for (const limit of [1, 2, 3, n, n + 1]) expect(await allEvents(client, threadId, 0, limit), `limit ${limit}`).toEqual(everything.data);
    // The defaults: from the start, up to 200.
    expect((await client.request("thread/events/list", { threadId })).data).toEqual(everything.data);
    // A full last page still points on; the page after it is empty.
    const exact = await client.request("thread/events/list", { threadId, afterSeq: 0, limit: n });
    expect(exact.nextAfterSeq).toBe(everything.data[n - 1].seq);
    expect(await client.request("thread/events/list", { threadId, afterSeq: exact.nextAfterSeq, limit: n })).toEqual({ data: [], nextAfterSeq: null });
    await expect(client.request("thread/events/list", { threadId: "nope" })).rejects.toMatchObject({ code: -32600 });
    await expect(client.request("thread/events/list", { threadId, limit: 0 })).rejects.toMatchObject({ code: -32602 });
  });
});
