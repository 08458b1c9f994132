/**
 * Group "turns" (issue "Turns"): the server (built CLI, child process) with its `openai` provider
 * (Responses API) pointed at the mock model server, which runs in the bench process together
 * with the WebSocket clients, so mock send times and client receive times share one clock.
 *
 *   (a) turn overhead: turn/start → turn/completed minus the mock's own streaming time, instant mock
 *   (b) delta forwarding latency with 1, 100 and 500 concurrent streaming turns
 *   (c) RSS per loaded thread
 *   (d) database statements per turn for 10 / 100 / 1 000 text chunks (Postgres, counting proxy)
 */
import postgres from "postgres";
import type { Backend, BenchContext, FactTable } from "../lib/context.js";
import { BenchMock, textChunks } from "../lib/mock.js";
import { PgCountingProxy } from "../lib/pg-proxy.js";
import { httpGetText, metricValue, procCpuSeconds, procMemory, type ServerProcess } from "../lib/proc.js";
import { fmtMs, summarize } from "../lib/stats.js";
import { connectMany, pool, StreamClient } from "../lib/stream-client.js";
import { BENCH_CWD, nextMarker, runTurn, streamRound, threadsFor, turnTiming, type StreamSlot, type TurnTiming } from "../lib/turn-driver.js";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Limits that let 500 connections each run a turn (defaults: 1000 connections, 256 turns). */
export const LOAD_LIMITS = { APP_SERVER_MAX_CONNECTIONS: "1000", APP_SERVER_MAX_CONCURRENT_TURNS: "600" };

export const STREAM = { chunks: 50, chunkDelayMs: 20 };

export async function groupTurns(ctx: BenchContext, b: Backend): Promise<void> {
  const q = ctx.quick;
  const mock = await BenchMock.start();
  try {
    // (a) and (b) on one server.
    let srv = await ctx.spawn(b, { env: { ...mock.serverEnv(), ...LOAD_LIMITS } });
    try {
      await turnOverhead(ctx, b, srv, mock, q ? { threads: 6, perThread: 5, warmup: 5 } : { threads: 20, perThread: 10, warmup: 10 });
      await deltaLatency(ctx, b, srv, mock, b.name === "postgres" ? [1, 100, 500] : [1, 100]);
    } finally {
      await srv.stop();
    }
    // (c) on a fresh server.
    mock.reset();
    srv = await ctx.spawn(b, { env: { ...mock.serverEnv(), ...LOAD_LIMITS } });
    try {
      await rssPerThread(ctx, b, srv, q ? [100, 100] : [1000, 1000]);
    } finally {
      await srv.stop();
    }
    // (d) Postgres only: the wire between the server and its database is only reachable there.
    if (b.name === "postgres") {
      mock.reset();
      await statementsPerTurn(ctx, b, mock, q ? 4 : 10);
      await roundTrip(ctx, b);
    } else ctx.notes.push(`${b.name}: statements per turn not measured (the embedded database is inside the server process; see the Postgres rows).`);
  } finally {
    await mock.close();
  }
}

// ---- (a) turn overhead ----------------------------------------------------------------------

