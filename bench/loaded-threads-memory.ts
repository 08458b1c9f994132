/**
 * `npx tsx bench/loaded-threads-memory.ts [--app=DIR] [--threads=20000] [--steps=2000,8000,10000]
 * [--snapshot-at=2000 --snapshots=DIR] [--env=KEY=VALUE …] [--node-options=…]` (issue 33 item 4: what a
 * loaded thread costs, and what the loaded-thread budget changes): the built CLI of DIR (default this
 * tree; build it first) on a throwaway Postgres database, its `openai` provider pointed at the bench's
 * mock model (an instant "OK"). One connection starts threads and runs one turn on each, 4 at a time,
 * and stays subscribed to all of them (so none unloads by itself); after each step it records VmRSS,
 * how many threads `thread/loaded/list` names, and the loaded/evicted gauges of /metrics when the
 * server has them. With --snapshots a heap snapshot is written once --snapshot-at threads are loaded
 * (summarise it with bench/heap-summary.mjs). The database is dropped at the end.
 */
import { mkdir, readdir, stat } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { BenchMock } from "./lib/mock.js";
import { httpGetText, metricValue, procCpuSeconds, procMemory, spawnServer } from "./lib/proc.js";
import { pool, StreamClient } from "./lib/stream-client.js";
import { throwawayPostgres } from "./lib/throwaway-postgres.js";
import { BENCH_CWD } from "./lib/turn-driver.js";

const argv = process.argv.slice(2);
const opt = (name: string) => argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const ROOT = fileURLToPath(new URL("..", import.meta.url));
const APP = path.resolve(opt("app") ?? ROOT);
const STEPS = (opt("steps") ?? "2000,8000,10000").split(",").map(Number);
const SNAPSHOTS = opt("snapshots") ? path.resolve(opt("snapshots")!) : null;
const SNAPSHOT_AT = Number(opt("snapshot-at") ?? 2000);
const NODE_FLAGS = opt("node-options") ?? "";
const EXTRA_ENV = Object.fromEntries(argv.filter((a) => a.startsWith("--env=")).map((a) => a.slice(6).split("=", 2) as [string, string]));
/** The control: unsubscribe each thread after its turn (same work, nothing stays loaded). */
const UNSUBSCRIBE = argv.includes("--unsubscribe");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function snapshot(pid: number): Promise<void> {
  if (!SNAPSHOTS) return;
  const before = new Set(await readdir(SNAPSHOTS));
  process.kill(pid, "SIGUSR2");
  for (let i = 0; i < 600; i++) {
    await sleep(100);
    const fresh = (await readdir(SNAPSHOTS)).filter((f) => !before.has(f) && f.endsWith(".heapsnapshot"));
    if (fresh.length) {
      // Written synchronously by the server, but big: wait until the file stops growing.
      let size = -1;
      for (;;) {
        await sleep(1000);
        const now = (await stat(path.join(SNAPSHOTS, fresh[0]!))).size;
        if (now > 0 && now === size) break; // empty while V8 still walks the heap
        size = now;
      }
      console.log(`  heap snapshot: ${path.join(SNAPSHOTS, fresh[0]!)}`);
      return;
    }
  }
}

