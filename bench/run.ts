/**
 * `npm run bench [-- options]`: start-up, idle memory, thread/start and thread/list latency of the
 * real CLI (built dist/, `node bin/app-server.js serve`) on real Postgres and on embedded PGlite;
 * turns against a mock model (overhead, delta latency, RSS per thread, statements per turn),
 * durable threads (fork, resume, read, replay) and load (500 streams + a slow client).
 * Only 127.0.0.1 traffic; every phase is bounded in count and time. Results are printed and
 * appended to bench/RESULTS.md.
 *
 * Options:
 *   --only=ready,sandbox,mcp,threads,list,turns,durability,paging,load,chaos,soak,memory,search
 *                               (chaos: bench/cluster-chaos.ts, three seeds of 20 rounds on Postgres;
 *                               --quick: one seed of 5)
 *                               phases/groups to run (default all); turns, durability and load each
 *                               get a fresh throwaway database (PGlite: a fresh home)
 *   --load-pglite               also run the load group on PGlite (default: Postgres only)
 *   --minutes=N                 soak: minutes of the steady loop per backend (default 3; the drift of
 *                               issue 33 item 5 needs ≥ 6 to read)
 *   --soak-env=K=V,K2=V2        soak: extra server environment (an A/B switch)
 *   --soak-restart              soak: afterwards restart the server on the same home, one more minute
 *   --cpu-prof=DIR              servers of the turns/durability/load groups run with `node --cpu-prof`, profiles
 *                               written to DIR on exit (summarise with bench/profile-summary.mjs)
 *   --backend=postgres,pglite   backends to run (default both)
 *   --sizes=10000,100000        stored-thread counts for thread/list
 *   --pg-url=URL                admin URL of the Postgres server (default postgres://postgres@127.0.0.1:5432/postgres,
 *                               or BENCH_DATABASE_URL); a throwaway database is created on it and dropped
 *   --quick                     fewer iterations (smoke test)
 *   --no-build                  skip `npm run build` (use dist/ as it is)
 *   --ref=COMMIT                bench a commit instead of the working tree: `git archive` into a temp
 *                               dir (node_modules symlinked), built there; src/ edits in progress don't matter
 *   --no-write                  do not append to bench/RESULTS.md
 *   --baseline=REF              first run the same phases on REF (a child `bench/run.ts --ref=REF`), then
 *                               this tree: issue 33's table is printed with before and after columns
 *                               (`--only=ready,turns,memory,search,soak` gives every row of it)
 *   --json=FILE                 write issue 33's rows as JSON to FILE (what --baseline reads back)
 */
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { appendFile, mkdtemp, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { existsSync, readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath, pathToFileURL } from "node:url";
import postgres from "postgres";
import { BenchClient } from "./lib/rpc-client.js";
import type { Backend, BenchContext, FactTable, LatencyRow, MemRow } from "./lib/context.js";
import { groupTurns, rssRows, statementRows, turnsTables } from "./groups/turns.js";
import { durabilityTables, groupDurability } from "./groups/durability.js";
import { groupLoad, loadFacts, loadTables } from "./groups/load.js";
import { groupSandbox } from "./groups/sandbox.js";
import { groupMcp } from "./groups/mcp.js";
import { groupPaging, PAGED_CALLS, PAGING_SIZES } from "./groups/paging.js";
import { groupSearch } from "./groups/search.js";
import { groupSoak, soakTables, soakVerdicts } from "./groups/soak.js";
import { groupMemory } from "./groups/memory.js";
import { ISSUE33_PHASES, issue33Markdown, issue33Rows, issue33Text, type TargetRow } from "./lib/issue33-table.js";
import { killAllSpawned, procMemory, spawnServer, timeCommand } from "./lib/proc.js";
import {
  countThreads,
  explainList,
  explainRecovery,
  middleCursor,
  oneThreadTerm,
  SEARCH_COMMON,
  SEARCH_NONE,
  SEARCH_TRANSCRIPT,
  seedThreads,
  seedTranscripts,
  seedTurns,
  TRANSCRIPT_TURNS,
  type ExplainResult,
} from "./lib/seed.js";
import { fmtMs, summarize } from "./lib/stats.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const RESULTS = path.join(ROOT, "bench", "RESULTS.md");
/** The tree whose dist/ is benched: the working tree, or a `git archive` of --ref (set in main). */
let APP = ROOT;
const serverCmd = () => [process.execPath, path.join(APP, "bin", "app-server.js")];

// ---- options --------------------------------------------------------------------------------

const argv = process.argv.slice(2);
const opt = (name: string) => argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const flag = (name: string) => argv.includes(`--${name}`);
const list = (name: string, def: string[]) => (opt(name) ? opt(name)!.split(",").map((s) => s.trim()).filter(Boolean) : def);

const ALL_PHASES = ["ready", "sandbox", "mcp", "threads", "list", "turns", "durability", "paging", "load", "chaos", "soak", "memory", "search"];
const GROUPS = ["turns", "durability", "paging", "load", "soak", "memory", "search"] as const;
const PHASES = new Set(list("only", ALL_PHASES));
const BACKENDS = list("backend", ["postgres", "pglite"]) as ("postgres" | "pglite")[];
const SIZES = list("sizes", ["10000", "100000"]).map(Number);
const PG_ADMIN_URL = opt("pg-url") ?? process.env.BENCH_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
const QUICK = flag("quick");
const CPU_PROF = opt("cpu-prof");
const SOAK_MINUTES = Number(opt("minutes") ?? (QUICK ? 1 : 3));
const SOAK_ENV = Object.fromEntries(list("soak-env", []).map((kv) => [kv.slice(0, kv.indexOf("=")), kv.slice(kv.indexOf("=") + 1)]));
/** --ref=COMMIT: bench that commit (git archive into a temp dir) instead of the working tree. */
const REF = opt("ref");
/** --baseline=REF: the same phases on REF first, for issue 33's before/after table. */
const BASELINE = opt("baseline");
const JSON_OUT = opt("json");
/** REF resolved once, at start: the branch may move while the bench runs. */
let refCommit: string | undefined;
let cleanupApp: (() => Promise<void>) | null = null;
for (const p of PHASES) if (!ALL_PHASES.includes(p)) throw new Error(`unknown phase ${p}`);
for (const b of BACKENDS) if (b !== "postgres" && b !== "pglite") throw new Error(`unknown backend ${b}`);

const N = {
  readyPostgres: QUICK ? 3 : 10,
  readyPgliteReopen: QUICK ? 2 : 5,
  readyPgliteFresh: QUICK ? 1 : 5,
  readyHistory: QUICK ? 1 : 3,
  floor: QUICK ? 2 : 5,
  startWarmup: QUICK ? 10 : 50,
  start: QUICK ? 50 : 500,
  listWarmup: QUICK ? 3 : 10,
  list: QUICK ? 20 : 200,
};
const BOUND = {
  /** One server start (a fresh PGlite home on a busy 2-core box can take 10 s). */
  startTimeoutMs: 60_000,
  /** Whole "fresh PGlite dir" series: stop early past this. */
  pgliteFreshSeriesMs: 90_000,
  /** Per thread/list case. */
  listCaseMs: 5_000,
  /** thread/start series. */
  startSeriesMs: 30_000,
  /** Idle wait before reading RSS. */
  idleMs: 1_000,
};

// ---- results --------------------------------------------------------------------------------

const latency: LatencyRow[] = [];
const memory: MemRow[] = [];
const explains: { backend: string; size: number; rows: ExplainResult[] }[] = [];
const notes: string[] = [];
const errors: string[] = [];

const log = (msg: string) => process.stderr.write(`[bench ${((performance.now() - T0) / 1000).toFixed(1)}s] ${msg}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const T0 = performance.now();

// ---- helpers --------------------------------------------------------------------------------

async function timed<T>(fn: () => Promise<T>): Promise<[T, number]> {
  const t = performance.now();
  const v = await fn();
  return [v, performance.now() - t];
}

/**
 * Runs `fn` warmup + n times (stopping early at maxMs), returns per-call ms. `pace` (the client's
 * rate-limit wait) runs before each call, outside the timed part.
 */
async function measure(n: number, warmup: number, maxMs: number, fn: () => Promise<unknown>, pace: () => Promise<void> = async () => {}): Promise<number[]> {
  for (let i = 0; i < warmup; i++) {
    await pace();
    await fn();
  }
  const out: number[] = [];
  const start = performance.now();
  for (let i = 0; i < n && performance.now() - start < maxMs; i++) {
    await pace();
    const t = performance.now();
    await fn();
    out.push(performance.now() - t);
  }
  return out;
}

function loadavg(): string {
  return readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
}
/** Highest 1-minute load average seen during the run (sampled every 2 s). */
let maxLoad1 = 0;
const loadSampler = setInterval(() => (maxLoad1 = Math.max(maxLoad1, Number(loadavg().split(" ")[0]))), 2_000);
loadSampler.unref();

const spawnFor = (b: Backend, home = b.home) =>
  spawnServer({ command: serverCmd(), cwd: APP, home, databaseUrl: b.databaseUrl, timeoutMs: BOUND.startTimeoutMs });

const tables: FactTable[] = [];
const groupTimes: string[] = [];
const ctx: BenchContext = {
  quick: QUICK,
  latency,
  memory,
  tables,
  notes,
  errors,
  log: (m) => log(m),
  spawn: (b, extra = {}) =>
    spawnServer({
      command: CPU_PROF ? [process.execPath, "--cpu-prof", `--cpu-prof-dir=${path.resolve(CPU_PROF)}`, ...serverCmd().slice(1)] : serverCmd(),
      cwd: APP,
      home: extra.home ?? b.home,
      databaseUrl: extra.databaseUrl ?? b.databaseUrl,
      timeoutMs: BOUND.startTimeoutMs,
      env: extra.env,
    }),
};

async function startStopSeries(b: Backend, label: string, runs: number, homeFor: (i: number) => Promise<string>, seriesMs = Infinity, after?: (i: number) => Promise<void>) {
  const ready: number[] = [];
  const rss: number[] = [];
  const hwm: number[] = [];
  const t = performance.now();
  for (let i = 0; i < runs && performance.now() - t < seriesMs; i++) {
    const home = await homeFor(i);
    const srv = await spawnFor(b, home);
    await sleep(BOUND.idleMs);
    const m = procMemory(srv.pid);
    await srv.stop();
    ready.push(srv.readyMs);
    rss.push(m.rssMB);
    hwm.push(m.hwmMB);
    log(`${b.name} ${label} #${i + 1}: ready ${srv.readyMs.toFixed(0)} ms (listening line ${srv.listeningMs.toFixed(0)} ms), idle RSS ${m.rssMB.toFixed(1)} MB`);
    await after?.(i);
  }
  if (ready.length < runs) notes.push(`${b.name} ${label}: stopped after ${ready.length} of ${runs} runs (series bound ${seriesMs / 1000} s).`);
  latency.push({ backend: b.name, metric: `ready: ${label}`, s: summarize(ready) });
  memory.push({ backend: b.name, metric: `idle RSS after ready: ${label}`, rss: summarize(rss), hwm: summarize(hwm) });
}

