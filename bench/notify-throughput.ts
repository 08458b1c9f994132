/**
 * `npx tsx bench/notify-throughput.ts [--seconds=5] [--senders=1,2] [--listeners=1,3] [--payloads=300,3000]`
 * (issue 33 item 7): how many NOTIFY notifications per second Postgres on this machine carries in
 * the shape the cluster fan-out sends them (src/runtime/fanout.ts: one `select pg_notify(c, p) from
 * unnest(…)` per flush, one notification per thread per flush, payload = the deltas of that thread
 * since the last flush), and what it costs Postgres in CPU.
 *
 * Per case: L listener connections (stand-ins for the other server processes; each LISTENs on
 * every channel, the worst case: every process follows every thread), S sender connections in a
 * closed loop of batches of B notifications over C channels, for T seconds; then wait until the
 * listeners have everything (or 30 s). Reports sent and delivered notifications/s, MiB/s, and CPU
 * of all `postgres` processes (from /proc, utime + stime) per 1 000 notifications. Nothing is
 * stored: NOTIFY needs no table. Only 127.0.0.1 traffic.
 */
import os from "node:os";
import postgres from "postgres";
import { commandCpuSeconds } from "./lib/proc.js";

const argv = process.argv.slice(2);
const opt = (name: string) => argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const nums = (name: string, def: number[]) => (opt(name) ? opt(name)!.split(",").map(Number) : def);
const URL_ = process.env.BENCH_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
const SECONDS = Number(opt("seconds") ?? 5);
const CHANNELS = Number(opt("channels") ?? 100);
const BATCH = Number(opt("batch") ?? 100);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));


function ownCpuSeconds(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
}

interface Case {
  senders: number;
  listeners: number;
  payload: number;
}

async function runCase(c: Case) {
  const channels = Array.from({ length: CHANNELS }, (_, i) => `aas_notify_bench_${i}`);
  const listenerSql = Array.from({ length: c.listeners }, () => postgres(URL_, { max: 1, onnotice: () => {} }));
  const received = new Array<number>(c.listeners).fill(0);
  for (const [i, sql] of listenerSql.entries()) for (const ch of channels) await sql.listen(ch, () => void received[i]!++);
  const senders = Array.from({ length: c.senders }, () => postgres(URL_, { max: 1, onnotice: () => {} }));
  // A JSON-like payload of the given size, different per notification so nothing can be folded
  // (Postgres drops duplicate notifications of one transaction).
  const body = "x".repeat(Math.max(0, c.payload - 24));
  let sent = 0;
  const pg0 = commandCpuSeconds("postgres");
  const own0 = ownCpuSeconds();
  const t0 = performance.now();
  const until = t0 + SECONDS * 1000;
  let serial = 0;
  await Promise.all(
    senders.map(async (sql) => {
      while (performance.now() < until) {
        const chs: string[] = [];
        const texts: string[] = [];
        for (let k = 0; k < BATCH; k++) {
          chs.push(channels[(serial + k) % CHANNELS]!);
          texts.push(`{"n":${serial + k},"d":"${body}"}`);
        }
        serial += BATCH;
        await sql`select pg_notify(c, p) from unnest(${chs}::text[], ${texts}::text[]) with ordinality as x(c, p, n) order by n`;
        sent += BATCH;
      }
    }),
  );
  const sendMs = performance.now() - t0;
  const drainBound = performance.now() + 30_000;
  while (received.some((r) => r < sent) && performance.now() < drainBound) await sleep(20);
  const allMs = performance.now() - t0;
  const pgCpu = commandCpuSeconds("postgres") - pg0;
  const ownCpu = ownCpuSeconds() - own0;
  const delivered = Math.min(...received);
  await Promise.all([...senders, ...listenerSql].map((s) => s.end({ timeout: 5 })));
  return {
    ...c,
    sent,
    sentPerS: sent / (sendMs / 1000),
    deliveredPerS: c.listeners ? delivered / (allMs / 1000) : 0,
    lagMs: allMs - sendMs,
    complete: received.every((r) => r >= sent),
    mibPerS: (sent * c.payload) / (sendMs / 1000) / 2 ** 20,
    pgCpuMsPer1k: (pgCpu * 1000 * 1000) / sent,
    pgCores: pgCpu / (allMs / 1000),
    nodeCpuMsPer1k: (ownCpu * 1000 * 1000) / sent,
  };
}

async function main() {
  const rows = [];
  console.log(`NOTIFY throughput, ${SECONDS} s per case, ${CHANNELS} channels, ${BATCH} notifications per statement; load ${os.loadavg().map((x) => x.toFixed(2)).join(" ")}`);
  for (const payload of nums("payloads", [300, 3000]))
    for (const listeners of nums("listeners", [1, 3]))
      for (const senders of nums("senders", [1, 2])) {
        const r = await runCase({ senders, listeners, payload });
        rows.push(r);
        console.log(
          `payload ${payload} B, ${senders} sender(s), ${listeners} listener(s): sent ${r.sentPerS.toFixed(0)}/s (${r.mibPerS.toFixed(1)} MiB/s), ` +
            `delivered ${r.deliveredPerS.toFixed(0)}/s per listener${r.complete ? "" : " (INCOMPLETE after 30 s)"}, drain lag ${r.lagMs.toFixed(0)} ms, ` +
            `postgres CPU ${r.pgCpuMsPer1k.toFixed(1)} ms per 1 000 (${r.pgCores.toFixed(2)} cores), bench CPU ${r.nodeCpuMsPer1k.toFixed(1)} ms per 1 000`,
        );
      }
  console.log("\n| payload | senders | listeners | sent / s | MiB/s | delivered / s per listener | drain lag ms | Postgres CPU ms / 1 000 | Postgres cores | listener+sender (node) CPU ms / 1 000 |");
  console.log("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
  for (const r of rows)
    console.log(
      `| ${r.payload} B | ${r.senders} | ${r.listeners} | ${r.sentPerS.toFixed(0)} | ${r.mibPerS.toFixed(1)} | ${r.deliveredPerS.toFixed(0)}${r.complete ? "" : " (incomplete)"} | ${r.lagMs.toFixed(0)} | ${r.pgCpuMsPer1k.toFixed(1)} | ${r.pgCores.toFixed(2)} | ${r.nodeCpuMsPer1k.toFixed(1)} |`,
    );
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
