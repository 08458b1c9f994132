/**
 * Issue 16, item 2: the 500-stream load (50 chunks × 20 ms each, the load group's streams) on
 * `app-server serve` vs `serve --workers N` on a fresh Postgres database each, through the built
 * CLI (dist/). Server CPU is the primary's plus its workers' (/proc of each). Connections are
 * spread by the primary (node:cluster round-robin).
 *
 * Run: npx tsx bench/workers-load.ts [--workers=2] [--streams=500] [--app=DIR (a built tree, default this one)]
 */
import { readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { freshPostgresDatabase } from "../test/support/durability.js";
import { BenchMock } from "./lib/mock.js";
import { procCpuSeconds, procMemory, spawnServer } from "./lib/proc.js";
import { fmtMs, summarize } from "./lib/stats.js";
import { connectMany, type StreamClient } from "./lib/stream-client.js";
import { streamRound, threadsFor } from "./lib/turn-driver.js";
import { LOAD_LIMITS, STREAM } from "./groups/turns.js";

const arg = (name: string, def: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? def;
const url = process.env.TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
const STREAMS = Number(arg("streams", "500"));
const WORKERS = Number(arg("workers", "2"));
const APP = path.resolve(arg("app", fileURLToPath(new URL("..", import.meta.url))));

/** The process and its children (the workers), from /proc. */
function family(pid: number): number[] {
  let children: number[] = [];
  try {
    children = readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    /* gone */
  }
  return [pid, ...children];
}
const cpuOf = (pids: number[]) => pids.reduce((s, p) => s + procCpuSeconds(p), 0);

async function round(workers: number): Promise<string> {
  const mock = await BenchMock.start();
  const db = await freshPostgresDatabase(url);
  const home = path.join(os.tmpdir(), `aas-workers-load-${process.pid}-${workers}`);
  const srv = await spawnServer({
    command: [process.execPath, path.join(APP, "bin", "app-server.js")],
    cwd: APP,
    home,
    databaseUrl: db.url,
    timeoutMs: 120_000,
    env: { ...mock.serverEnv(), ...LOAD_LIMITS, ...(workers > 0 ? { APP_SERVER_WORKERS: String(workers) } : {}) },
  });
  const clients: StreamClient[] = [];
  try {
    // Every worker ready: /readyz answered by the first one only; the primary logs "listening" with
    // the worker count once all are (a connection reaching a worker still starting gets 503).
    const allReady = () => srv.stderrTail().some((l) => l.includes('"msg":"listening"') && l.includes('"workers":'));
    for (let i = 0; workers > 0 && i < 1200 && !allReady(); i++) await new Promise((r) => setTimeout(r, 100));
    if (workers > 0 && !allReady()) throw new Error("the workers did not all become ready");
    clients.push(...(await connectMany(srv.url, STREAMS)));
    const slots = await threadsFor(clients, 25, { cwd: os.tmpdir() });
    await streamRound(mock, srv.pid, slots.slice(0, 20), { ...STREAM, timeoutMs: 60_000 }); // warm-up
    const pids = family(srv.pid);
    const cpu0 = cpuOf(pids);
    const r = await streamRound(mock, srv.pid, slots, { ...STREAM, timeoutMs: 180_000 });
    const cpu = cpuOf(pids) - cpu0;
    const rss = pids.reduce((s, p) => s + procMemory(p).rssMB, 0);
    const s = summarize(r.lat);
    const f = summarize(r.first);
    return `| ${workers === 0 ? "serve (1 process)" : `serve --workers ${workers}`} | ${slots.length} | ${r.failed} | ${r.deltas} | ${r.unmatched} | ${fmtMs(s.p50)} | ${fmtMs(s.p99)} | ${fmtMs(f.p99)} | ${(r.streamMs / 1000).toFixed(1)} | ${cpu.toFixed(1)} | ${rss.toFixed(0)} | ${r.benchLoopP99Ms.toFixed(0)} |`;
  } finally {
    for (const c of clients) c.close();
    await srv.stop();
    await mock.close();
    await db.drop();
    await import("node:fs/promises").then((fs) => fs.rm(home, { recursive: true, force: true }));
  }
}

console.log(`### ${STREAMS} streams: serve vs serve --workers ${WORKERS} (${STREAM.chunks} chunks × ${STREAM.chunkDelayMs} ms each) — ${new Date().toISOString()}, ${os.cpus().length} × ${os.cpus()[0]?.model}, Node ${process.version}, load ${readFileSync("/proc/loadavg", "utf8").split(" ")[0]}\n`);
console.log("| server | streams | failed | deltas | unmatched | delta p50 ms | delta p99 ms | first-delta p99 ms | stream s | server CPU s (all processes) | RSS MB (all) | bench loop p99 ms |");
console.log("|---|---|---|---|---|---|---|---|---|---|---|---|");
console.log(await round(0));
console.log(await round(WORKERS));
console.log(`\nload after: ${readFileSync("/proc/loadavg", "utf8").split(" ")[0]}`);