// ---- phases ---------------------------------------------------------------------------------

async function phaseFloor(): Promise<void> {
  const floor: number[] = [];
  const imports: number[] = [];
  for (let i = 0; i < N.floor; i++) floor.push(await timeCommand([process.execPath, "-e", "0"], ROOT));
  const importCli = `import(${JSON.stringify(path.join(APP, "dist", "cli.js"))}).then(() => process.exit(0))`;
  for (let i = 0; i < N.floor; i++) imports.push(await timeCommand([process.execPath, "-e", importCli], ROOT));
  latency.push({ backend: "-", metric: "node -e 0 (process floor)", s: summarize(floor) });
  latency.push({ backend: "-", metric: "node: import dist/cli.js, exit", s: summarize(imports) });
}

async function phaseReady(b: Backend): Promise<void> {
  if (b.name === "postgres") {
    // The very first start on the empty database also runs the migrations.
    await startStopSeries(b, "first start (empty db, migrates)", 1, async () => b.home);
    await startStopSeries(b, "restart (migrated db)", N.readyPostgres, async () => b.home);
    // Where the time goes: the same imports and calls, timed inside one plain node process.
    const runs: Record<string, number>[] = [];
    for (let i = 0; i < N.floor; i++) {
      const out = execFileSync(process.execPath, [path.join(ROOT, "bench", "startup-breakdown.mjs"), b.databaseUrl!, APP], { cwd: APP, encoding: "utf8", timeout: 30_000 });
      runs.push(JSON.parse(out.trim().split("\n").pop()!));
    }
    for (const step of Object.keys(runs[0]!))
      latency.push({ backend: b.name, metric: `start-up step: ${step}`, s: summarize(runs.map((r) => r[step]!)) });
  } else {
    // The first fresh run creates the shared home (kept for the reopen series); the others use
    // throwaway homes, deleted right after. A fresh home starts from the build's pre-initialised
    // seed (dist/pglite-seed.tar.gz) since issue 16, and runs initdb only without a usable one.
    const fresh: string[] = [];
    await startStopSeries(
      b,
      "fresh home",
      N.readyPgliteFresh,
      async (i) => {
        if (i === 0) return b.home;
        const h = await mkdtemp(path.join(os.tmpdir(), "aas-bench-fresh-"));
        fresh.push(h);
        return h;
      },
      BOUND.pgliteFreshSeriesMs,
      async () => {
        for (const h of fresh.splice(0)) await rm(h, { recursive: true, force: true });
      },
    );
    await startStopSeries(b, "reopen existing home", N.readyPgliteReopen, async () => b.home);
  }
}

