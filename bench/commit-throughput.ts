/**
 * `npx tsx bench/commit-throughput.ts [--seconds=5] [--clients=1,4,16] [--statements=9]` (issue 33
 * item 7): how many recording transactions per second one Postgres on this machine commits, in the
 * shape the server's are (src/runtime/event-log.ts: BEGIN, ~9 small inserts of JSON rows issued
 * back to back on the transaction's connection, COMMIT; synchronous_commit as configured), from C
 * concurrent connections (stand-ins for threads committing at once across the server processes).
 * Reports commits/s, latency p50/p99 and CPU of all `postgres` processes per commit. Works in a
 * throwaway database, dropped at the end.
 */
import { randomBytes } from "node:crypto";
import os from "node:os";
import postgres from "postgres";
import { commandCpuSeconds } from "./lib/proc.js";
import { summarize } from "./lib/stats.js";

const argv = process.argv.slice(2);
const opt = (name: string) => argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const ADMIN_URL = process.env.BENCH_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
const SECONDS = Number(opt("seconds") ?? 5);
const CLIENTS = (opt("clients") ?? "1,4,16").split(",").map(Number);
const STATEMENTS = Number(opt("statements") ?? 9);


async function main() {
  const admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} });
  const db = `aas_bench_commit_${randomBytes(4).toString("hex")}`;
  await admin.unsafe(`create database ${db}`);
  const url = new URL(ADMIN_URL);
  url.pathname = `/${db}`;
  try {
    const setup = postgres(url.toString(), { max: 1, onnotice: () => {} });
    await setup`create table events (thread_id uuid not null, seq bigint not null, method text not null, params jsonb not null, primary key (thread_id, seq))`;
    await setup.end();
    console.log(`commit throughput: ${STATEMENTS} inserts per transaction, ${SECONDS} s per case; load ${os.loadavg().map((x) => x.toFixed(2)).join(" ")}`);
    console.log("\n| concurrent connections | commits / s | p50 ms | p99 ms | Postgres CPU ms / commit | Postgres cores |\n|--:|--:|--:|--:|--:|--:|");
    for (const clients of CLIENTS) {
      const sql = postgres(url.toString(), { max: clients, onnotice: () => {} });
      await Promise.all(Array.from({ length: clients }, () => sql`select 1`));
      const lat: number[] = [];
      const cpu0 = commandCpuSeconds("postgres");
      const t0 = performance.now();
      const until = t0 + SECONDS * 1000;
      await Promise.all(
        Array.from({ length: clients }, async () => {
          const thread = crypto.randomUUID();
          let seq = 0;
          while (performance.now() < until) {
            const t = performance.now();
            await sql.begin((tx) =>
              Array.from({ length: STATEMENTS }, () => tx`insert into events values (${thread}, ${++seq}, ${"item/started"}, ${tx.json({ threadId: thread, seq, item: { type: "agentMessage", text: "x".repeat(200) } })})`),
            );
            lat.push(performance.now() - t);
          }
        }),
      );
      const wall = (performance.now() - t0) / 1000;
      const cpu = commandCpuSeconds("postgres") - cpu0;
      const s = summarize(lat);
      console.log(`| ${clients} | ${(lat.length / wall).toFixed(0)} | ${s.p50.toFixed(2)} | ${s.p99.toFixed(2)} | ${((cpu * 1000) / lat.length).toFixed(2)} | ${(cpu / wall).toFixed(2)} |`);
      await sql.end({ timeout: 5 });
    }
  } finally {
    await admin.unsafe(`drop database ${db} with (force)`);
    await admin.end();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