async function turnOverhead(ctx: BenchContext, b: Backend, srv: ServerProcess, mock: BenchMock, n: { threads: number; perThread: number; warmup: number }) {
  const c = await StreamClient.connect(srv.url);
  try {
    const reply = { text: textChunks(5) };
    // Warm-up: the first turn imports the provider SDK and opens the HTTP connection (~300 ms).
    const warm = (await c.request("thread/start", { cwd: BENCH_CWD })).thread.id;
    for (let i = 0; i < n.warmup; i++) {
      mock.enqueue(reply);
      await runTurn(c, warm, nextMarker("w"));
    }
    const timings: TurnTiming[] = [];
    let failed = 0;
    const m0 = await serverMetrics(srv);
    const cpu0 = procCpuSeconds(srv.pid);
    const start = Date.now();
    const w0 = process.hrtime.bigint() / 1000n;
    for (let t = 0; t < n.threads && Date.now() - start < 60_000; t++) {
      const threadId = (await c.request("thread/start", { cwd: BENCH_CWD })).thread.id;
      for (let i = 0; i < n.perThread; i++) {
        mock.enqueue(reply);
        const r = await runTurn(c, threadId, nextMarker("o"));
        const tt = turnTiming(mock, r);
        if (r.status !== "completed" || !tt) failed++;
        else timings.push(tt);
      }
    }
    if (failed) ctx.errors.push(`${b.name} turn overhead: ${failed} turns did not complete`);
    const cpuPerTurnMs = ((procCpuSeconds(srv.pid) - cpu0) * 1000) / (timings.length + failed);
    const m1 = await serverMetrics(srv);
    const n1 = timings.length + failed;
    const commits = m1.commitCount - m0.commitCount;
    overheadRows.push({
      backend: b.name,
      turns: n1,
      commitsPerTurn: commits / n1,
      commitMeanMs: ((m1.commitSum - m0.commitSum) / commits) * 1000,
      modelCallMeanMs: ((m1.modelSum - m0.modelSum) / (m1.modelCount - m0.modelCount)) * 1000,
      overheadP50: summarize(timings.map((t) => t.overheadMs)).p50,
      cpuPerTurnMs,
    });
    const row = (metric: string, pick: (t: TurnTiming) => number) => ctx.latency.push({ backend: b.name, metric, s: summarize(timings.map(pick)) });
    row("turn overhead: turn/start → turn/completed − mock stream (instant mock, 5 chunks)", (t) => t.overheadMs);
    row("· turn: total turn/start → turn/completed", (t) => t.totalMs);
    row("· turn: turn/start → its response", (t) => t.responseMs);
    row("· turn: turn/start → model request at the mock", (t) => t.toModelMs);
    row("· turn: mock first → last SSE frame", (t) => t.mockMs);
    row("· turn: mock last frame → turn/completed at the client", (t) => t.afterModelMs);
    const s = summarize(timings.map((t) => t.overheadMs));
    ctx.log(`${b.name} turn overhead: p50 ${fmtMs(s.p50)} ms, p99 ${fmtMs(s.p99)} ms over ${s.n} turns (profile window --from=${w0} --to=${process.hrtime.bigint() / 1000n})`);
  } finally {
    await c.close();
  }
}

export interface OverheadRow {
  backend: string;
  turns: number;
  commitsPerTurn: number;
  commitMeanMs: number;
  modelCallMeanMs: number;
  overheadP50: number;
  /** Server CPU (utime + stime) per turn, thread/start of every 10th turn included. */
  cpuPerTurnMs: number;
}
export const overheadRows: OverheadRow[] = [];

/** The server's own record-before-publish transaction and model-call timings (GET /metrics). */
async function serverMetrics(srv: ServerProcess) {
  const text = await httpGetText(`${srv.httpUrl}/metrics`);
  const v = (name: string) => {
    const x = metricValue(text, name);
    return Number.isFinite(x) ? x : 0;
  };
  return {
    commitSum: v("app_server_db_commit_duration_seconds_sum"),
    commitCount: v("app_server_db_commit_duration_seconds_count"),
    modelSum: v("app_server_model_call_duration_seconds_sum"),
    modelCount: v("app_server_model_call_duration_seconds_count"),
  };
}

// ---- (b) delta forwarding latency -----------------------------------------------------------

export interface StreamRow {
  backend: string;
  streams: number;
  rounds: number;
  turns: number;
  failed: number;
  deltas: number;
  unmatched: number;
  wallMs: number;
  cpuS: number;
  benchLoopP99Ms: number;
  benchCpuS: number;
  startSpreadMs: number;
  streamMs: number;
  chunks: number;
  chunkDelayMs: number;
  allConcurrent: boolean;
}
export const streamRows: StreamRow[] = [];