async function phaseThreads(b: Backend): Promise<void> {
  const srv = await spawnFor(b);
  const c = await BenchClient.connect(srv.url);
  try {
    const params = { cwd: "/home/dev/project-bench" };
    const samples = await measure(N.start, N.startWarmup, BOUND.startSeriesMs, () => c.request("thread/start", params), () => c.pace());
    if (samples.length < N.start) notes.push(`${b.name} thread/start: ${samples.length} of ${N.start} calls within ${BOUND.startSeriesMs / 1000} s.`);
    latency.push({ backend: b.name, metric: "thread/start (sequential)", s: summarize(samples) });
    const m = procMemory(srv.pid);
    memory.push({ backend: b.name, metric: `RSS after ${N.startWarmup + samples.length} thread/start`, rss: summarize([m.rssMB]), hwm: summarize([m.hwmMB]) });
    log(`${b.name} thread/start: p50 ${fmtMs(summarize(samples).p50)} ms over ${samples.length}`);
  } finally {
    await c.close();
    await srv.stop();
  }
}

async function phaseList(b: Backend): Promise<void> {
  let seeded = 0;
  let oneTerm = "";
  for (const size of [...SIZES].sort((x, y) => x - y)) {
    // Seed with the server stopped (PGlite's data dir is locked by the server process).
    const db = await b.openSeed();
    let cursor: string;
    try {
      if (seeded === 0) await db.sql.unsafe("truncate threads cascade");
      const [, seedMs] = await timed(() => seedThreads(db.sql, seeded + 1, size));
      seeded = size;
      const counts = await countThreads(db.sql);
      if (counts.total !== size) throw new Error(`seeded ${counts.total} threads, expected ${size}`);
      log(`${b.name}: seeded to ${size} threads (${counts.listable} listable) in ${(seedMs / 1000).toFixed(1)} s`);
      // Every thread gets a transcript (5 turns, 10 messages: 1M items at 100k threads) for search.
      const [, trMs] = await timed(() => seedTranscripts(db.sql));
      log(`${b.name}: transcripts for ${size} threads (${size * TRANSCRIPT_TURNS * 2} items) in ${(trMs / 1000).toFixed(1)} s`);
      oneTerm = await oneThreadTerm(db.sql);
      // Real Postgres analyzes by itself (autovacuum) soon after a bulk load; do it now so runs
      // are repeatable. PGlite has no autovacuum (single-user backend): leave it as users get it.
      if (b.name === "postgres") await db.sql.unsafe("analyze threads, turns, items");
      const [st] = await db.sql.unsafe<{ reltuples: number }[]>("select reltuples::float8 as reltuples from pg_class where relname = 'threads'");
      if (size === Math.max(...SIZES)) notes.push(`${b.name} @${size}: pg_class.reltuples = ${st!.reltuples} when the server started (-1 = never analyzed).`);
      cursor = await middleCursor(db.sql);
      if (b.name === "pglite") explains.push({ backend: b.name, size, rows: await explainList(db.sql, cursor) });
    } finally {
      await db.close();
    }

    const srv = await spawnFor(b);
    const c = await BenchClient.connect(srv.url);
    try {
      // First: searches on a fresh server. postgres.js uses prepared statements, and Postgres
      // plans the first 5 executions of each with the parameter values (custom plans) before it
      // may switch to a cached generic plan, so these can differ a lot from the warmed-up series.
      const cold: number[] = [];
      for (let i = 0; i < 5; i++) {
        await c.pace();
        cold.push((await timed(() => c.request("thread/list", { searchTerm: SEARCH_COMMON })))[1]);
      }
      latency.push({ backend: b.name, metric: `thread/list @${size / 1000}k: searchTerm "${SEARCH_COMMON}", first 5 calls`, s: summarize(cold) });
      log(`${b.name} thread/list @${size}: first 5 searches: ${cold.map((x) => x.toFixed(1)).join(" ")} ms`);
      // Sanity: the server's own cursors decode like the one built for the deep page.
      const first = await c.request("thread/list", {});
      if (first.data.length !== 25 || !first.nextCursor) throw new Error(`thread/list returned ${first.data.length} rows`);
      const own = JSON.parse(Buffer.from(first.nextCursor, "base64url").toString("utf8"));
      if (own.key !== "created_at" || typeof own.value !== "number" || typeof own.id !== "string")
        throw new Error(`unexpected cursor shape ${JSON.stringify(own)}; update bench/lib/seed.ts middleCursor`);
      const deep = await c.request("thread/list", { cursor });
      if (deep.data.length !== 25) throw new Error(`deep page returned ${deep.data.length} rows`);
      const common = await c.request("thread/list", { searchTerm: SEARCH_COMMON });
      if (common.data.length !== 25) throw new Error(`search returned ${common.data.length} rows`);

      const cases: [string, object, string?][] = [
        ["first page", {}],
        ["deep page (cursor at middle)", { cursor }],
        [`searchTerm "${SEARCH_COMMON}" (1 in 6 match)`, { searchTerm: SEARCH_COMMON }],
        ["searchTerm, no match", { searchTerm: SEARCH_NONE }],
        [`searchTerm "${SEARCH_TRANSCRIPT}" (messages of 1 in 100)`, { searchTerm: SEARCH_TRANSCRIPT }],
        [`searchTerm "${oneTerm}" (a message of ~1 thread)`, { searchTerm: oneTerm }],
        [`searchTerm "deadlock" (1 in 8 messages)`, { searchTerm: "deadlock" }],
        [`thread/search "${SEARCH_COMMON}"`, { query: SEARCH_COMMON }, "thread/search"],
        [`thread/search, no match`, { query: SEARCH_NONE }, "thread/search"],
        [`thread/search "${SEARCH_TRANSCRIPT}"`, { query: SEARCH_TRANSCRIPT }, "thread/search"],
        [`thread/search "${oneTerm}"`, { query: oneTerm }, "thread/search"],
        [`thread/search "deadlock"`, { query: "deadlock" }, "thread/search"],
        [`thread/search "parser deadlock -timeout"`, { query: "parser deadlock -timeout" }, "thread/search"],
      ];
      for (const [name, params, method = "thread/list"] of cases) {
        try {
          const once = await c.request(method, params);
          if (method === "thread/search" && once.data.length && !once.data[0].snippet) throw new Error("thread/search returned no snippet");
          const samples = await measure(N.list, N.listWarmup, BOUND.listCaseMs, () => c.request(method, params), () => c.pace());
          latency.push({ backend: b.name, metric: `thread/list @${size / 1000}k: ${name}`, s: summarize(samples) });
          log(`${b.name} thread/list @${size}: ${name}: p50 ${fmtMs(summarize(samples).p50)} ms (n=${samples.length}, ${once.data.length} rows)`);
        } catch (err) {
          errors.push(`${b.name} thread/list @${size}: ${name}: ${(err as Error).message}`);
        }
      }
      const m = procMemory(srv.pid);
      memory.push({ backend: b.name, metric: `RSS after thread/list @${size / 1000}k`, rss: summarize([m.rssMB]), hwm: summarize([m.hwmMB]) });
      if (b.name === "postgres") {
        const db2 = await b.openSeed();
        try {
          explains.push({ backend: b.name, size, rows: await explainList(db2.sql, cursor) });
        } finally {
          await db2.close();
        }
      }
    } finally {
      await c.close();
      await srv.stop();
    }
  }
  if (seeded >= 100_000) await readyWithHistory(b, seeded);
}

