/**
 * `npx tsx bench/memory-after-turns.ts [--app=DIR] [--snapshots=DIR] [--big-mib=32]` (issue 16, item 4:
 * "find what holds memory after turns"): the built CLI of DIR (default this tree; build it first)
 * on a throwaway Postgres database, its `openai` provider pointed at the bench's mock model.
 * Records VmRSS and, from /metrics (prom-client's process metrics), V8's heap used / committed by
 * space (the heap snapshots are the detail):
 *   1. idle, 1 s after ready;
 *   2. after 20 turns on one thread (one connection, 50-chunk replies), client still connected
 *      (and 5 s later);
 *   3. 2 s after that client closed (nobody follows the thread);
 *   4. after one turn whose reply is --big-mib MiB (in 64 KiB deltas), client still connected;
 *   5. 2 s after that client closed (--big-mib=0 skips 4 and 5).
 * With --snapshots=DIR the server runs with `--heapsnapshot-signal=SIGUSR2 --diagnostic-dir=DIR`
 * and a heap snapshot is written at 3, 4 and 5 (load them in Chrome DevTools, or summarise them
 * with bench/heap-summary.mjs). Only 127.0.0.1 traffic; the database is dropped at the end.
 */
import { readFileSync } from "node:fs";
import { readdir } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { BenchMock, textChunks } from "./lib/mock.js";
import { httpGetText, metricValue, procCpuSeconds, procMemory, spawnServer } from "./lib/proc.js";
import { StreamClient } from "./lib/stream-client.js";
import { throwawayPostgres } from "./lib/throwaway-postgres.js";
import { BENCH_CWD, nextMarker, runTurn } from "./lib/turn-driver.js";

const argv = process.argv.slice(2);
const opt = (name: string) => argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const ROOT = fileURLToPath(new URL("..", import.meta.url));
const APP = path.resolve(opt("app") ?? ROOT);
const SNAPSHOTS = opt("snapshots") ? path.resolve(opt("snapshots")!) : null;
const BIG_MIB = Number(opt("big-mib") ?? 32);
/** --big-mib=0: stop after the 20 turns (the big reply costs ~10 s of server CPU). */
/** Extra node flags for the server (e.g. --max-semi-space-size=2) and KEY=VALUE environment (e.g. MALLOC_ARENA_MAX=2). */
const NODE_FLAGS = opt("node-options") ?? "";
const EXTRA_ENV = Object.fromEntries(argv.filter((a) => a.startsWith("--env=")).map((a) => a.slice(6).split("=", 2) as [string, string]));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function snapshot(pid: number, label: string): Promise<string | null> {
  if (!SNAPSHOTS) return null;
  const before = new Set(await readdir(SNAPSHOTS));
  process.kill(pid, "SIGUSR2");
  // The snapshot is written synchronously by the server; wait until a new file stops growing.
  for (let i = 0; i < 600; i++) {
    await sleep(100);
    const fresh = (await readdir(SNAPSHOTS)).filter((f) => !before.has(f) && f.endsWith(".heapsnapshot"));
    if (fresh.length) {
      await sleep(1000);
      console.log(`  heap snapshot (${label}): ${path.join(SNAPSHOTS, fresh[0]!)}`);
      return fresh[0]!;
    }
  }
  return null;
}