async function main() {
  const db = await throwawayPostgres("aas-loaded-");
  if (SNAPSHOTS) await mkdir(SNAPSHOTS, { recursive: true });
  const mock = await BenchMock.start(undefined, false);
  const rows: string[] = [];
  let srv: Awaited<ReturnType<typeof spawnServer>> | undefined;
  let c: StreamClient | undefined;
  try {
    srv = await spawnServer({
      command: [process.execPath, path.join(APP, "bin", "app-server.js")],
      cwd: APP,
      home: db.home,
      databaseUrl: db.databaseUrl,
      timeoutMs: 30_000,
      nodeOptions: [NODE_FLAGS, SNAPSHOTS ? `--heapsnapshot-signal=SIGUSR2 --diagnostic-dir=${SNAPSHOTS}` : ""].join(" ").trim() || undefined,
      env: { ...mock.serverEnv(), APP_SERVER_MAX_CONCURRENT_TURNS: "600", ...EXTRA_ENV },
    });
    console.log(`app ${APP} ${NODE_FLAGS} ${JSON.stringify(EXTRA_ENV)}, pid ${srv.pid}, load ${os.loadavg().map((l) => l.toFixed(2)).join(" ")}`);
    c = await StreamClient.connect(srv.url);
    const client = c;
    const loadThreads = async (count: number) => {
      await pool(
        Array.from({ length: count }, (_, i) => i),
        4,
        async () => {
          const threadId = (await client.request("thread/start", { cwd: BENCH_CWD })).thread.id;
          const done = client.waitFor("turn/completed", (p) => p.threadId === threadId, 60_000);
          await client.request("turn/start", { threadId, input: [{ type: "text", text: "Say OK.", text_elements: [] }] });
          const status = (await done).params.turn.status;
          if (status !== "completed") throw new Error(`turn ended ${status}`);
          if (UNSUBSCRIBE) await client.request("thread/unsubscribe", { threadId });
        },
      );
    };
    // Warm-up (module loading, JIT) is not counted.
    await loadThreads(20);
    await sleep(1500);
    const base = procMemory(srv.pid).rssMB;
    console.log(`  base (20 threads): RSS ${base.toFixed(1)} MiB`);
    let loaded = 20;
    let prev = base;
    let snapped = false;
    for (const count of STEPS) {
      const t = Date.now();
      const cpu0 = procCpuSeconds(srv.pid);
      await loadThreads(count);
      loaded += count;
      await sleep(1500);
      const now = procMemory(srv.pid);
      const listed = (await c.request("thread/loaded/list", {})).data.length;
      const metrics = await httpGetText(`${srv.httpUrl}/metrics`).catch(() => "");
      const gauges = ["app_server_loaded_threads", "app_server_loaded_threads_with_history", "app_server_loaded_history_bytes", "app_server_loaded_history_evictions_total"]
        .map((n) => [n, metricValue(metrics, n)] as const)
        .filter(([, v]) => !Number.isNaN(v))
        .map(([n, v]) => `${n.replace("app_server_", "")}=${v}`)
        .join(" ");
      // prom-client's process metrics: where the RSS is (V8 heap used / committed, new space, external).
      const mb = (name: string) => (metricValue(metrics, name) / 1048576).toFixed(1);
      const heap = `heap used ${mb("nodejs_heap_size_used_bytes")} / total ${mb("nodejs_heap_size_total_bytes")} MiB (new space ${mb('nodejs_heap_space_size_total_bytes{space="new"}')}, old ${mb('nodejs_heap_space_size_total_bytes{space="old"}')}), external ${mb("nodejs_external_memory_bytes")} MiB`;
      const perKiB = ((now.rssMB - prev) * 1024) / count;
      const line = `${loaded} threads started (${listed} loaded): RSS ${now.rssMB.toFixed(1)} MiB (+${perKiB.toFixed(1)} KiB/thread this step), server CPU ${(procCpuSeconds(srv.pid) - cpu0).toFixed(1)} s in ${((Date.now() - t) / 1000).toFixed(0)} s; ${heap} ${gauges}`;
      console.log(`  ${line}`);
      rows.push(line);
      prev = now.rssMB;
      if (!snapped && loaded >= SNAPSHOT_AT) {
        snapped = true;
        await snapshot(srv.pid);
      }
    }
    const total = STEPS.reduce((a, x) => a + x, 0);
    console.log(`\nbase ${base.toFixed(1)} MiB, after +${total} threads ${prev.toFixed(1)} MiB: ${(((prev - base) * 1024) / total).toFixed(1)} KiB per thread, load ${os.loadavg().map((l) => l.toFixed(2)).join(" ")}`);
  } finally {
    await c?.close();
    await srv?.stop();
    await mock.close();
    await db.drop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