/** Start-up with stored history: does start-up work (recovery of turns) grow with the data? */
async function readyWithHistory(b: Backend, threads: number): Promise<void> {
  const perThread = 3;
  const db = await b.openSeed();
  try {
    const [, ms] = await timed(() => seedTurns(db.sql, perThread, TRANSCRIPT_TURNS));
    if (b.name === "postgres") await db.sql.unsafe("analyze turns");
    log(`${b.name}: seeded ${threads * perThread} turns in ${(ms / 1000).toFixed(1)} s`);
    explains.push({ backend: b.name, size: threads, rows: [await explainRecovery(db.sql)] });
  } finally {
    await db.close();
  }
  await startStopSeries(b, `restart with ${threads / 1000}k threads + ${(threads * perThread) / 1000}k turns`, N.readyHistory, async () => b.home);
}

// ---- backends -------------------------------------------------------------------------------

/** The benched tree's own store code (dist/store/database.js, built above). */
const storeModule = (): Promise<typeof import("../src/store/database.js")> =>
  import(pathToFileURL(path.join(APP, "dist", "store", "database.js")).href);

async function postgresBackend(): Promise<Backend | null> {
  const admin = postgres(PG_ADMIN_URL, { max: 1, onnotice: () => {}, connect_timeout: 5 });
  try {
    await admin`select 1`;
  } catch (err) {
    await admin.end({ timeout: 1 }).catch(() => {});
    errors.push(`Postgres at ${PG_ADMIN_URL} unreachable (${(err as Error).message}); Postgres skipped.`);
    return null;
  }
  const dbName = `aas_bench_${randomBytes(4).toString("hex")}`;
  await admin.unsafe(`create database ${dbName}`);
  const u = new URL(PG_ADMIN_URL);
  u.pathname = `/${dbName}`;
  const databaseUrl = u.toString();
  const home = await mkdtemp(path.join(os.tmpdir(), "aas-bench-pg-"));
  log(`postgres: throwaway database ${dbName}`);
  return {
    name: "postgres",
    home,
    databaseUrl,
    openSeed: async () => {
      // The server's own store code: migrates the database if no server ran on it yet.
      const { openDatabase } = await storeModule();
      const db = await openDatabase({ databaseUrl, maxConnections: 1 });
      return { sql: db.sql, close: () => db.close() };
    },
    cleanup: async () => {
      await admin.unsafe(`drop database if exists ${dbName} with (force)`).catch((e) => errors.push(`drop ${dbName}: ${e.message}`));
      await admin.end({ timeout: 5 });
      await rm(home, { recursive: true, force: true });
    },
  };
}

async function pgliteBackend(): Promise<Backend> {
  const home = await mkdtemp(path.join(os.tmpdir(), "aas-bench-pglite-"));
  return {
    name: "pglite",
    home,
    openSeed: async () => {
      // The server's own store code (takes the dir lock, runs migrations if the home is new).
      const { openDatabase } = await storeModule();
      const db = await openDatabase({ dataDir: path.join(home, "pglite") });
      return { sql: db.sql, close: () => db.close() };
    },
    cleanup: () => rm(home, { recursive: true, force: true }),
  };
}

// ---- machine facts, report ------------------------------------------------------------------