async function deltaLatency(ctx: BenchContext, b: Backend, srv: ServerProcess, mock: BenchMock, levels: number[]) {
  const max = Math.max(...levels);
  const t0 = Date.now();
  const clients = await connectMany(srv.url, max);
  try {
    const slots: StreamSlot[] = await threadsFor(clients);
    ctx.log(`${b.name}: ${max} connections with a thread each in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    // Warm-up round (not recorded).
    await streamRound(mock, srv.pid, slots.slice(0, Math.min(20, max)), { ...STREAM, timeoutMs: 60_000 });
    for (const n of levels) {
      // One stream: sequential turns until ~500 deltas; many streams: one round.
      const rounds = n === 1 ? (ctx.quick ? 3 : 10) : 1;
      const lat: number[] = [];
      const first: number[] = [];
      const rest: number[] = [];
      const agg: StreamRow = { backend: b.name, streams: n, rounds: 0, turns: 0, failed: 0, deltas: 0, unmatched: 0, wallMs: 0, cpuS: 0, benchLoopP99Ms: 0, benchCpuS: 0, startSpreadMs: 0, streamMs: 0, ...STREAM, allConcurrent: true };
      for (let r = 0; r < rounds; r++) {
        const res = await streamRound(mock, srv.pid, slots.slice(0, n), { ...STREAM, timeoutMs: 120_000 });
        lat.push(...res.lat);
        first.push(...res.first);
        rest.push(...res.rest);
        agg.rounds++;
        agg.turns += res.results.length;
        agg.failed += res.failed;
        agg.deltas += res.deltas;
        agg.unmatched += res.unmatched;
        agg.wallMs += res.wallMs;
        agg.cpuS += res.cpuS;
        agg.benchCpuS += res.benchCpuS;
        agg.startSpreadMs = Math.max(agg.startSpreadMs, res.startSpreadMs);
        agg.streamMs += res.streamMs;
        agg.benchLoopP99Ms = Math.max(agg.benchLoopP99Ms, res.benchLoopP99Ms);
        agg.allConcurrent &&= res.allConcurrent;
        for (const e of res.errors) ctx.errors.push(`${b.name} ${n} streams: ${e}`);
        if (n > 1) ctx.log(`${b.name} ${n}-stream round: profile window ${res.window}`);
      }
      streamRows.push(agg);
      const s = summarize(lat);
      ctx.latency.push({ backend: b.name, metric: `delta latency: mock chunk written → client delta, ${n} concurrent stream${n > 1 ? "s" : ""}`, s });
      ctx.latency.push({ backend: b.name, metric: `· ${n} stream${n > 1 ? "s" : ""}: first delta of each turn (waits for item/started to commit)`, s: summarize(first) });
      ctx.latency.push({ backend: b.name, metric: `· ${n} stream${n > 1 ? "s" : ""}: all later deltas`, s: summarize(rest) });
      ctx.log(`${b.name} delta latency @${n}: p50 ${fmtMs(s.p50)} p99 ${fmtMs(s.p99)} ms (${agg.deltas} deltas, ${agg.failed} failed, server CPU ${agg.cpuS.toFixed(1)} s in ${(agg.wallMs / 1000).toFixed(1)} s)`);
      if (n > 1 && agg.deltas > 0) await cpuPerDelta(ctx, b, srv, mock, slots.slice(0, n), agg);
    }
    const m = procMemory(srv.pid);
    ctx.memory.push({ backend: b.name, metric: `RSS after ${max} connections × 1 thread, streaming rounds`, rss: summarize([m.rssMB]), hwm: summarize([m.hwmMB]) });
  } finally {
    await pool(clients, 50, (c) => c.close());
  }
}

/**
 * Server CPU per streamed delta at `streams` concurrent streams (issue 33 item 1): the round's
 * server CPU (/proc utime + stime, robust to other load on the machine) over the deltas it
 * delivered. That figure carries each turn's fixed cost (turn/start, its transactions,
 * turn/completed) spread over its 50 deltas, so a second round of the same turns with
 * SHORT_CHUNKS chunks each separates the two: marginal CPU per delta = the CPU the extra deltas
 * added / their number, and fixed CPU per turn = what is left of the short round.
 */
const SHORT_CHUNKS = 5;

async function cpuPerDelta(ctx: BenchContext, b: Backend, srv: ServerProcess, mock: BenchMock, slots: StreamSlot[], full: StreamRow) {
  const n = slots.length;
  const short = await streamRound(mock, srv.pid, slots, { ...STREAM, chunks: SHORT_CHUNKS, timeoutMs: 120_000 });
  for (const e of short.errors) ctx.errors.push(`${b.name} ${n} streams (${SHORT_CHUNKS} chunks): ${e}`);
  const perDeltaUs = (full.cpuS * 1e6) / full.deltas;
  const extra = full.deltas - short.deltas;
  const marginalUs = extra > 0 ? ((full.cpuS - short.cpuS) * 1e6) / extra : NaN;
  const perTurnFixedMs = ((short.cpuS - (marginalUs / 1e6) * short.deltas) * 1000) / Math.max(1, short.results.length);
  cpuRows.push({ backend: b.name, streams: n, deltas: full.deltas, cpuS: full.cpuS, perDeltaUs, shortDeltas: short.deltas, shortCpuS: short.cpuS, marginalUs, perTurnFixedMs });
  const row = (metric: string, v: number) => ctx.latency.push({ backend: b.name, metric, s: summarize([v]), note: "µs, not ms" });
  row(`server CPU per delta: ${n} concurrent`, perDeltaUs);
  row(`· server CPU per delta, marginal (${STREAM.chunks} − ${SHORT_CHUNKS} chunk rounds): ${n} concurrent`, marginalUs);
  ctx.log(
    `${b.name} server CPU per delta @${n}: ${perDeltaUs.toFixed(0)} µs (${full.cpuS.toFixed(2)} s / ${full.deltas}); ${SHORT_CHUNKS}-chunk round ${short.cpuS.toFixed(2)} s / ${short.deltas} deltas → marginal ${marginalUs.toFixed(0)} µs per delta, ${perTurnFixedMs.toFixed(2)} ms per turn besides (profile window ${short.window})`,
  );
}

export interface CpuRow {
  backend: string;
  streams: number;
  deltas: number;
  cpuS: number;
  perDeltaUs: number;
  shortDeltas: number;
  shortCpuS: number;
  marginalUs: number;
  perTurnFixedMs: number;
}
export const cpuRows: CpuRow[] = [];

// ---- (c) RSS per loaded thread --------------------------------------------------------------

async function rssPerThread(ctx: BenchContext, b: Backend, srv: ServerProcess, steps: number[]) {
  const c = await StreamClient.connect(srv.url);
  try {
    // Instant default reply ("OK"). Warm-up first so module loading and JIT are not counted.
    const loadThreads = async (count: number) => {
      const ids = Array.from({ length: count }, (_, i) => i);
      await pool(ids, 4, async () => {
        const threadId = (await c.request("thread/start", { cwd: BENCH_CWD })).thread.id;
        const r = await runTurnShared(c, threadId);
        if (r !== "completed") throw new Error(`turn ended ${r}`);
      });
    };
    await loadThreads(20);
    await sleep(1500);
    const base = procMemory(srv.pid).rssMB;
    let loaded = 20;
    let prev = base;
    const rows: string[] = [];
    for (const count of steps) {
      const t = Date.now();
      await loadThreads(count);
      loaded += count;
      await sleep(1500);
      const now = procMemory(srv.pid);
      const listed = (await c.request("thread/loaded/list", {})).data.length;
      const perKiB = ((now.rssMB - prev) * 1024) / count;
      ctx.memory.push({ backend: b.name, metric: `RSS with ${loaded} loaded threads (1 turn each, 1 connection)`, rss: summarize([now.rssMB]), hwm: summarize([now.hwmMB]) });
      rows.push(`+${count} threads (${listed} loaded): ${perKiB.toFixed(1)} KiB each`);
      ctx.log(`${b.name}: ${loaded} loaded threads (${listed} listed): RSS ${now.rssMB.toFixed(1)} MiB (+${perKiB.toFixed(1)} KiB/thread), ${((Date.now() - t) / 1000).toFixed(1)} s`);
      prev = now.rssMB;
    }
    const total = steps.reduce((a, x) => a + x, 0);
    rssRows.push({ backend: b.name, threads: total, baseMB: base, afterMB: prev, perThreadKiB: ((prev - base) * 1024) / total, steps: rows });
  } finally {
    await c.close();
  }
}

export interface RssRow {
  backend: string;
  threads: number;
  baseMB: number;
  afterMB: number;
  perThreadKiB: number;
  steps: string[];
}
export const rssRows: RssRow[] = [];

/** A turn with the mock's default reply, for clients that run several threads at once. */
async function runTurnShared(c: StreamClient, threadId: string): Promise<string> {
  const done = c.waitFor("turn/completed", (p) => p.threadId === threadId, 60_000);
  await c.request("turn/start", { threadId, input: [{ type: "text", text: "Say OK.", text_elements: [] }] });
  return (await done).params.turn.status;
}

// ---- (d) statements per turn ----------------------------------------------------------------

export interface StatementRow {
  backend: string;
  chunks: number;
  turns: number;
  perTurn: number;
  transactionsPerTurn: number;
  /** Durable commits (COMMITs and autocommit writes, PgCountingProxy). */
  commitsPerTurn: number;
  bytesToPgPerTurn: number;
  rowsPerTurn: Record<string, number>;
  byKind: [string, number][];
}
export const statementRows: StatementRow[] = [];

async function statementsPerTurn(ctx: BenchContext, b: Backend, mock: BenchMock, turnsPerSize: number) {
  const proxy = await PgCountingProxy.start(b.databaseUrl!);
  const srv = await ctx.spawn(b, { databaseUrl: proxy.url, env: { ...mock.serverEnv(), ...LOAD_LIMITS } });
  const direct = postgres(b.databaseUrl!, { max: 1, onnotice: () => {} });
  const c = await StreamClient.connect(srv.url);
  try {
    const warm = (await c.request("thread/start", { cwd: BENCH_CWD })).thread.id;
    for (let i = 0; i < 3; i++) {
      mock.enqueue({ text: textChunks(10) });
      await runTurn(c, warm, nextMarker("w"));
    }
    for (const chunks of [10, 100, 1000]) {
      // Two turns per thread (the first turn of a thread also stores the environment context).
      const threads: string[] = [];
      for (let i = 0; i < turnsPerSize / 2; i++) threads.push((await c.request("thread/start", { cwd: BENCH_CWD })).thread.id);
      await sleep(200);
      const before = proxy.snapshot();
      let turns = 0;
      for (const threadId of threads) {
        for (let k = 0; k < 2; k++) {
          mock.enqueue({ text: textChunks(chunks) });
          const r = await runTurn(c, threadId, nextMarker("d"));
          if (r.status !== "completed") throw new Error(`turn ${r.status}`);
          if (r.deltas.length !== chunks) ctx.notes.push(`${b.name} statements @${chunks} chunks: a turn delivered ${r.deltas.length} deltas`);
          turns++;
        }
      }
      await sleep(300); // anything the turns still write (none expected) lands in this window
      const d = PgCountingProxy.diff(proxy.snapshot(), before);
      const rows: Record<string, number> = {};
      for (const table of ["turns", "items", "model_messages", "thread_events"]) {
        const [r] = await direct.unsafe<{ n: number }[]>(`select count(*)::int as n from ${table} where thread_id = any($1)`, [threads]);
        rows[table] = r!.n / turns;
      }
      const row: StatementRow = {
        backend: b.name,
        chunks,
        turns,
        perTurn: d.statements / turns,
        transactionsPerTurn: (d.byKind.get("begin") ?? 0) / turns,
        commitsPerTurn: d.commits / turns,
        bytesToPgPerTurn: d.bytesToPg / turns,
        rowsPerTurn: rows,
        byKind: [...d.byKind].sort((x, y) => y[1] - x[1]).map(([k, v]) => [k, v / turns]),
      };
      statementRows.push(row);
      ctx.log(`${b.name} statements per turn @${chunks} chunks: ${row.perTurn.toFixed(1)} (${row.transactionsPerTurn.toFixed(1)} transactions, ${row.commitsPerTurn.toFixed(1)} durable commits, ${(row.bytesToPgPerTurn / 1024).toFixed(1)} KiB to Postgres)`);
    }
  } finally {
    await c.close();
    await srv.stop();
    await direct.end({ timeout: 5 });
    await proxy.close();
  }
}

/** Reference: one statement round trip to this Postgres from a node process (postgres.js). */
async function roundTrip(ctx: BenchContext, b: Backend) {
  const sql = postgres(b.databaseUrl!, { max: 1, onnotice: () => {} });
  try {
    const out: number[] = [];
    for (let i = 0; i < 320; i++) {
      const t = process.hrtime.bigint();
      await sql`select 1`;
      if (i >= 20) out.push(Number(process.hrtime.bigint() - t) / 1e6);
    }
    ctx.latency.push({ backend: b.name, metric: "reference: one statement round trip (postgres.js `select 1`, bench → Postgres)", s: summarize(out) });
  } finally {
    await sql.end({ timeout: 5 });
  }
}

const f1 = (v: number) => (Number.isInteger(v) ? String(v) : v.toFixed(1));

export function turnsTables(): FactTable[] {
  const out: FactTable[] = [];
  if (overheadRows.length)
    out.push({
      title: "Turn overhead, as the server itself sees it (GET /metrics before and after the measured turns)",
      columns: ["backend", "turns", "overhead p50 (ms)", "record-before-publish transactions / turn", "mean transaction (ms, app_server_db_commit_duration_seconds)", "→ ms / turn in transactions", "mean model call (ms, request → final event)", "server CPU / turn (ms, /proc)"],
      rows: overheadRows.map((r) => [
        r.backend,
        String(r.turns),
        fmtMs(r.overheadP50),
        r.commitsPerTurn.toFixed(1),
        fmtMs(r.commitMeanMs),
        fmtMs(r.commitsPerTurn * r.commitMeanMs),
        fmtMs(r.modelCallMeanMs),
        fmtMs(r.cpuPerTurnMs),
      ]),
    });
  if (streamRows.length)
    out.push({
      title: `Streaming rounds (${STREAM.chunks} chunks per turn, one every ${STREAM.chunkDelayMs} ms; the mock holds every reply until all requests are in, then releases them spread over one interval)`,
      columns: ["backend", "concurrent streams", "rounds", "turns ok / failed", "deltas (unmatched)", "starting the turns (ms)", "offered deltas/s", "delivered deltas/s while streaming", "server CPU (share of one core)", "bench CPU (mock + clients)", "bench event-loop delay p99 ms"],
      rows: streamRows.map((r) => [
        r.backend,
        String(r.streams),
        String(r.rounds),
        `${r.turns - r.failed} / ${r.failed}`,
        `${r.deltas} (${r.unmatched})`,
        fmtMs(r.startSpreadMs),
        String(Math.round((r.streams * 1000) / r.chunkDelayMs)),
        String(Math.round(r.deltas / (r.streamMs / 1000))),
        `${r.cpuS.toFixed(1)} s (${((r.cpuS / (r.wallMs / 1000)) * 100).toFixed(0)}%)`,
        `${r.benchCpuS.toFixed(1)} s (${((r.benchCpuS / (r.wallMs / 1000)) * 100).toFixed(0)}%)`,
        fmtMs(r.benchLoopP99Ms),
      ]),
      notes: [
        "Starting the turns = first turn/start sent → the last model request reached the mock (the streams begin only then). Delivered rate = deltas / (gates opened → last turn/completed). CPU = over the whole round incl. starting the turns.",
      ],
    });
  if (cpuRows.length)
    out.push({
      title: `Server CPU per streamed delta (/proc utime + stime of the server over a round; a second round of the same turns with ${SHORT_CHUNKS} chunks each separates each turn's fixed cost from the deltas)`,
      columns: ["backend", "concurrent streams", `${STREAM.chunks}-chunk round: CPU / deltas`, "CPU per delta (µs)", `${SHORT_CHUNKS}-chunk round: CPU / deltas`, "marginal CPU per delta (µs)", "fixed CPU per turn besides (ms)"],
      rows: cpuRows.map((r) => [
        r.backend,
        String(r.streams),
        `${r.cpuS.toFixed(2)} s / ${r.deltas}`,
        r.perDeltaUs.toFixed(0),
        `${r.shortCpuS.toFixed(2)} s / ${r.shortDeltas}`,
        r.marginalUs.toFixed(0),
        r.perTurnFixedMs.toFixed(2),
      ]),
      notes: ["CPU per delta = the 50-chunk round's server CPU / its deltas (each turn's start, transactions and end included); marginal = (CPU of the 50-chunk round − CPU of the short round) / (their difference in deltas)."],
    });
  if (rssRows.length)
    out.push({
      title: "RSS per loaded thread (one connection starts N threads and runs one instant turn on each; the threads stay loaded while it is subscribed)",
      columns: ["backend", "threads added", "RSS before → after (MiB)", "per thread", "steps"],
      rows: rssRows.map((r) => [r.backend, String(r.threads), `${r.baseMB.toFixed(1)} → ${r.afterMB.toFixed(1)}`, `${r.perThreadKiB.toFixed(1)} KiB`, r.steps.join("; ")]),
    });
  if (statementRows.length) {
    out.push({
      title: "Database statements per turn (message-only turn, counted on the wire by a proxy between the server and Postgres; rows counted in the tables afterwards)",
      columns: [
        "backend",
        "text chunks per turn",
        "turns",
        "statements / turn",
        "transactions / turn",
        "durable commits / turn (COMMITs + autocommit writes)",
        "KiB sent to Postgres / turn",
        "rows / turn: turns, items, model_messages, thread_events",
      ],
      rows: statementRows.map((r) => [
        r.backend,
        String(r.chunks),
        String(r.turns),
        f1(r.perTurn),
        f1(r.transactionsPerTurn),
        f1(r.commitsPerTurn),
        (r.bytesToPgPerTurn / 1024).toFixed(1),
        ["turns", "items", "model_messages", "thread_events"].map((t) => f1(r.rowsPerTurn[t] ?? 0)).join(", "),
      ]),
    });
    const kinds = [...new Set(statementRows.flatMap((r) => r.byKind.map(([k]) => k)))];
    out.push({
      title: "Statements per turn by kind",
      columns: ["statement", ...statementRows.map((r) => `${r.chunks} chunks`)],
      rows: kinds.map((k) => [k, ...statementRows.map((r) => f1(r.byKind.find(([x]) => x === k)?.[1] ?? 0))]),
    });
  }
  return out;
}

