/**
 * `npx tsx bench/turn-cpu.ts [--turns=300] [--warmup=TURNS] [--threads=10] [--chunks=5] [--cpu-prof=DIR] [--app=DIR] [--backend=postgres|pglite]`
 * (issue 33 item 1: "each turn costs ~6–7 ms of CPU outside its deltas"): the server's CPU for
 * message-only turns run one after another, split per turn. The built CLI of DIR (default this
 * tree; build it first) on a throwaway Postgres database (or, with --backend=pglite, the embedded
 * database of a throwaway home; server CPU then includes PGlite's), its `openai` provider pointed at the
 * bench's mock model; --cpu-prof runs it under `node --cpu-prof` (summarise the profile with
 * bench/profile-summary.mjs). Only 127.0.0.1 traffic; the database is dropped at the end.
 *
 * --warmup: turns run before the measured ones (default one per thread). On PGlite the first
 * thousand or so turns also pay for V8 compiling PGlite's WebAssembly with its optimizing tier in
 * background threads: give it ~2000 to measure the steady state. The CPU is also split by thread
 * (the main thread; the others, busiest first: the embedded database's worker, V8's GC and
 * compiler threads, libuv's pool).
 */
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { BenchMock, textChunks } from "./lib/mock.js";
import { procCpuTimes, procThreadCpuSeconds, spawnServer } from "./lib/proc.js";
import { summarize } from "./lib/stats.js";
import { StreamClient } from "./lib/stream-client.js";
import { throwawayPostgres } from "./lib/throwaway-postgres.js";
import { BENCH_CWD, nextMarker, runTurn } from "./lib/turn-driver.js";

const argv = process.argv.slice(2);
const opt = (name: string) => argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const ROOT = fileURLToPath(new URL("..", import.meta.url));
const APP = path.resolve(opt("app") ?? ROOT);
const TURNS = Number(opt("turns") ?? 300);
const THREADS = Number(opt("threads") ?? 10);
const CHUNKS = Number(opt("chunks") ?? 5);
const WARMUP = Number(opt("warmup") ?? THREADS);
const CPU_PROF = opt("cpu-prof") ? path.resolve(opt("cpu-prof")!) : null;
const BACKEND = opt("backend") ?? "postgres";
if (BACKEND !== "postgres" && BACKEND !== "pglite") throw new Error(`--backend=${BACKEND}: postgres or pglite`);

/** The database the server runs on: a throwaway Postgres database, or a throwaway PGlite home. */
async function throwawayStore(): Promise<{ home: string; databaseUrl?: string; drop(): Promise<void> }> {
  if (BACKEND === "postgres") return throwawayPostgres("aas-turncpu-");
  const home = await mkdtemp(path.join(os.tmpdir(), "aas-turncpu-"));
  return { home, drop: () => rm(home, { recursive: true, force: true }) };
}

async function main() {
  const db = await throwawayStore();
  const mock = await BenchMock.start({ text: textChunks(CHUNKS) }, false);
  let srv: Awaited<ReturnType<typeof spawnServer>> | undefined;
  try {
    srv = await spawnServer({
      // --cpu-prof is refused in NODE_OPTIONS: it goes on the command line.
      command: [process.execPath, ...(CPU_PROF ? ["--cpu-prof", `--cpu-prof-dir=${CPU_PROF}`] : []), path.join(APP, "bin", "app-server.js")],
      cwd: APP,
      home: db.home,
      ...(db.databaseUrl ? { databaseUrl: db.databaseUrl } : {}),
      timeoutMs: 30_000,
      env: mock.serverEnv(),
    });
    const c = await StreamClient.connect(srv.url);
    const threads: string[] = [];
    for (let i = 0; i < THREADS; i++) threads.push((await c.request("thread/start", { cwd: BENCH_CWD })).thread.id);
    // Warm-up: the first turn of a thread stores its environment context; JIT warms too.
    for (let i = 0; i < Math.max(WARMUP, THREADS); i++) await runTurn(c, threads[i % THREADS]!, nextMarker("w"));
    const wall: number[] = [];
    const threads0 = procThreadCpuSeconds(srv.pid);
    const cpu0 = procCpuTimes(srv.pid);
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < TURNS; i++) {
      const r = await runTurn(c, threads[i % THREADS]!, nextMarker("t"));
      if (r.status !== "completed") throw new Error(`turn ${i}: ${r.status}`);
      wall.push(Number(r.completedNs - r.sentNs) / 1e6);
    }
    const t1 = process.hrtime.bigint();
    const cpu1 = procCpuTimes(srv.pid);
    const threads1 = procThreadCpuSeconds(srv.pid);
    const userMs = (cpu1.user - cpu0.user) * 1000;
    const systemMs = (cpu1.system - cpu0.system) * 1000;
    const w = summarize(wall);
    console.log(
      `${BACKEND}: ${TURNS} turns × ${CHUNKS} chunks on ${THREADS} threads, load ${os.loadavg()[0]!.toFixed(2)}: server CPU ${((userMs + systemMs) / TURNS).toFixed(2)} ms a turn (user ${(userMs / TURNS).toFixed(2)}, kernel ${(systemMs / TURNS).toFixed(2)}); ` +
        `turn p50 ${w.p50.toFixed(1)} ms, p99 ${w.p99.toFixed(1)} ms; window ${t0 / 1000n}–${t1 / 1000n} µs (profile clock)`,
    );
    const perTurn = (tid: number) => (((threads1.get(tid) ?? 0) - (threads0.get(tid) ?? 0)) * 1000) / TURNS;
    const others = [...threads1.keys()].filter((tid) => tid !== srv!.pid).sort((a, b) => perTurn(b) - perTurn(a));
    console.log(`  by thread, ms a turn: main ${perTurn(srv.pid).toFixed(2)}; others ${others.filter((tid) => perTurn(tid) > 0).map((tid) => perTurn(tid).toFixed(2)).join(", ") || "none"}`);
    await c.close();
  } finally {
    await srv?.stop();
    await mock.close();
    await db.drop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