async function machineFacts(pgUrl: string | undefined): Promise<Record<string, string>> {
  const cpu = /model name\s*:\s*(.*)/.exec(readFileSync("/proc/cpuinfo", "utf8"))?.[1] ?? "?";
  const mem = Number(/MemTotal:\s+(\d+)/.exec(readFileSync("/proc/meminfo", "utf8"))?.[1] ?? 0);
  let pgVersion = "not reachable";
  if (pgUrl) {
    const sql = postgres(pgUrl, { max: 1, onnotice: () => {}, connect_timeout: 5 });
    try {
      pgVersion = (await sql<{ v: string }[]>`select split_part(version(), ' on ', 1) as v`)[0]!.v;
    } catch {
      /* keep "not reachable" */
    } finally {
      await sql.end({ timeout: 1 }).catch(() => {});
    }
  }
  const pglitePkg = JSON.parse(await readFile(path.join(ROOT, "node_modules/@electric-sql/pglite/package.json"), "utf8"));
  const commit = benchedCommit;
  return {
    date: execFileSync("date", ["-u"], { encoding: "utf8" }).trim(),
    commit,
    nproc: execFileSync("nproc", { encoding: "utf8" }).trim(),
    cpu,
    memory: `${(mem / 1024 / 1024).toFixed(1)} GiB`,
    node: process.version,
    postgres: pgVersion,
    pglite: `@electric-sql/pglite ${pglitePkg.version} (PostgreSQL 18 in WASM)`,
  };
}

function pad(s: string, n: number, right = false) {
  return right ? s.padStart(n) : s.padEnd(n);
}

function textTable(): string {
  const lines: string[] = [];
  const w = Math.max(...latency.map((r) => r.metric.length), 20);
  lines.push(`${pad("backend", 9)} ${pad("latency (ms)", w)} ${pad("n", 4, true)} ${pad("p50", 7, true)} ${pad("p99", 7, true)} ${pad("mean", 7, true)} ${pad("min", 7, true)} ${pad("max", 7, true)}`);
  for (const r of latency)
    lines.push(
      `${pad(r.backend, 9)} ${pad(r.metric, w)} ${pad(String(r.s.n), 4, true)} ${[r.s.p50, r.s.p99, r.s.mean, r.s.min, r.s.max].map((v) => pad(fmtMs(v), 7, true)).join(" ")}`,
    );
  lines.push("");
  const w2 = Math.max(...memory.map((r) => r.metric.length), 20);
  lines.push(`${pad("backend", 9)} ${pad("memory (MiB)", w2)} ${pad("n", 4, true)} ${pad("RSS p50", 8, true)} ${pad("RSS max", 8, true)} ${pad("peak", 8, true)}`);
  for (const r of memory)
    lines.push(`${pad(r.backend, 9)} ${pad(r.metric, w2)} ${pad(String(r.rss.n), 4, true)} ${pad(r.rss.p50.toFixed(1), 8, true)} ${pad(r.rss.max.toFixed(1), 8, true)} ${pad(r.hwm.max.toFixed(1), 8, true)}`);
  return lines.join("\n");
}

type Verdict = { target: string; measured: string; met: boolean | null };

function verdicts(): Verdict[] {
  const find = (backend: string, prefix: string) => latency.find((r) => r.backend === backend && r.metric.startsWith(prefix));
  const out: Verdict[] = [];
  const base = find("-", "command `true`: unconfined");
  for (const mode of ["read-only", "workspace-write"]) {
    const boxed = find("-", `command \`true\`: bwrap ${mode}`);
    if (base && boxed)
      out.push({
        target: `sandbox overhead per command ≤ 15 ms (${mode}, p50)`,
        measured: `p50 ${fmtMs(boxed.s.p50 - base.s.p50)} ms (${fmtMs(boxed.s.p50)} vs ${fmtMs(base.s.p50)} unconfined), p99 ${fmtMs(boxed.s.p99)} ms`,
        met: boxed.s.p50 - base.s.p50 <= 15,
      });
  }
  if (!["ready", "threads", "list"].some((p) => PHASES.has(p))) return [...out, ...groupVerdicts()];
  const ready = find("postgres", "ready: restart (migrated db)");
  out.push({
    target: "ready ≤ 150 ms on Postgres (p50, restart on a migrated db)",
    measured: ready ? `p50 ${fmtMs(ready.s.p50)} ms, p99 ${fmtMs(ready.s.p99)} ms` : "not run",
    met: ready ? ready.s.p50 <= 150 : null,
  });
  for (const b of ["postgres", "pglite"]) {
    const st = find(b, "thread/start");
    out.push({ target: `thread/start p50 ≤ 5 ms (${b})`, measured: st ? `p50 ${fmtMs(st.s.p50)} ms, p99 ${fmtMs(st.s.p99)} ms` : "not run", met: st ? st.s.p50 <= 5 : null });
  }
  for (const b of ["postgres", "pglite"]) {
    const rows = latency.filter((r) => r.backend === b && r.metric.startsWith("thread/list @100k"));
    const worst = rows.reduce<LatencyRow | undefined>((w, r) => (!w || r.s.p50 > w.s.p50 ? r : w), undefined);
    const firstPage = rows.find((r) => r.metric.endsWith("first page"));
    out.push({
      target: `thread/list p50 ≤ 20 ms at 100 000 threads (${b}, first page)`,
      measured: firstPage ? `p50 ${fmtMs(firstPage.s.p50)} ms` : "not run",
      met: firstPage ? firstPage.s.p50 <= 20 : null,
    });
    if (worst)
      out.push({
        target: `… same target, every case incl. deep page and searchTerm (${b})`,
        measured: `worst p50 ${fmtMs(worst.s.p50)} ms (${worst.metric.replace(/^thread\/list @100k: /, "")})`,
        met: worst.s.p50 <= 20,
      });
  }
  const rss = memory.find((r) => r.backend === "postgres" && r.metric.startsWith("idle RSS after ready: restart (migrated db)"));
  out.push({ target: "idle RSS ≤ 60 MB on Postgres", measured: rss ? `p50 ${rss.rss.p50.toFixed(1)} MiB (max ${rss.rss.max.toFixed(1)})` : "not run", met: rss ? rss.rss.p50 <= 60 : null });
  if (PHASES.has("turns") || PHASES.has("durability") || PHASES.has("paging") || PHASES.has("load") || PHASES.has("soak")) out.push(...groupVerdicts());
  return out;
}

