// @needs-os-sandbox: the approval case runs a shell command in the OS sandbox of the owner process.
/**
 * Several server processes on one Postgres (issue 12): real `app-server serve` processes on a
 * fresh database. A process started during a live turn leaves it alone; a second turn on the same
 * thread from another process gets the normal "already running" error; seq stays unique and
 * increasing across processes; a client on a non-owner process sees live deltas, the approval
 * (answered there, the command runs once), and its interrupt and steer reach the owner; a killed
 * owner's turn is closed by another process; names and settings are the same everywhere.
 */
import { readFileSync, existsSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { TEST_DATABASE_URL } from "./support/db.js";
import type { TestClient } from "./support/client.js";
import { text, turnCompleted } from "./support/turns.js";
import { afterFirstTextDelta } from "./support/wire.js";
import { deferred, threadNotifications } from "./support/durability.js";
import { makeWorkspace, COMMAND_APPROVAL } from "./support/approvals.js";
import { eventually, useCluster } from "./support/cluster.js";
import { shellInvocation } from "../src/tools/shell-invocation.js";

const TIMEOUT = 120_000;
const LIVE_LEASES = { APP_SERVER_LEASE_TTL_MS: "30000" };
const SHORT_LEASES = { APP_SERVER_LEASE_TTL_MS: "1500" };

describe.skipIf(!TEST_DATABASE_URL)("several processes on one Postgres", () => {
  // Live processes keep their leases for 30 s without a heartbeat: with the short TTL of
  // support/cluster.ts a process starved of CPU for 1.5 s on a loaded machine would lose its
  // thread to a peer's sweeper, and the verdict would depend on machine speed. Only the kill -9
  // test, where a takeover is the point, spawns its processes with the short TTL.
  const fx = useCluster(LIVE_LEASES);

  const gated = (chunks: string[]) => {
    const gate = deferred();
    fx.gates.push(gate.open);
    fx.mock.enqueue({ text: chunks, gate: { afterEvents: afterFirstTextDelta("openai"), wait: gate.promise } });
    return gate;
  };
  const seqsOf = (c: TestClient, threadId: string) => threadNotifications(c, threadId).map((f) => f.params.seq as number);
  const expectIncreasing = (seqs: number[]) => {
    for (let i = 1; i < seqs.length; i++) expect(seqs[i], `seq ${i}`).toBeGreaterThan(seqs[i - 1]!);
  };
  const storedSeqs = async (threadId: string) =>
    (await fx.sql<{ seq: number }[]>`select seq from thread_events where thread_id = ${threadId} order by seq`).map((r) => Number(r.seq));

  it("a live turn: a process starting meanwhile leaves it alone, another process's client sees its live deltas, a second turn is refused", async () => {
    const { a, b, ca, cb } = await fx.cluster.pair();
    const threadId = (await ca.request("thread/start", {})).thread.id;
    const gate = gated(["Hel", "lo ", "wor", "ld"]);
    const t1 = (await ca.request("turn/start", { threadId, input: text("hi") })).turn;
    await ca.waitForNotification("item/agentMessage/delta", (p) => p.turnId === t1.id);

    // A third process starts during the live turn: its start-up recovery must not touch it.
    await fx.cluster.spawn();
    const [turnRow] = await fx.sql`select status from turns where id = ${t1.id}`;
    expect(turnRow!.status).toBe("inProgress");

    await cb.request("thread/resume", { threadId, afterSeq: 0 });
    // Same thread, other process: the normal error, not a database error.
    await expect(cb.request("turn/start", { threadId, input: text("second") })).rejects.toThrow(/already running/);
    gate.open();
    const done = await turnCompleted(cb, t1.id);
    expect(done.params.turn.status).toBe("completed");
    await turnCompleted(ca, t1.id);
    // B saw the live deltas relayed from A, in seq order with the stored events, no duplicates.
    const bDeltas = cb.notifications("item/agentMessage/delta").filter((f) => f.params.turnId === t1.id);
    expect(bDeltas.map((f) => f.params.delta).join("")).toContain("ld");
    const bSeqs = seqsOf(cb, threadId);
    expectIncreasing(bSeqs);
    const stored = await storedSeqs(threadId);
    expect(bSeqs.filter((s) => stored.includes(s))).toEqual(stored);
    // Exactly one ending in the log.
    const [ends] = await fx.sql`select count(*)::int as n from thread_events where thread_id = ${threadId} and method = 'turn/completed'`;
    expect(ends!.n).toBe(1);
  }, TIMEOUT);

  it("a delta larger than one NOTIFY payload reaches a client on another process live and whole", async () => {
    const { a, b, ca, cb } = await fx.cluster.pair();
    const threadId = (await ca.request("thread/start", {})).thread.id;
    await cb.request("thread/resume", { threadId });
    const big = `${"große Ähnlichkeit 😀 \"quoted\" ".repeat(1_500)}end`; // ~45 KB in one chunk
    const gate = gated(["start ", big, " tail"]);
    const t1 = (await ca.request("turn/start", { threadId, input: text("big") })).turn;
    await ca.waitForNotification("item/agentMessage/delta", (p) => p.turnId === t1.id);
    gate.open();
    await turnCompleted(cb, t1.id);
    // The deltas (not only item/completed) carried the big chunk to B's client, in one piece.
    expect(cb.notifications("item/agentMessage/delta").some((f) => f.params.turnId === t1.id && f.params.delta === big)).toBe(true);
    const bText = cb
      .notifications("item/agentMessage/delta")
      .filter((f) => f.params.turnId === t1.id)
      .map((f) => f.params.delta)
      .join("");
    expect(bText).toBe(`start ${big} tail`);
  }, TIMEOUT);

  it("turns alternating between processes: seq unique and increasing, settings and names the same everywhere", async () => {
    const { a, b, ca, cb } = await fx.cluster.pair();
    const threadId = (await ca.request("thread/start", {})).thread.id;
    for (const [client, word] of [[ca, "one"], [cb, "two"], [ca, "three"], [cb, "four"]] as const) {
      fx.mock.enqueue({ text: `re:${word}` });
      const t = (await client.request("turn/start", { threadId, input: text(word) })).turn;
      expect((await turnCompleted(client, t.id)).params.turn.status).toBe("completed");
    }
    const stored = await storedSeqs(threadId);
    expectIncreasing(stored);
    // The fourth request (on B) carries every earlier turn: B's history caches were reloaded.
    expect(fx.mock.requests[3]!.rawBody).toContain("re:three");
    const [turns] = await fx.sql`select count(*)::int as n, count(distinct ordinal)::int as d from turns where thread_id = ${threadId}`;
    expect(turns).toMatchObject({ n: 4, d: 4 });

    await cb.request("thread/name/set", { threadId, name: "renamed on B" });
    const listed = (await ca.request("thread/list", {})).data.find((t: any) => t.id === threadId);
    expect(listed.name).toBe("renamed on B");
    expect((await ca.request("thread/read", { threadId })).thread.name).toBe("renamed on B");
    // A setting changed through B applies to the next turn on A.
    await cb.request("thread/resume", { threadId, approvalPolicy: "untrusted" });
    const [row] = await fx.sql`select approval_policy from threads where id = ${threadId}`;
    expect(row!.approvalPolicy ?? row!.approval_policy).toBe("untrusted");
    fx.mock.enqueue({ toolCalls: [{ name: "shell", arguments: { command: "touch x" } }] }, { text: "ok" });
    const t5 = (await ca.request("turn/start", { threadId, input: text("five") })).turn;
    const asked = await ca.waitFor((f) => f.method === COMMAND_APPROVAL && f.id !== undefined);
    expect(asked.params.turnId).toBe(t5.id);
    ca.respond(asked.id, { decision: "decline" });
    await turnCompleted(ca, t5.id);
    expectIncreasing(await storedSeqs(threadId));
  }, TIMEOUT);

  it("an approval answered on another process runs the command exactly once; interrupt and steer from there reach the owner", async () => {
    const ws = makeWorkspace();
    try {
      const { a, b, ca, cb } = await fx.cluster.pair();
      const threadId = (await ca.request("thread/start", { cwd: ws.dir, approvalPolicy: "untrusted" })).thread.id;
      await cb.request("thread/resume", { threadId });
      fx.mock.enqueue({ toolCalls: [{ name: "shell", arguments: { command: "echo ran >> runs.txt" } }] }, { text: "Done." });
      const t1 = (await ca.request("turn/start", { threadId, input: text("run it") })).turn;
      const onA = await ca.waitFor((f) => f.method === COMMAND_APPROVAL && f.id !== undefined);
      const onB = await cb.waitFor((f) => f.method === COMMAND_APPROVAL && f.id !== undefined);
      expect(onB.params.itemId).toBe(onA.params.itemId);
      cb.respond(onB.id, { decision: "accept" });
      await ca.waitForNotification("serverRequest/resolved", () => true);
      ca.respond(onA.id, { decision: "accept" }); // too late: must not run it again
      expect((await turnCompleted(cb, t1.id)).params.turn.status).toBe("completed");
      await turnCompleted(ca, t1.id);
      expect(readFileSync(path.join(ws.dir, "runs.txt"), "utf8")).toBe("ran\n");
      // serverRequest/resolved is not stored. On B, which does not run the turn, it must not take
      // a number of the owner's seq block: the events after it would arrive with lower seqs, and
      // a client resuming after the highest seq it saw would miss them.
      const resolvedOnB = cb.notifications("serverRequest/resolved").find((f) => f.params.threadId === threadId)!;
      const endOnB = cb.notifications("turn/completed").find((f) => f.params.turn.id === t1.id)!;
      expect(resolvedOnB.params.seq).toBeLessThan(endOnB.params.seq);
      const seqsOnB = seqsOf(cb, threadId);
      for (let i = 1; i < seqsOnB.length; i++) expect(seqsOnB[i], `seq ${i} on B`).toBeGreaterThanOrEqual(seqsOnB[i - 1]!);

      const gate = gated(["a", "b", "c"]);
      fx.mock.enqueue({ text: "after steer" });
      const t2 = (await ca.request("turn/start", { threadId, input: text("long") })).turn;
      await cb.waitForNotification("item/agentMessage/delta", (p) => p.turnId === t2.id);
      expect(await cb.request("turn/steer", { threadId, expectedTurnId: t2.id, input: text("steered from B") })).toEqual({ turnId: t2.id });
      gate.open();
      expect((await turnCompleted(cb, t2.id)).params.turn.status).toBe("completed");
      expect(fx.mock.requests[fx.mock.requests.length - 1]!.rawBody).toContain("steered from B");

      const gate3 = gated(["x", "y"]);
      const t3 = (await ca.request("turn/start", { threadId, input: text("stop me") })).turn;
      await cb.waitForNotification("item/agentMessage/delta", (p) => p.turnId === t3.id);
      expect(await cb.request("turn/interrupt", { threadId, turnId: t3.id })).toEqual({});
      expect((await turnCompleted(cb, t3.id)).params.turn.status).toBe("interrupted");
      gate3.open();
      expect(existsSync(path.join(ws.dir, "runs.txt"))).toBe(true);
    } finally {
      ws.cleanup();
    }
  }, TIMEOUT);

  it("a client that resumes on another process while an approval is pending there gets it; its answer settles it once", async () => {
    // Issue 31: B loaded the thread after A asked; nothing relayed since would have shown it.
    const ws = makeWorkspace();
    try {
      const { ca, cb } = await fx.cluster.pair();
      const threadId = (await ca.request("thread/start", { cwd: ws.dir, approvalPolicy: "untrusted" })).thread.id;
      fx.mock.enqueue({ toolCalls: [{ name: "shell", arguments: { command: "echo ran >> runs.txt" } }] }, { text: "Done." });
      const t1 = (await ca.request("turn/start", { threadId, input: text("run it") })).turn;
      const onA = await ca.waitFor((f) => f.method === COMMAND_APPROVAL && f.id !== undefined);
      await cb.request("thread/resume", { threadId });
      const onB = await cb.waitFor((f) => f.method === COMMAND_APPROVAL && f.id !== undefined);
      expect(onB.params).toEqual(onA.params);
      cb.respond(onB.id, { decision: "accept" });
      await ca.waitForNotification("serverRequest/resolved", (p) => p.requestId === onA.id);
      expect((await turnCompleted(ca, t1.id)).params.turn.status).toBe("completed");
      expect((await turnCompleted(cb, t1.id)).params.turn.status).toBe("completed");
      expect(readFileSync(path.join(ws.dir, "runs.txt"), "utf8")).toBe("ran\n");
    } finally {
      ws.cleanup();
    }
  }, TIMEOUT);

  it("a user shell command (the TUI's !cmd) sent to another process runs in the owner's turn, once, and its client sees it", async () => {
    const ws = makeWorkspace();
    try {
      const { ca, cb } = await fx.cluster.pair();
      const threadId = (await ca.request("thread/start", { cwd: ws.dir, sandbox: "workspace-write" })).thread.id;
      await cb.request("thread/resume", { threadId });
      const gate = gated(["a", "b"]);
      const t1 = (await ca.request("turn/start", { threadId, input: text("long") })).turn;
      await cb.waitForNotification("item/agentMessage/delta", (p) => p.turnId === t1.id);
      // Before: B had no turn of its own and could not claim the thread (-32600): the TUI exited.
      expect(await cb.request("thread/shellCommand", { threadId, command: "echo from-b >> b.txt" })).toEqual({});
      const ran = await cb.waitForNotification("item/completed", (p) => p.item?.type === "commandExecution" && p.item.source === "userShell");
      expect(ran.params.turnId).toBe(t1.id);
      expect(ran.params.item).toMatchObject({ status: "completed", exitCode: 0 });
      gate.open();
      expect((await turnCompleted(cb, t1.id)).params.turn.status).toBe("completed");
      await turnCompleted(ca, t1.id);
      expect(readFileSync(path.join(ws.dir, "b.txt"), "utf8")).toBe("from-b\n");
      const turns = (await cb.request("thread/read", { threadId, includeTurns: true })).thread.turns;
      expect(turns.map((t: any) => t.id)).toEqual([t1.id]);
      expect(turns[0].items.filter((i: any) => i.type === "commandExecution").map((i: any) => i.command)).toEqual([shellInvocation("echo from-b >> b.txt")]);
      // With no turn running, a command from B is a turn of its own (on whichever process holds the thread).
      await cb.request("thread/shellCommand", { threadId, command: "echo again >> b.txt" });
      const own = await cb.waitForNotification("turn/started", (p) => p.threadId === threadId && p.turn.id !== t1.id);
      expect((await turnCompleted(cb, own.params.turn.id)).params.turn.status).toBe("completed");
      expect(readFileSync(path.join(ws.dir, "b.txt"), "utf8")).toBe("from-b\nagain\n");
    } finally {
      ws.cleanup();
    }
  }, TIMEOUT);

  it("kill -9 of the owner: another process closes its turn once the lease expires, and the thread takes new turns", async () => {
    const { a, b, ca, cb } = await fx.cluster.pair(SHORT_LEASES);
    const threadId = (await ca.request("thread/start", {})).thread.id;
    // B follows the thread before the turn: a delta relayed before it follows is never replayed.
    await cb.request("thread/resume", { threadId });
    gated(["Hel", "lo"]);
    const t1 = (await ca.request("turn/start", { threadId, input: text("hi") })).turn;
    await cb.waitForNotification("item/agentMessage/delta", (p) => p.turnId === t1.id);
    a.proc.child.kill("SIGKILL");
    await a.proc.exited;
    const done = await turnCompleted(cb, t1.id, 60_000);
    expect(done.params.turn).toMatchObject({ status: "interrupted" });
    const [row] = await eventually(async () => {
      const rows = await fx.sql`select status from turns where id = ${t1.id}`;
      return rows[0]?.status === "interrupted" ? rows : null;
    });
    expect(row!.status).toBe("interrupted");
    fx.mock.enqueue({ text: "again" });
    const t2 = (await cb.request("turn/start", { threadId, input: text("again") })).turn;
    expect((await turnCompleted(cb, t2.id)).params.turn.status).toBe("completed");
    expectIncreasing(await storedSeqs(threadId));
  }, TIMEOUT);
});