async function main() {
  const db = await throwawayPostgres("aas-mem-");
  const mock = await BenchMock.start({ text: textChunks(50) }, false);
  const rows: [string, number, string][] = [];
  let httpUrl = "";
  const rss = async (pid: number, label: string) => {
    const m = procMemory(pid);
    // Where it is, from prom-client's process metrics: V8's heap (used / committed; new space is
    // the young generation) and memory outside it.
    const metrics = await httpGetText(`${httpUrl}/metrics`).catch(() => "");
    const mb = (name: string) => (metricValue(metrics, name) / 1048576).toFixed(1);
    const heap = metrics
      ? `${mb("nodejs_heap_size_used_bytes")} / ${mb("nodejs_heap_size_total_bytes")} (new ${mb('nodejs_heap_space_size_total_bytes{space="new"}')}, old ${mb('nodejs_heap_space_size_total_bytes{space="old"}')}, code ${mb('nodejs_heap_space_size_total_bytes{space="code"}')}), external ${mb("nodejs_external_memory_bytes")}`
      : "–";
    // Resident pages of files (the node binary's code and data: shared, not the server's own) and anonymous ones.
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+)`, "m").exec(status)?.[1] ?? NaN) / 1024;
    const split = `anon ${kb("RssAnon").toFixed(1)}, file ${kb("RssFile").toFixed(1)}`;
    rows.push([label, m.rssMB, `${split}; ${heap}`]);
    console.log(`  ${label}: RSS ${m.rssMB.toFixed(1)} MiB (${split}; peak ${m.hwmMB.toFixed(1)}); heap used / committed MiB ${heap}`);
  };
  // Everything made above is undone in `finally`, also when the server fails to start.
  let srv: Awaited<ReturnType<typeof spawnServer>> | undefined;
  try {
    srv = await spawnServer({
      command: [process.execPath, path.join(APP, "bin", "app-server.js")],
      cwd: APP,
      home: db.home,
      databaseUrl: db.databaseUrl,
      timeoutMs: 30_000,
      nodeOptions: [NODE_FLAGS, SNAPSHOTS ? `--heapsnapshot-signal=SIGUSR2 --diagnostic-dir=${SNAPSHOTS}` : ""].join(" ").trim() || undefined,
      env: { ...mock.serverEnv(), ...EXTRA_ENV },
    });
    httpUrl = srv.httpUrl;
    console.log(`app ${APP} ${NODE_FLAGS} ${JSON.stringify(EXTRA_ENV)}, pid ${srv.pid}, load ${os.loadavg()[0]!.toFixed(2)}`);
    await sleep(1000);
    await rss(srv.pid, "idle, 1 s after ready");

    let c = await StreamClient.connect(srv.url);
    const threadId = (await c.request("thread/start", { cwd: BENCH_CWD })).thread.id;
    const cpu0 = procCpuSeconds(srv.pid);
    for (let i = 0; i < 20; i++) {
      const r = await runTurn(c, threadId, nextMarker("mem"));
      if (r.status !== "completed") throw new Error(`turn ${i}: ${r.status}`);
    }
    console.log(`  server CPU for 20 turns: ${((procCpuSeconds(srv.pid) - cpu0) * 1000).toFixed(0)} ms`);
    await sleep(1000);
    await rss(srv.pid, "after 20 turns (client connected)");
    await sleep(4000);
    await rss(srv.pid, "20 turns, 5 s later (client connected)");
    await c.close();
    await sleep(2000);
    await rss(srv.pid, "20 turns, 2 s after the client left");
    await snapshot(srv.pid, "after 20 turns, nobody connected");
    if (BIG_MIB <= 0) return printTable(rows);

    c = await StreamClient.connect(srv.url);
    await c.request("thread/resume", { threadId });
    const chunk = "x".repeat(64 * 1024 - 1) + " ";
    mock.enqueue({ text: Array.from({ length: BIG_MIB * 16 }, () => chunk) });
    c.onNotification = null;
    const cpu1 = procCpuSeconds(srv.pid);
    // What the clients are sent: the turn/completed frame's size (its params, serialised).
    const r = await runTurn(c, threadId, nextMarker("big"), 300_000);
    console.log(`  big turn: turn/completed params ${(JSON.stringify(r.completedParams).length / 1024).toFixed(1)} KiB`);
    r.completedParams = null;
    console.log(`  big turn: ${r.status}, ${r.deltas.length} deltas, server CPU ${((procCpuSeconds(srv.pid) - cpu1) * 1000).toFixed(0)} ms`);
    r.deltas.length = 0;
    await sleep(1000);
    await rss(srv.pid, `after a ${BIG_MIB} MiB reply (client connected)`);
    await snapshot(srv.pid, "after the big reply, client connected");
    await c.close();
    await sleep(2000);
    await rss(srv.pid, `${BIG_MIB} MiB reply, 2 s after the client left`);
    await snapshot(srv.pid, "after the big reply, nobody connected");
    await sleep(5000);
    await rss(srv.pid, `${BIG_MIB} MiB reply, 7 s after the client left`);
    await sleep(13000);
    await rss(srv.pid, `${BIG_MIB} MiB reply, 20 s after the client left`);
  } finally {
    await srv?.stop();
    await mock.close();
    await db.drop();
  }
  printTable(rows);
}

function printTable(rows: [string, number, string][]): void {
  console.log("\n| state | RSS MiB | anon, file MiB; heap used / committed MiB (new, old, code), external |\n|---|--:|---|");
  for (const [l, v, heap] of rows) console.log(`| ${l} | ${v.toFixed(1)} | ${heap} |`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