/** Targets of the issues "Turns", "Durable threads", "Self-hosting and hardening". */
function groupVerdicts(): Verdict[] {
  const find = (backend: string, prefix: string) => latency.find((r) => r.backend === backend && r.metric.startsWith(prefix));
  const out: Verdict[] = [];
  if (PHASES.has("soak")) out.push(...soakVerdicts());
  const pq = (r: LatencyRow) => `p50 ${fmtMs(r.s.p50)} ms, p99 ${fmtMs(r.s.p99)} ms`;
  if (PHASES.has("turns")) {
    for (const b of BACKENDS) {
      const o = find(b, "turn overhead:");
      if (o) out.push({ target: `turn overhead ≤ 10 ms (${b}, p50; Codex 0.171: 88–105 ms)`, measured: pq(o), met: o.s.p50 <= 10 });
    }
    for (const b of BACKENDS) {
      for (const [n, limit] of [
        [1, 2],
        [500, 25],
      ] as const) {
        const r = latency.find((x) => x.backend === b && x.metric.startsWith("delta latency:") && x.metric.includes(`, ${n} concurrent`));
        if (r) out.push({ target: `delta latency p99 ≤ ${limit} ms at ${n} stream${n > 1 ? "s" : ""} (${b})`, measured: pq(r), met: r.s.p99 <= limit });
      }
      const mid = latency.find((x) => x.backend === b && x.metric.startsWith("delta latency:") && x.metric.includes(", 100 concurrent"));
      if (mid) out.push({ target: `(delta latency at 100 streams, ${b}: no target)`, measured: pq(mid), met: null });
    }
    for (const r of rssRows) out.push({ target: `RSS per loaded thread (${r.backend}; no target)`, measured: `${r.perThreadKiB.toFixed(1)} KiB (+${r.threads} threads, 1 turn each)`, met: null });
    const small = statementRows.find((r) => r.chunks === 10);
    const big = statementRows.find((r) => r.chunks === 1000);
    if (small && big)
      out.push({
        target: "statements per turn grow with items, not tokens (postgres; 10 → 1 000 chunks adds ≤ 2 statements)",
        measured: statementRows.map((r) => `${r.chunks} chunks: ${r.perTurn.toFixed(1)}`).join(", "),
        met: big.perTurn - small.perTurn <= 2,
      });
  }
  if (PHASES.has("durability")) {
    for (const b of BACKENDS) {
      const f10 = find(b, "thread/fork @10 items");
      const f10k = find(b, "thread/fork @10000 items");
      if (f10 && f10k)
        out.push({
          target: `fork time independent of history: @10 000 ≤ 2 × @10 items (${b}, p50)`,
          measured: `${fmtMs(f10.s.p50)} → ${fmtMs(f10k.s.p50)} ms (${(f10k.s.p50 / f10.s.p50).toFixed(1)}×)`,
          met: f10k.s.p50 <= 2 * f10.s.p50,
        });
      const e10 = find(b, "thread/fork excludeTurns @10 items");
      const e10k = find(b, "thread/fork excludeTurns @10000 items");
      if (e10 && e10k)
        out.push({
          target: `… same, fork with excludeTurns (${b})`,
          measured: `${fmtMs(e10.s.p50)} → ${fmtMs(e10k.s.p50)} ms (${(e10k.s.p50 / e10.s.p50).toFixed(1)}×)`,
          met: e10k.s.p50 <= 2 * e10.s.p50,
        });
      const r10k = find(b, "thread/resume (incl. turns) @10000 items");
      if (r10k) out.push({ target: `thread/resume of 10 000 items ≤ 200 ms (${b}, p50)`, measured: pq(r10k), met: r10k.s.p50 <= 200 });
    }
  }
  if (PHASES.has("paging")) {
    // Issue 17: paged read/resume/fork of a 10 000-item thread ≤ 20 ms p50; default fork O(1).
    const big = PAGING_SIZES[PAGING_SIZES.length - 1];
    for (const b of BACKENDS) {
      for (const call of PAGED_CALLS) {
        const r = find(b, `paging: ${call} @${big} items`);
        if (r) out.push({ target: `${call} @${big} items ≤ 20 ms (${b}, p50)`, measured: pq(r), met: r.s.p50 <= 20 });
      }
      const e10 = find(b, "paging: thread/fork excludeTurns @10 items");
      const eBig = find(b, `paging: thread/fork excludeTurns @${big} items`);
      if (e10 && eBig)
        out.push({
          target: `the fork itself O(1) in the history (excludeTurns): @${big} ≤ 2 × @10 items (${b}, p50)`,
          measured: `${fmtMs(e10.s.p50)} → ${fmtMs(eBig.s.p50)} ms (${(eBig.s.p50 / e10.s.p50).toFixed(1)}×)`,
          met: eBig.s.p50 <= 2 * e10.s.p50,
        });
      // Without excludeTurns the response carries every turn (Codex's full hydration): O(history) by protocol.
      const f10 = find(b, "paging: thread/fork (default) @10 items");
      const fBig = find(b, `paging: thread/fork (default) @${big} items`);
      if (f10 && fBig)
        out.push({
          target: `default thread/fork O(1) in the history: @${big} ≤ 2 × @10 items (${b}, p50)`,
          measured: `${fmtMs(f10.s.p50)} → ${fmtMs(fBig.s.p50)} ms (${(fBig.s.p50 / f10.s.p50).toFixed(1)}×)`,
          met: fBig.s.p50 <= 2 * f10.s.p50,
        });
    }
  }
  if (PHASES.has("load")) {
    for (const f of loadFacts) {
      const r = find(f.backend, "load: delta latency");
      out.push({
        target: `load: ${f.streams} streams + 1 slow client (${f.backend}): normal clients' delta latency (no target of its own; 25 ms as at 500 streams)`,
        measured: r ? pq(r) : "-",
        met: r ? r.s.p99 <= 25 : null,
      });
      out.push({ target: `load: the slow client is closed with 1013 (${f.backend})`, measured: `${f.overflowCloses} overflow close(s); client saw ${f.slowCloseCode}`, met: f.slowCloseCode.startsWith("1013") });
    }
  }
  return out;
}

function allTables(): FactTable[] {
  return [...tables, ...turnsTables(), ...durabilityTables(), ...loadTables(), ...soakTables()];
}

