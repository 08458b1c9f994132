/**
 * Relays only while another process exists (issue 16): real `app-server serve` processes on a fresh
 * Postgres. A lone process streams a whole turn without one NOTIFY on the thread's channel; a
 * process started while the first one's turn is mid-stream is relayed to from its start (a client
 * resumed there gets every later delta live, in order, and the same items); once it stops and
 * unregisters, the first process stops relaying again. A process frozen past its lease (taken for
 * dead, so not relayed to) delivers what was committed meanwhile once it wakes. The test listens on the thread's channel
 * itself (the channel name is fanout.ts's).
 */
import { describe, expect, it } from "vitest";
import { threadChannel, type FanoutMessage } from "../src/runtime/fanout.js";
import { TEST_DATABASE_URL } from "./support/db.js";
import type { TestClient } from "./support/client.js";
import { text, turnCompleted } from "./support/turns.js";
import { afterFirstTextDelta } from "./support/wire.js";
import { deferred } from "./support/durability.js";
import { eventually, useCluster } from "./support/cluster.js";
import { parseJson } from "./support/process.js";

const TIMEOUT = 120_000;

describe.skipIf(!TEST_DATABASE_URL)("relaying through Postgres only while another process exists", () => {
  // A 6 s lease TTL (heartbeat every 2 s): short enough for step 3 (A notices B left on its next
  // heartbeat), long enough that a process starved of CPU for a moment on a loaded machine keeps
  // its thread (with support/cluster.ts's 1.5 s the other process's sweeper could take it).
  const fx = useCluster({ APP_SERVER_LEASE_TTL_MS: "6000" });

  const deltasOf = (c: TestClient, turnId: string) =>
    c.notifications("item/agentMessage/delta").filter((f) => f.params.turnId === turnId).map((f) => ({ seq: f.params.seq as number, delta: f.params.delta as string }));
  const chunks = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}${i} `);

  it("a lone process relays nothing; a joining process is relayed to from its start; after it leaves, relaying stops", async () => {
    const a = await fx.cluster.spawn();
    const ca = await fx.cluster.connect(a);
    const threadId = (await ca.request("thread/start", {})).thread.id;
    // Everything notified on the thread's channel, by anyone, for the whole test.
    const heard: FanoutMessage[] = [];
    const listener = await fx.sql.listen(threadChannel(threadId), (payload) => heard.push(JSON.parse(payload) as FanoutMessage));
    try {
      // 1. Alone: a whole turn, not one relay.
      fx.mock.enqueue({ text: chunks("alone", 20), chunkDelayMs: 5 });
      const t1 = (await ca.request("turn/start", { threadId, input: text("one") })).turn;
      const end1 = await turnCompleted(ca, t1.id);
      expect(end1.params.turn.status).toBe("completed");
      const lastSeq1 = end1.params.seq as number;

      // 2. A turn is mid-stream on A (held after its first delta) when B starts.
      const gate = deferred();
      fx.gates.push(gate.open);
      fx.mock.enqueue({ text: chunks("joined", 30), chunkDelayMs: 5, gate: { afterEvents: afterFirstTextDelta("openai"), wait: gate.promise } });
      const t2 = (await ca.request("turn/start", { threadId, input: text("two") })).turn;
      await ca.waitForNotification("item/agentMessage/delta", (p) => p.turnId === t2.id);
      const b = await fx.cluster.spawn();
      const cb = await fx.cluster.connect(b);
      await cb.request("thread/resume", { threadId });
      gate.open();
      const end2 = await turnCompleted(cb, t2.id);
      await turnCompleted(ca, t2.id);
      // Every delta after the resume, live, in order: all but the one sent before B existed.
      const aDeltas = deltasOf(ca, t2.id);
      expect(aDeltas).toHaveLength(30);
      expect(deltasOf(cb, t2.id)).toEqual(aDeltas.slice(1));
      // The turn's items complete identically on both processes.
      const aEnd = ca.notifications("turn/completed").find((f) => f.params.turn.id === t2.id)!;
      expect(end2.params.turn.items).toEqual(aEnd.params.turn.items);
      expect(end2.params.turn.status).toBe("completed");
      // The relays B got came through the channel (this test's listener heard them too) — and none
      // of turn 1's, which ran alone (anything of it would have been sent before turn 2's relays).
      await eventually(async () => heard.some((m) => m.d.some((d) => d[2].turnId === t2.id)));
      expect(heard.some((m) => m.d.some((d) => d[2].turnId === t1.id))).toBe(false);
      expect(heard.every((m) => m.m === 0 || m.m > lastSeq1)).toBe(true);

      // 3. B stops (a clean exit unregisters it): A's next heartbeat finds nobody and stops relaying.
      b.proc.child.kill("SIGTERM");
      expect((await b.proc.exited).code).toBe(0);
      await eventually(async () => a.proc.stderrLines.map(parseJson).some((l) => l?.msg === "no other live process: relaying stopped"), 1200);
      const heardBefore3 = heard.length;
      fx.mock.enqueue({ text: chunks("again", 20), chunkDelayMs: 5 });
      const t3 = (await ca.request("turn/start", { threadId, input: text("three") })).turn;
      const end3 = await turnCompleted(ca, t3.id);
      const lastSeq3 = end3.params.seq as number;

      // 4. A third process joins; A relays turn 4 to it. Nothing of turn 3 was notified (it would
      //    have come before turn 4's relays on the same channel).
      const c = await fx.cluster.spawn();
      const cc = await fx.cluster.connect(c);
      await cc.request("thread/resume", { threadId });
      fx.mock.enqueue({ text: chunks("four", 5), chunkDelayMs: 5 });
      const t4 = (await ca.request("turn/start", { threadId, input: text("four") })).turn;
      await turnCompleted(cc, t4.id);
      await eventually(async () => heard.some((m) => m.m >= lastSeq3 + 1));
      const after = heard.slice(heardBefore3);
      expect(after.some((m) => m.d.some((d) => d[2].turnId === t3.id))).toBe(false);
      expect(after.every((m) => m.m === 0 || m.m > lastSeq3)).toBe(true);
    } finally {
      await listener.unlisten();
    }
  }, TIMEOUT);

  it("a process taken for dead (frozen past its lease) delivers on waking what its followed thread committed meanwhile", async () => {
    const { a, b, ca, cb } = await fx.cluster.pair();
    const threadId = (await ca.request("thread/start", {})).thread.id;
    await cb.request("thread/resume", { threadId });
    const stopped = () => a.proc.stderrLines.map(parseJson).filter((l) => l?.msg === "no other live process: relaying stopped").length;
    let t1 = "";
    try {
      // B freezes (its database connections stay open, so no reconnect makes it read the log);
      // its lease expires and A's next heartbeat stops relaying.
      b.proc.child.kill("SIGSTOP");
      await eventually(async () => stopped() > 0, 1200);
      // A turn on A while nobody is relayed to: no wake-up reaches B.
      fx.mock.enqueue({ text: chunks("unseen", 5), chunkDelayMs: 5 });
      t1 = (await ca.request("turn/start", { threadId, input: text("while B sleeps") })).turn.id;
      await turnCompleted(ca, t1);
    } finally {
      b.proc.child.kill("SIGCONT");
    }
    // B wakes: its first heartbeat comes after a gap, it joins again and reads the log.
    const onB = await turnCompleted(cb, t1, 60_000);
    expect(onB.params.turn.status).toBe("completed");
    const endOnA = ca.notifications("turn/completed").find((f) => f.params.turn.id === t1)!;
    expect(onB.params.seq).toBe(endOnA.params.seq);
    expect(onB.params.turn.items).toEqual(endOnA.params.turn.items);
    // A relays again (B's hello), and B's client gets the next turn live too.
    fx.mock.enqueue({ text: chunks("seen", 5), chunkDelayMs: 5 });
    const t2 = (await ca.request("turn/start", { threadId, input: text("awake") })).turn;
    expect((await turnCompleted(cb, t2.id, 60_000)).params.turn.status).toBe("completed");
  }, TIMEOUT);
});
