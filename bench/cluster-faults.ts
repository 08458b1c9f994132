/**
 * Issue 31: the cluster when one process loses its database. Three real `app-server serve`
 * processes on a fresh Postgres database: A and B connect directly, C through a TCP proxy on
 * loopback (test/support/tcp-proxy.ts) that the bench cuts. Lease TTL 1.5 s, sweep every 250 ms.
 *   1. Relay latency: a turn on A streams 100 deltas 5 ms apart; B's client follows the thread.
 *      Added delay per delta (arrival at B − arrival at A, same clock): p50/p99/max, first with all
 *      links up, then while C's link is cut (a faulted process must not slow the others).
 *   2. Takeover: C runs a turn whose command waits for a file; the bench cuts C's link and lets
 *      the command finish. Measured: cut → the turn closed in the database by another process's
 *      sweeper; link restored → C's client told that stored ending. Rounds: --rounds=N (default 5).
 *   3. The same when C's link hangs (TCP up, nothing moves) mid-transaction, holding the thread's
 *      row: stall → swept (the server ends C's idle transaction after C's lease TTL); relay
 *      latency between A and B while C hangs is measured in 1.
 *   4. A slow link: every chunk between C and the database waits SLOW_MS each way (a congested or
 *      distant database). Relay A → B while C is slow (measured in 1), and C's own turns (start →
 *      completed at C's client) with its link healthy and slow: slow, not broken, and alone.
 * Run: TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx bench/cluster-faults.ts
 * Only 127.0.0.1 traffic; every wait is bounded.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import postgres from "postgres";
import { startMockModelServer } from "../test/support/mock-model-server.js";
import { freshPostgresDatabase } from "../test/support/durability.js";
import { Cluster, eventually } from "../test/support/cluster.js";
import { RpcError, type TestClient } from "../test/support/client.js";
import { TcpProxy } from "../test/support/tcp-proxy.js";
import { text, turnCompleted } from "../test/support/turns.js";

const url = process.env.TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
const ROUNDS = Number(process.argv.find((a) => a.startsWith("--rounds="))?.slice(9) ?? 5);
const SLOW_MS = 100;
const ENV = { APP_SERVER_LEASE_TTL_MS: "1500", APP_SERVER_SWEEP_INTERVAL_MS: "250" };
const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((xs.length * p) / 100))]!;
const fmt = (xs: number[]) => ({ n: xs.length, p50: +pct(xs, 50).toFixed(1), p99: +pct(xs, 99).toFixed(1), max: +Math.max(...xs).toFixed(1) });

const mock = await startMockModelServer();
const db = await freshPostgresDatabase(url);
const proxy = await TcpProxy.start({ host: "127.0.0.1", port: Number(new URL(db.url).port || 5432) });
const direct = new Cluster(db.url, mock, ENV);
const viaProxy = new Cluster(proxy.urlFor(db.url), mock, ENV);
const sql = postgres(db.url, { max: 1, onnotice: () => {} });
const ws = mkdtempSync(path.join(os.tmpdir(), "aas-bench-faults-"));
try {
  const [a, b] = [await direct.spawn(), await direct.spawn()];
  const c = await viaProxy.spawn();
  const [ca, cb, cc] = [await direct.connect(a), await direct.connect(b), await viaProxy.connect(c)];

  // C's first statement after a fault can meet a pooled connection that died with the link: the
  // server answers "retry when it is back", and a client does (bounded).
  const startOnC = async (params: object): Promise<{ turn: { id: string } }> => {
    for (let attempt = 1; ; attempt++) {
      try {
        return await cc.request("turn/start", params);
      } catch (err) {
        if (attempt >= 50 || !(err instanceof RpcError) || !/database is unavailable/.test(err.message)) throw err;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
  };

  // 1. Relay latency from A to B's client, with C's link up and then cut.
  const arrivals = new Map<TestClient, Map<number, number>>([[ca, new Map()], [cb, new Map()]]);
  for (const [client, seen] of arrivals)
    client.ws.on("message", (data) => {
      const at = performance.now();
      const f = JSON.parse(String(data));
      if (f.method === "item/agentMessage/delta") seen.set(f.params.seq, at);
    });
  const relayed = async (turns: number): Promise<number[]> => {
    for (const seen of arrivals.values()) seen.clear();
    const threadId = (await ca.request("thread/start", {})).thread.id;
    await cb.request("thread/resume", { threadId });
    for (let i = 0; i < turns; i++) {
      mock.enqueue({ text: Array.from({ length: 100 }, (_, k) => `w${k} `), chunkDelayMs: 5 });
      const t = (await ca.request("turn/start", { threadId, input: text(`go ${i}`) })).turn;
      await turnCompleted(ca, t.id, 60_000);
      await turnCompleted(cb, t.id, 60_000);
    }
    const out: number[] = [];
    for (const [seq, atA] of arrivals.get(ca)!) {
      const atB = arrivals.get(cb)!.get(seq);
      if (atB !== undefined) out.push(atB - atA);
    }
    return out;
  };
  const healthy = await relayed(3);
  proxy.cut();
  const faulted = await relayed(3);
  proxy.restore();
  // C back before its link hangs (a stall: TCP up, no byte moves; C's queries wait, not fail).
  await eventually(async () => (await sql`select 1 from processes where expires_at > now()`).length >= 3, 400);
  proxy.stall();
  const stalled = await relayed(3);
  proxy.unstall();
  await eventually(async () => (await sql`select 1 from processes where expires_at > now()`).length >= 3, 400);
  proxy.slow(SLOW_MS);
  const slowed = await relayed(3);
  proxy.slow(0);

  // 4. C's own turns, healthy and then slow.
  const turnsOnC = async (turns: number): Promise<number[]> => {
    const threadId = (await cc.request("thread/start", {})).thread.id;
    const out: number[] = [];
    for (let i = 0; i < turns; i++) {
      mock.enqueue({ text: ["slow ", "or ", "not"] });
      const started = performance.now();
      const t = (await startOnC({ threadId, input: text(`c ${i}`) })).turn;
      await turnCompleted(cc, t.id, 60_000);
      out.push(performance.now() - started);
    }
    return out;
  };
  const cHealthy = await turnsOnC(5);
  proxy.slow(SLOW_MS);
  const cSlow = await turnsOnC(5);
  proxy.slow(0);
  // C back in the registry before the takeover rounds.
  await eventually(async () => (await sql`select 1 from processes where expires_at > now()`).length >= 3, 400);

  // 2. Takeover of C's turn while C is cut off.
  const sweptMs: number[] = [];
  const toldMs: number[] = [];
  const outcomes: string[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const dir = path.join(ws, `r${round}`);
    const threadId = (await (async () => {
      for (let attempt = 0; ; attempt++) {
        try {
          return (await cc.request("thread/start", { cwd: ws, approvalPolicy: "never", sandbox: "danger-full-access" })).thread.id as string;
        } catch (err) {
          if (attempt > 100) throw err; // C reconnecting after the last round
          await new Promise((r) => setTimeout(r, 100));
        }
      }
    })());
    mock.enqueue({ toolCalls: [{ name: "shell", arguments: { command: `while [ ! -f ${dir} ]; do sleep 0.02; done` } }] });
    const t = (await startOnC({ threadId, input: text("wait") })).turn;
    await cc.waitForNotification("item/started", (p) => p.turnId === t.id && p.item?.type === "commandExecution", 60_000);
    const cutAt = performance.now();
    proxy.cut();
    writeFileSync(dir, "");
    const [row] = await eventually(async () => {
      const rows = await sql`select status from turns where id = ${t.id}`;
      return rows[0]?.status !== "inProgress" ? rows : null;
    }, 2400);
    sweptMs.push(performance.now() - cutAt);
    const restoredAt = performance.now();
    proxy.restore();
    const told = await turnCompleted(cc, t.id, 120_000);
    toldMs.push(performance.now() - restoredAt);
    outcomes.push(`${row!.status}/${told.params.turn.status}`);
  }
  // 3. Takeover of C's turn when C's link hangs in the middle of the transaction that records its
  // command's end (the fence holds the thread's row): the server ends C's idle transaction after
  // C's lease TTL, then the sweeper can take the thread.
  const stallSweptMs: number[] = [];
  const stallToldMs: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const dir = path.join(ws, `s${round}`);
    await eventually(async () => (await sql`select 1 from processes where expires_at > now()`).length >= 3, 400, 50, "C registered again");
    const threadId = (await cc.request("thread/start", { cwd: ws, approvalPolicy: "never", sandbox: "danger-full-access" })).thread.id as string;
    mock.enqueue({ toolCalls: [{ name: "shell", arguments: { command: `while [ ! -f ${dir} ]; do sleep 0.02; done; echo stall-$((${round}+1000))` } }] });
    const t = (await startOnC({ threadId, input: text("wait") })).turn;
    await cc.waitForNotification("item/started", (p) => p.turnId === t.id && p.item?.type === "commandExecution", 60_000);
    const hung = proxy.stallWhen(`stall-${round + 1000}`);
    writeFileSync(dir, "");
    await hung;
    const stalledAt = performance.now();
    await eventually(async () => {
      const rows = await sql`select status from turns where id = ${t.id}`;
      return rows[0]?.status !== "inProgress" ? rows : null;
    }, 2400, 50, "the hung process's turn taken over");
    stallSweptMs.push(performance.now() - stalledAt);
    const back = performance.now();
    proxy.unstall();
    await turnCompleted(cc, t.id, 120_000);
    stallToldMs.push(performance.now() - back);
  }
  console.log(
    JSON.stringify({
      relayAddedMs: { healthy: fmt(healthy), whileAnotherProcessIsCut: fmt(faulted), whileAnotherProcessHangs: fmt(stalled), [`whileAnotherProcessIsSlow${SLOW_MS}msEachWay`]: fmt(slowed) },
      turnOnCStartToCompletedMs: { healthy: fmt(cHealthy), [`slow${SLOW_MS}msEachWay`]: fmt(cSlow) },
      takeover: { rounds: ROUNDS, cutToSweptMs: fmt(sweptMs), restoreToToldMs: fmt(toldMs), storedVsTold: outcomes },
      takeoverOfAHungTransaction: { rounds: ROUNDS, stallToSweptMs: fmt(stallSweptMs), unstallToToldMs: fmt(stallToldMs) },
    }),
  );
} finally {
  await sql.end();
  await viaProxy.close();
  await direct.close();
  await proxy.close();
  await mock.close();
  await db.drop();
  rmSync(ws, { recursive: true, force: true });
}
