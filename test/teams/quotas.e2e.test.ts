/**
 * Per-user quotas (issue 28, item 4): concurrent turns hold under a burst (exactly the limit
 * start, the rest get -32003 "Quota exceeded", another user is unaffected, a slot frees when its
 * turn ends); model tokens per day from the providers' usage, visible in account/usage/read and
 * per user in /metrics; requests per second.
 */
import { afterEach, describe, expect, it } from "vitest";
import { eventually } from "../support/cluster.js";
import { BACKENDS } from "../support/db.js";
import { deferred } from "../support/durability.js";
import { text, turnCompleted } from "../support/turns.js";
import { afterFirstTextDelta } from "../support/wire.js";
import { SERVER_TOKEN, startTeamServer, type TeamServer } from "./support.js";

const backend = BACKENDS[BACKENDS.length - 1]!;
const QUOTA_EXCEEDED = -32003;

describe("per-user quotas", () => {
  let t: TeamServer | undefined;
  const gates: Array<() => void> = [];
  afterEach(async () => {
    for (const open of gates.splice(0)) open();
    await t?.close();
  });

  it("lets exactly N turns of a user start under a concurrent burst, refuses the rest, leaves other users alone, frees a slot when a turn ends", async () => {
    t = await startTeamServer(backend, { team: { quotas: { maxConcurrentTurns: 2 } } });
    const [alice, bob] = [await t.as(t.users.alice), await t.as(t.users.bob)];
    const aliceThreads = await Promise.all(Array.from({ length: 5 }, async () => (await alice.request("thread/start", {})).thread.id as string));
    const bobThreads = await Promise.all(Array.from({ length: 2 }, async () => (await bob.request("thread/start", {})).thread.id as string));
    const gate = deferred();
    gates.push(gate.open);
    for (let i = 0; i < 4; i++) t.mock.enqueue({ text: ["held ", "answer"], gate: { afterEvents: afterFirstTextDelta("openai"), wait: gate.promise } });

    const burst = await Promise.all([
      ...aliceThreads.map((threadId) => alice.requestRaw("turn/start", { threadId, input: text("go") }).then((f) => ({ who: "alice", threadId, f }))),
      ...bobThreads.map((threadId) => bob.requestRaw("turn/start", { threadId, input: text("go") }).then((f) => ({ who: "bob", threadId, f }))),
    ]);
    const started = (who: string) => burst.filter((b) => b.who === who && b.f.result);
    const refused = burst.filter((b) => b.f.error);
    expect(started("alice")).toHaveLength(2);
    expect(started("bob")).toHaveLength(2);
    expect(refused).toHaveLength(3);
    for (const r of refused) {
      expect(r.who).toBe("alice");
      expect(r.f.error).toEqual({
        code: QUOTA_EXCEEDED,
        message: "Quota exceeded: 2 turns of this user are running already; retry when one has ended",
        data: { quota: "concurrentTurns", limit: 2 },
      });
      // Nothing was recorded for a refused turn.
      expect((await alice.request("thread/read", { threadId: r.threadId, includeTurns: true })).thread.turns).toEqual([]);
    }
    const usage = await alice.request("account/usage/read", {});
    expect(usage.quota).toMatchObject({ activeTurns: 2, maxConcurrentTurns: 2 });

    gate.open();
    for (const s of started("alice")) await turnCompleted(alice, s.f.result.turn.id);
    for (const s of started("bob")) await turnCompleted(bob, s.f.result.turn.id);
    // The slots come back once the turns have ended (a bounded wait: the release is written after the end).
    t.mock.enqueue({ text: "again" });
    const again = await eventually(async () => {
      const f = await alice.requestRaw("turn/start", { threadId: refused[0]!.threadId, input: text("now") });
      if (f.error && f.error.code !== QUOTA_EXCEEDED) throw new Error(JSON.stringify(f.error));
      return f.result ?? null;
    }, 100, 50);
    await turnCompleted(alice, again.turn.id);
  });

  it("refuses new turns of a user over its daily tokens, counted from the providers' usage; shows them in account/usage/read and /metrics", async () => {
    t = await startTeamServer(backend, { team: { quotas: { tokensPerDay: 100 } } });
    const [alice, bob, carol] = [await t.as(t.users.alice), await t.as(t.users.bob), await t.as(t.users.carol)];
    const thread = (await alice.request("thread/start", {})).thread.id;
    t.mock.enqueue({ text: "spent", usage: { input: 80, output: 30 } });
    const { turn } = await alice.request("turn/start", { threadId: thread, input: text("spend") });
    await turnCompleted(alice, turn.id);
    const usage = await eventually(async () => {
      const u = await alice.request("account/usage/read", {});
      // The usage is added after the turn's answer; one read may see it in one query and not yet in the other.
      return u.quota.tokensToday >= 110 && u.dailyUsageBuckets.length > 0 ? u : null;
    }, 100, 50);
    expect(usage.quota).toMatchObject({ tokensToday: 110, tokensPerDay: 100, activeTurns: 0 });
    expect(usage.user).toEqual({ userId: t.users.alice.record.id, name: "alice" });
    expect(usage.dailyUsageBuckets).toEqual([{ startDate: new Date().toISOString().slice(0, 10), tokens: 110 }]);

    const over = await alice.requestRaw("turn/start", { threadId: thread, input: text("more") });
    expect(over.error).toEqual({
      code: QUOTA_EXCEEDED,
      message: "Quota exceeded: 110 of 100 model tokens used today (UTC); new turns start again tomorrow",
      data: { quota: "tokensPerDay", limit: 100, used: 110 },
    });
    // bob's quota is his own.
    const bobs = (await bob.request("thread/start", {})).thread.id;
    t.mock.enqueue({ text: "fine" });
    await turnCompleted(bob, (await bob.request("turn/start", { threadId: bobs, input: text("hi") })).turn.id);
    // An admin reads anyone's usage; a user only its own.
    expect((await carol.request("account/usage/read", { user: "alice" })).quota.tokensToday).toBe(110);
    expect((await bob.requestRaw("account/usage/read", { user: "alice" })).error?.code).toBe(-32602);

    const metrics = async (token: string) => fetch(`${t!.ts.httpUrl}/metrics`, { headers: { authorization: `Bearer ${token}` } });
    const text_ = await (await metrics(SERVER_TOKEN)).text();
    expect(text_).toContain('app_server_user_tokens_total{user="alice",kind="input"} 80');
    expect(text_).toContain('app_server_user_tokens_total{user="alice",kind="output"} 30');
    expect((await metrics(t.users.carol.token)).status).toBe(200);
    expect((await metrics(t.users.alice.token)).status).toBe(403);
  });

  it("limits a user's requests per second (another user's bucket is its own)", async () => {
    t = await startTeamServer(backend, { team: { quotas: { requestsPerSecond: 2 } } });
    const [alice, bob] = [await t.as(t.users.alice), await t.as(t.users.bob)];
    const started = performance.now();
    const answers = await Promise.all(Array.from({ length: 30 }, () => alice.requestRaw("model/list", {})));
    const elapsedSeconds = (performance.now() - started) / 1000;
    const ok = answers.filter((a) => a.result).length;
    const limited = answers.filter((a) => a.error);
    // A burst of 4 (twice the rate) plus what refilled meanwhile, whatever the machine's speed.
    expect(ok).toBeLessThanOrEqual(4 + Math.ceil(elapsedSeconds * 2));
    expect(limited.length).toBe(30 - ok);
    for (const a of limited) {
      expect(a.error).toMatchObject({ code: QUOTA_EXCEEDED, message: "Quota exceeded: more than 2 requests per second; retry later", data: { quota: "requestsPerSecond", limit: 2 } });
      expect(a.error.data.retryAfterMs).toBeGreaterThan(0);
    }
    expect((await bob.requestRaw("model/list", {})).result).toBeDefined();
  });
});