function markdown(facts: Record<string, string>, load: { before: string; after: string }, wallS: number): string {
  const md: string[] = [];
  md.push(`### Run ${facts.date}`, "");
  md.push(`\`npm run bench${argv.length ? " -- " + argv.join(" ") : ""}\` — ${wallS.toFixed(0)} s wall, benched: ${facts.commit}`, "");
  md.push(
    `Machine: ${facts.nproc} cores (${facts.cpu}), ${facts.memory} RAM, node ${facts.node}, ${facts.postgres}, ${facts.pglite}. ` +
      `Load average (1/5/15 min) before ${load.before}, after ${load.after}, highest 1-min value seen ${maxLoad1.toFixed(2)}: the 2 cores are shared with other work (tests may have been running), so treat single numbers as noisy.`,
    "",
  );
  if (ISSUE33_PHASES.some((p) => PHASES.has(p))) md.push(...issue33Markdown(issue33Rows(latency, memory), baselineRows, baselineLabel), "");
  md.push("| target | measured | |", "|---|---|---|");
  for (const v of verdicts()) md.push(`| ${v.target} | ${v.measured} | ${v.met === null ? "–" : v.met ? "met" : "**missed**"} |`);
  md.push("", "Codex 0.171 on this machine, for comparison: ready 200–570 ms, thread/start 46 ms.", "");
  md.push("| backend | latency (ms) | n | p50 | p99 | mean | min | max |", "|---|---|--:|--:|--:|--:|--:|--:|");
  for (const r of latency) md.push(`| ${r.backend} | ${r.metric} | ${r.s.n} | ${[r.s.p50, r.s.p99, r.s.mean, r.s.min, r.s.max].map(fmtMs).join(" | ")} |`);
  md.push("", "| backend | memory (MiB; VmRSS from /proc, peak = VmHWM) | n | RSS p50 | RSS max | peak |", "|---|---|--:|--:|--:|--:|");
  for (const r of memory) md.push(`| ${r.backend} | ${r.metric} | ${r.rss.n} | ${r.rss.p50.toFixed(1)} | ${r.rss.max.toFixed(1)} | ${r.hwm.max.toFixed(1)} |`);
  if (explains.length) {
    md.push("", "Server-side SQL: EXPLAIN ANALYZE of the same thread/list shapes with literals, i.e. the custom plans the first executions of a prepared statement get (the warmed-up server may use a cached generic plan instead), run once after seeding:", "");
    md.push("| backend | threads | case | plan (top nodes) | execution ms |", "|---|--:|---|---|--:|");
    for (const e of explains) for (const r of e.rows) md.push(`| ${e.backend} | ${e.size} | ${r.name} | ${r.plan} | ${r.executionMs.toFixed(2)} |`);
  }
  for (const t of allTables()) {
    md.push("", `${t.title}:`, "", `| ${t.columns.join(" | ")} |`, `|${t.columns.map(() => "---").join("|")}|`);
    for (const r of t.rows) md.push(`| ${r.join(" | ")} |`);
    if (t.notes?.length) md.push("", ...t.notes.map((n) => `- ${n}`));
  }
  if (groupTimes.length) md.push("", `Wall time per part: ${groupTimes.join("; ")}.`);
  if (notes.length || errors.length) md.push("", ...[...notes, ...errors].map((n) => `- ${n}`));
  md.push("");
  return md.join("\n");
}

// ---- main -----------------------------------------------------------------------------------

/** What is benched, as of the start of the run (the branch may move while the bench runs). */
let benchedCommit = "?";

/** Issue 33's rows of the --baseline run (null without one). */
let baselineRows: TargetRow[] | null = null;
let baselineLabel = "";

/** --baseline: the same command on REF in a child process, its issue 33 rows read back. */
async function runBaseline(ref: string): Promise<void> {
  const out = path.join(await mkdtemp(path.join(os.tmpdir(), "aas-bench-baseline-")), "rows.json");
  const args = argv.filter((a) => !/^--(baseline|ref|json)=/.test(a) && a !== "--no-write");
  log(`baseline: the same phases on ${ref} first`);
  try {
    execFileSync(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), ...args, `--ref=${ref}`, `--json=${out}`, "--no-write"], { cwd: ROOT, stdio: ["ignore", "inherit", "inherit"] });
  } catch {
    errors.push(`baseline run on ${ref} failed (its output is above); its column may be incomplete`);
  }
  if (existsSync(out)) {
    const parsed = JSON.parse(await readFile(out, "utf8")) as { commit: string; rows: TargetRow[] };
    baselineRows = parsed.rows;
    baselineLabel = parsed.commit;
  }
  await rm(path.dirname(out), { recursive: true, force: true });
}

