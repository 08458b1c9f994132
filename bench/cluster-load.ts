/**
 * Issue 12 bench, two parts, on a fresh Postgres database each.
 *
 * 1. Commit latency with and without the notification path. The owner records an event the way
 *    ThreadRuntime.commit does (fence UPDATE + event INSERT in one transaction) and then, off the
 *    transaction, the fan-out's one pg_notify statement (fanout.ts) — measured as the time from
 *    BEGIN to COMMIT acknowledged, and to the NOTIFY acknowledged. "in-tx" is the design issue 12
 *    ruled out (pg_notify inside the transaction), for comparison. 8 concurrent writers on
 *    distinct threads, one LISTENing connection per channel (as followers have).
 * 2. The 500-stream load (the streams of bench/groups/load.ts, without its slow client) on one
 *    process vs split 250/250 over two processes on the same database.
 *
 * Run: TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx bench/cluster-load.ts
 */
import os from "node:os";
import postgres from "postgres";
import { freshPostgresDatabase } from "../test/support/durability.js";
import { Cluster } from "../test/support/cluster.js";
import { runMigrations } from "../src/store/migrate.js";
import { BenchMock } from "./lib/mock.js";
import { procCpuSeconds } from "./lib/proc.js";
import { summarize, fmtMs } from "./lib/stats.js";
import { connectMany, type StreamClient } from "./lib/stream-client.js";
import { streamRound, threadsFor } from "./lib/turn-driver.js";
import { LOAD_LIMITS, STREAM } from "./groups/turns.js";

const url = process.env.TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
const STREAMS = Number(process.env.BENCH_STREAMS ?? 500);
const COMMITS = Number(process.env.BENCH_COMMITS ?? 2000);
const WRITERS = 8;
const row = (label: string, xs: number[]) => {
  const s = summarize(xs);
  return `| ${label} | ${s.n} | ${fmtMs(s.p50)} | ${fmtMs(s.p99)} | ${fmtMs(s.mean)} |`;
};

async function commitLatency(): Promise<string[]> {
  const db = await freshPostgresDatabase(url);
  const sql = postgres(db.url, { max: WRITERS + 1, onnotice: () => {} });
  const listener = postgres(db.url, { max: 1, onnotice: () => {} });
  try {
    await runMigrations(sql);
    const threads = Array.from({ length: WRITERS }, (_, i) => `00000000-0000-7000-8000-${String(i).padStart(12, "0")}`);
    for (const id of threads) {
      await sql`insert into threads (id, session_id, cwd, model_provider, model, approval_policy, sandbox, cli_version, source, created_at_ms, updated_at_ms, owner_id, lease_epoch)
        values (${id}, ${id}, '/', 'openai', 'm', '"never"', 'read-only', 'bench', 'appServer', 0, 0, 'bench', 1)`.catch(async (err) => {
        throw new Error(`seeding threads failed (columns changed?): ${(err as Error).message}`);
      });
      await listener.listen(`thread:${id}`, () => {});
    }
    const out: string[] = ["| path | commits | p50 ms | p99 ms | mean ms |", "|---|---|---|---|---|"];
    for (const mode of ["none", "after", "in-tx"] as const) {
      const commitMs: number[] = [];
      const notifiedMs: number[] = [];
      let seq = mode === "none" ? 0 : mode === "after" ? 1_000_000 : 2_000_000;
      await Promise.all(
        threads.map(async (id) => {
          for (let i = 0; i < COMMITS / WRITERS; i++) {
            const s = ++seq;
            const t0 = performance.now();
            await sql.begin(async (tx) => {
              await tx`update threads set seq_reserved = greatest(seq_reserved, ${s}) where id = ${id} and owner_id = 'bench' and lease_epoch = 1`;
              await tx`insert into thread_events (thread_id, seq, method, params, emitted_at_ms) values (${id}, ${s}, 'item/completed', ${tx.json({ seq: s, item: { type: "agentMessage", text: "x".repeat(200) } })}, ${Date.now()})`;
              if (mode === "in-tx") await tx`select pg_notify(${`thread:${id}`}, ${JSON.stringify({ m: s })})`;
            });
            commitMs.push(performance.now() - t0);
            if (mode === "after") {
              await sql`select pg_notify(${`thread:${id}`}, ${JSON.stringify({ m: s })})`;
              notifiedMs.push(performance.now() - t0);
            }
          }
        }),
      );
      if (mode === "none") out.push(row("no notification", commitMs));
      if (mode === "after") out.push(row("NOTIFY after commit (as built): commit", commitMs), row("NOTIFY after commit (as built): commit + NOTIFY", notifiedMs));
      if (mode === "in-tx") out.push(row("pg_notify inside the transaction (ruled out)", commitMs));
    }
    return out;
  } finally {
    await listener.end();
    await sql.end();
    await db.drop();
  }
}

async function loadRound(processes: 1 | 2): Promise<string> {
  const mock = await BenchMock.start();
  const db = await freshPostgresDatabase(url);
  const cluster = new Cluster(db.url, mock.mock, { ...mock.serverEnv(), ...LOAD_LIMITS, APP_SERVER_LEASE_TTL_MS: "30000" });
  const clients: StreamClient[] = [];
  try {
    const nodes = [];
    for (let i = 0; i < processes; i++) nodes.push(await cluster.spawn());
    const per = STREAMS / processes;
    for (const n of nodes) clients.push(...(await connectMany(n.url, per)));
    const slots = await threadsFor(clients, 25, { cwd: os.tmpdir() });
    await streamRound(mock, nodes[0]!.proc.child.pid!, slots.slice(0, 20), { ...STREAM, timeoutMs: 60_000 }); // warm-up
    const cpu0 = nodes.map((n) => procCpuSeconds(n.proc.child.pid!));
    const r = await streamRound(mock, nodes[0]!.proc.child.pid!, slots, { ...STREAM, timeoutMs: 180_000 });
    const cpu = nodes.map((n, i) => (procCpuSeconds(n.proc.child.pid!) - cpu0[i]!).toFixed(1)).join(" + ");
    const s = summarize(r.lat);
    const f = summarize(r.first);
    return `| ${processes} | ${slots.length} | ${r.failed} | ${r.deltas} | ${r.unmatched} | ${fmtMs(s.p50)} | ${fmtMs(s.p99)} | ${fmtMs(f.p99)} | ${(r.streamMs / 1000).toFixed(1)} | ${cpu} | ${r.benchLoopP99Ms.toFixed(0)} |`;
  } finally {
    for (const c of clients) c.close();
    await cluster.close();
    await mock.close();
    await db.drop();
  }
}

console.log(`## Cluster bench (issue 12) — ${new Date().toISOString().slice(0, 10)}, ${os.cpus().length} × ${os.cpus()[0]?.model}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}\n`);
console.log(`### Commit latency with and without the notification path (${COMMITS} commits per path, ${WRITERS} writers)\n`);
console.log((await commitLatency()).join("\n"));
console.log(`\n### ${STREAMS} streams: one process vs two (${STREAM.chunks} chunks × ${STREAM.chunkDelayMs} ms each)\n`);
console.log("| processes | streams | failed | deltas | unmatched | delta p50 ms | delta p99 ms | first-delta p99 ms | stream s | server CPU s | bench loop p99 ms |");
console.log("|---|---|---|---|---|---|---|---|---|---|---|");
console.log(await loadRound(1));
console.log(await loadRound(2));