async function main(): Promise<void> {
  if (BASELINE) await runBaseline(BASELINE);
  const loadBefore = loadavg();
  if (!REF) {
    try {
      benchedCommit = `working tree at ${execFileSync("git", ["rev-parse", "--short", "HEAD"], { cwd: ROOT, encoding: "utf8" }).trim()}`;
      if (execFileSync("git", ["status", "--porcelain", "--", "src", "migrations", "bin"], { cwd: ROOT, encoding: "utf8" }).trim())
        benchedCommit += " + uncommitted changes in src/";
    } catch {
      /* not a git checkout */
    }
  }
  if (REF) {
    // A clean copy of a commit, so that work in progress in src/ neither breaks nor skews the run.
    APP = await mkdtemp(path.join(os.tmpdir(), "aas-bench-src-"));
    cleanupApp = () => rm(APP, { recursive: true, force: true });
    refCommit = execFileSync("git", ["rev-parse", "--verify", `${REF}^{commit}`], { cwd: ROOT, encoding: "utf8" }).trim();
    benchedCommit = `${refCommit.slice(0, 7)} (--ref=${REF}, built from git archive, working-tree changes excluded)`;
    log(`git archive ${REF} (${refCommit.slice(0, 7)}) → ${APP}`);
    execFileSync("sh", ["-c", `git archive --format=tar "$1" | tar -x -C "$2"`, "sh", refCommit, APP], { cwd: ROOT, stdio: ["ignore", "inherit", "inherit"] });
    await symlink(path.join(ROOT, "node_modules"), path.join(APP, "node_modules"), "dir");
  }
  if (!flag("no-build") || REF) {
    log(`npm run build${REF ? ` (${REF})` : ""}`);
    try {
      execFileSync("npm", ["run", "-s", "build"], { cwd: APP, stdio: ["ignore", "inherit", "inherit"] });
    } catch {
      throw new Error("npm run build failed (is src/ in the middle of a change?): fix it, or rerun with --no-build to bench dist/ as it is");
    }
  }
  if (!existsSync(path.join(APP, "dist", "main.js"))) throw new Error("dist/main.js missing: run npm run build");

  if (PHASES.has("ready")) await phaseFloor();
  if (PHASES.has("sandbox")) await groupSandbox(APP, QUICK ? 20 : 200, { latency, memory, notes });
  if (PHASES.has("mcp")) await groupMcp(APP, QUICK ? 50 : 500, { latency, memory, notes });
  if (PHASES.has("chaos")) {
    // Its own processes and database on the Postgres server; its summary lines become notes.
    const args = ["tsx", "bench/cluster-chaos.ts", QUICK ? "--seeds=1" : "--seeds=1,2,3", QUICK ? "--rounds=5" : "--rounds=20"];
    let out = "";
    try {
      out = execFileSync("npx", args, { cwd: APP, env: { ...process.env, TEST_DATABASE_URL: PG_ADMIN_URL }, encoding: "utf8", maxBuffer: 16 * 2 ** 20 });
    } catch (err) {
      out = String((err as { stdout?: string }).stdout ?? err);
      errors.push("chaos: a seed violated an invariant (see the notes)");
    }
    for (const line of out.split("\n").filter((l) => l.startsWith("seed ") || l.startsWith("  violation"))) notes.push(`chaos: ${line.trim()}`);
  }

  let pgReachable: string | undefined;
  for (const name of BACKENDS) {
    const runs: [string, (b: Backend) => Promise<void>][] = [];
    if (["ready", "threads", "list"].some((p) => PHASES.has(p)))
      runs.push([
        "ready/threads/list",
        async (b) => {
          if (PHASES.has("ready")) await phaseReady(b);
          if (PHASES.has("threads")) await phaseThreads(b);
          if (PHASES.has("list")) await phaseList(b);
        },
      ]);
    // Each new group on a fresh database / home, so that what an earlier phase stored (100k
    // threads, 300k turns) does not change its numbers.
    for (const g of GROUPS) {
      if (!PHASES.has(g)) continue;
      if (g === "load" && name === "pglite" && !flag("load-pglite")) {
        notes.push("load: run on Postgres only (PGlite: pass --load-pglite).");
        continue;
      }
      runs.push([g, (b) => (g === "memory" ? groupMemory(ctx, b) : g === "turns" ? groupTurns(ctx, b) : g === "durability" ? groupDurability(ctx, b) : g === "paging" ? groupPaging(ctx, b) : g === "search" ? groupSearch(ctx, b) : g === "soak" ? groupSoak(ctx, b, { minutes: SOAK_MINUTES, env: SOAK_ENV, label: Object.keys(SOAK_ENV).length ? list("soak-env", []).join(" ") : "", restartMinute: flag("soak-restart") }) : groupLoad(ctx, b))]);
    }
    for (const [label, run] of runs) {
      const b = name === "postgres" ? await postgresBackend() : await pgliteBackend();
      if (!b) break;
      if (name === "postgres") pgReachable = PG_ADMIN_URL;
      activeCleanup = async () => {
        killAllSpawned();
        await b.cleanup();
      };
      const t = performance.now();
      try {
        await run(b);
      } catch (err) {
        errors.push(`${name} ${label}: ${(err as Error).stack ?? err}`);
        log(`${name} ${label} failed: ${(err as Error).message}`);
      } finally {
        activeCleanup = null;
        await b.cleanup();
      }
      groupTimes.push(`${name} ${label}: ${((performance.now() - t) / 1000).toFixed(0)} s`);
    }
  }
  if (!pgReachable && !BACKENDS.includes("postgres")) pgReachable = PG_ADMIN_URL;

  const facts = await machineFacts(pgReachable);
  const wallS = (performance.now() - T0) / 1000;
  process.stdout.write(`\n${textTable()}\n\nTargets:\n`);
  for (const v of verdicts()) process.stdout.write(`  ${v.met === null ? "–     " : v.met ? "met   " : "MISSED"}  ${v.target}: ${v.measured}\n`);
  const rows33 = issue33Rows(latency, memory);
  if (ISSUE33_PHASES.some((p) => PHASES.has(p))) process.stdout.write(`\n${issue33Text(rows33, baselineRows, baselineLabel).join("\n")}\n`);
  if (JSON_OUT) await writeFile(JSON_OUT, JSON.stringify({ commit: benchedCommit, rows: rows33 }));
  for (const t of allTables()) {
    process.stdout.write(`\n${t.title}:\n  ${t.columns.join(" | ")}\n`);
    for (const r of t.rows) process.stdout.write(`  ${r.join(" | ")}\n`);
  }
  if (groupTimes.length) process.stdout.write(`\nwall time: ${groupTimes.join("; ")}\n`);
  for (const n of [...notes, ...errors]) process.stdout.write(`note: ${n}\n`);
  process.stdout.write(`\n${facts.date}; ${facts.nproc} × ${facts.cpu}; node ${facts.node}; ${facts.postgres}; load ${loadBefore} → ${loadavg()} (max ${maxLoad1.toFixed(2)}); ${wallS.toFixed(0)} s\n`);

  if (!flag("no-write")) {
    const section = markdown(facts, { before: loadBefore, after: loadavg() }, wallS);
    if (!existsSync(RESULTS)) await writeFile(RESULTS, "# Benchmark results\n\nAppended by `npm run bench` (bench/run.ts); newest run last.\n\n");
    await appendFile(RESULTS, section);
    log(`appended to ${path.relative(ROOT, RESULTS)}`);
  }
  if (errors.length) process.exitCode = 1;
}

let activeCleanup: (() => Promise<void>) | null = null;
const onSignal = () => {
  killAllSpawned();
  const bound = new Promise((r) => setTimeout(r, 5_000));
  const cleanups = Promise.all([activeCleanup?.().catch(() => {}), cleanupApp?.().catch(() => {})]);
  void Promise.race([cleanups, bound]).finally(() => process.exit(130));
};
process.once("SIGINT", onSignal);
process.once("SIGTERM", onSignal);
process.on("exit", killAllSpawned);
main().then(
  () => cleanupApp?.(),
  async (err) => {
    killAllSpawned();
    await cleanupApp?.().catch(() => {});
    process.stderr.write(`${(err as Error).stack ?? err}\n`);
    process.exit(1);
  },
);
