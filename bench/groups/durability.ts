/**
 * Group "durability" (issue "Durable threads"): threads with 10, 1 000 and 10 000 stored items
 * (message-only turns: 2 items each) seeded with SQL, then against the real server (child
 * process): thread/fork, thread/resume (round trip incl. turns), thread/read includeTurns, and
 * the replay of a thread's stored events (thread/resume afterSeq=0). Each resume/fork starts from
 * an unloaded thread (the client unsubscribes after each call), which is the case after a
 * restart or for a thread nobody watches.
 */
import type { Backend, BenchContext, FactTable } from "../lib/context.js";
import { procMemory } from "../lib/proc.js";
import { seedHistoryThread, type SeededThread } from "../lib/seed-history.js";
import { fmtMs, summarize } from "../lib/stats.js";
import { StreamClient } from "../lib/stream-client.js";

const ms = (ns: bigint) => Number(ns) / 1e6;

export interface DurabilityFacts {
  backend: string;
  seedS: number;
  replay: { events: number; runs: number; eventsPerS: number[]; responseMs: number[]; totalMs: number[] };
  payloadBytes: Record<string, number>;
  explain: { name: string; plan: string; executionMs: number }[];
}
export const durabilityFacts: DurabilityFacts[] = [];

export async function groupDurability(ctx: BenchContext, b: Backend): Promise<void> {
  const q = ctx.quick;
  const sizes = [10, 1000, 10000];
  // Seed with no server running (PGlite's directory is locked by the server process).
  const seeded = new Map<number, SeededThread>();
  let replay: SeededThread;
  let background: SeededThread | null = null;
  const facts: DurabilityFacts = { backend: b.name, seedS: 0, replay: { events: 0, runs: 0, eventsPerS: [], responseMs: [], totalMs: [] }, payloadBytes: {}, explain: [] };
  durabilityFacts.push(facts);
  {
    const t = Date.now();
    const db = await b.openSeed();
    try {
      for (const items of sizes) seeded.set(items, await seedHistoryThread(db.sql, { turns: items / 2 }));
      // ~20 000 stored events: 2 222 turns × 9 + thread/started.
      replay = await seedHistoryThread(db.sql, { turns: 2222 });
      if (b.name === "postgres") await db.sql.unsafe("analyze");
      facts.explain = await explainResume(db.sql, seeded.get(10000)!.id);
    } finally {
      await db.close();
    }
    facts.seedS = (Date.now() - t) / 1000;
    ctx.log(`${b.name}: seeded threads of ${sizes.join(", ")} items + a ${replay.events}-event thread in ${facts.seedS.toFixed(1)} s`);
  }

  const measureAll = async (label: string) => {
    const srv = await ctx.spawn(b);
    const c = await StreamClient.connect(srv.url);
    try {
      if (b.name === "pglite") {
        // The server ANALYZEs the embedded database 1 s after start (src/server.ts), on its only
        // connection: watch a cheap call through that window, then measure after it.
        const t = Date.now();
        const probe: number[] = [];
        let worstAt = 0;
        while (Date.now() - t < 3000) {
          const r = await c.call("thread/read", { threadId: seeded.get(10)!.id, includeTurns: true });
          const v = ms(r.recvNs - r.sentNs);
          if (v > Math.max(0, ...probe)) worstAt = Date.now() - t;
          probe.push(v);
          await new Promise((res) => setTimeout(res, 10));
        }
        ctx.latency.push({ backend: b.name, metric: `thread/read @10 items, every 10 ms for 3 s after ready (background ANALYZE)${label}`, s: summarize(probe) });
        ctx.log(`${b.name}: first 3 s after ready${label}: thread/read max ${fmtMs(Math.max(...probe))} ms at +${worstAt} ms`);
      }
      // Warm-up: every code path once on the smallest thread.
      for (let i = 0; i < 5; i++) {
        await resumeOnce(c, seeded.get(10)!.id);
        await forkOnce(c, seeded.get(10)!.id, false);
        await c.request("thread/read", { threadId: seeded.get(10)!.id, includeTurns: true });
      }
      for (const items of label ? [10] : sizes) {
        const th = seeded.get(items)!;
        const n = q ? 5 : items >= 10000 ? 15 : 30;
        const bound = 20_000;
        const resume = await series(n, bound, async () => {
          const r = await resumeOnce(c, th.id);
          facts.payloadBytes[`thread/resume @${items}${label}`] = r.bytes;
          return r.ms;
        });
        ctx.latency.push({ backend: b.name, metric: `thread/resume (incl. turns) @${items} items${label}`, s: summarize(resume) });
        ctx.log(`${b.name} resume @${items}${label}: p50 ${fmtMs(summarize(resume).p50)} ms (profile window ${lastWindow})`);
        if (label) continue;
        const fork = await series(n, bound, async () => (await forkOnce(c, th.id, false)).ms);
        ctx.latency.push({ backend: b.name, metric: `thread/fork @${items} items`, s: summarize(fork) });
        const forkWindow = lastWindow;
        const forkEx = await series(n, bound, async () => (await forkOnce(c, th.id, true)).ms);
        ctx.latency.push({ backend: b.name, metric: `thread/fork excludeTurns @${items} items`, s: summarize(forkEx) });
        ctx.log(`${b.name} fork @${items}: p50 ${fmtMs(summarize(fork).p50)} ms (window ${forkWindow}), excludeTurns ${fmtMs(summarize(forkEx).p50)} ms (window ${lastWindow})`);
        if (items === 10000) {
          const read = await series(n, bound, async () => {
            const r = await c.call("thread/read", { threadId: th.id, includeTurns: true });
            facts.payloadBytes[`thread/read includeTurns @${items}`] = r.bytes;
            return ms(r.recvNs - r.sentNs);
          });
          ctx.latency.push({ backend: b.name, metric: `thread/read includeTurns @${items} items`, s: summarize(read) });
          ctx.log(`${b.name} read @${items}: p50 ${fmtMs(summarize(read).p50)} ms`);
        }
      }
      if (!label) {
        const runs = q ? 1 : 3;
        for (let i = 0; i < runs; i++) {
          const r = await replayOnce(c, replay.id, replay.lastSeq);
          facts.replay.runs++;
          facts.replay.events = r.events;
          facts.replay.eventsPerS.push(r.events / (r.totalMs / 1000));
          facts.replay.responseMs.push(r.responseMs);
          facts.replay.totalMs.push(r.totalMs);
          if (r.events !== replay.events) ctx.errors.push(`${b.name} replay: received ${r.events} of ${replay.events} events`);
        }
        ctx.latency.push({ backend: b.name, metric: `replay: thread/resume afterSeq=0 → last of ${replay.events} events`, s: summarize(facts.replay.totalMs) });
        ctx.log(`${b.name} replay: ${facts.replay.eventsPerS.map((x) => x.toFixed(0)).join(", ")} events/s`);
        const m = procMemory(srv.pid);
        ctx.memory.push({ backend: b.name, metric: "RSS after the durability series", rss: summarize([m.rssMB]), hwm: summarize([m.hwmMB]) });
      }
    } finally {
      await c.close();
      await srv.stop();
    }
  };
  await measureAll("");

  // The items of one thread are found by scanning every item (no index on items.thread_id):
  // resume the 10-item thread again with 100 000 more items stored (in another thread).
  if (!q) {
    const db = await b.openSeed();
    try {
      const t = Date.now();
      background = await seedHistoryThread(db.sql, { turns: 50_000, full: false, chunkTurns: 10_000 });
      if (b.name === "postgres") await db.sql.unsafe("analyze");
      ctx.log(`${b.name}: +${background.items} items in another thread in ${((Date.now() - t) / 1000).toFixed(1)} s`);
    } finally {
      await db.close();
    }
    await measureAll(` (+${background.items / 1000}k items in other threads)`);
  }
}

/** The last series' window in the monotonic clock, µs (for bench/profile-summary.mjs --from/--to). */
let lastWindow = "";

async function series(n: number, boundMs: number, fn: () => Promise<number>): Promise<number[]> {
  const out: number[] = [];
  const t = Date.now();
  const t0 = process.hrtime.bigint() / 1000n;
  for (let i = 0; i < n && Date.now() - t < boundMs; i++) out.push(await fn());
  lastWindow = `--from=${t0} --to=${process.hrtime.bigint() / 1000n}`;
  return out;
}

async function resumeOnce(c: StreamClient, threadId: string): Promise<{ ms: number; bytes: number }> {
  const r = await c.call("thread/resume", { threadId });
  await unsubscribe(c, threadId);
  return { ms: ms(r.recvNs - r.sentNs), bytes: r.bytes };
}

async function forkOnce(c: StreamClient, threadId: string, excludeTurns: boolean): Promise<{ ms: number }> {
  const r = await c.call("thread/fork", excludeTurns ? { threadId, excludeTurns: true } : { threadId });
  await unsubscribe(c, r.result.thread.id);
  return { ms: ms(r.recvNs - r.sentNs) };
}

async function unsubscribe(c: StreamClient, threadId: string): Promise<void> {
  const { status } = await c.request("thread/unsubscribe", { threadId });
  if (status !== "unsubscribed") throw new Error(`thread/unsubscribe ${threadId}: ${status}`);
}

async function replayOnce(c: StreamClient, threadId: string, lastSeq: number): Promise<{ events: number; responseMs: number; totalMs: number }> {
  let events = 0;
  let lastNs = 0n;
  let done!: () => void;
  const all = new Promise<void>((r) => (done = r));
  c.onNotification = (_m, p, recvNs) => {
    if (p?.threadId !== threadId && p?.thread?.id !== threadId) return;
    events++;
    lastNs = recvNs;
    if (p.seq >= lastSeq) done();
  };
  const r = await c.call("thread/resume", { threadId, afterSeq: 0, excludeTurns: true });
  await Promise.race([all, new Promise((res) => setTimeout(res, 60_000))]);
  c.onNotification = null;
  await unsubscribe(c, threadId);
  return { events, responseMs: ms(r.recvNs - r.sentNs), totalMs: ms(lastNs - r.sentNs) };
}

/** EXPLAIN ANALYZE of the statements thread/resume runs for a thread (src/store/turn-store.ts). */
async function explainResume(sql: import("postgres").Sql, threadId: string) {
  const shapes: [string, string][] = [
    ["turnsWithItems: items of the thread", `select * from items where thread_id = '${threadId}' order by turn_id, ordinal`],
    ["turnsWithItems: turns of the thread", `select * from turns where thread_id = '${threadId}' order by ordinal`],
    ["historyEntries: model_messages of the thread", `select kind, turn_ordinal, message from model_messages where thread_id = '${threadId}' order by ordinal`],
  ];
  const out: { name: string; plan: string; executionMs: number }[] = [];
  for (const [name, q] of shapes) {
    const rows = await sql.unsafe<Record<string, string>[]>(`explain (analyze, costs off) ${q}`);
    const lines = rows.map((r) => Object.values(r)[0]!);
    const exec = /Execution Time: ([\d.]+) ms/.exec(lines.join("\n"));
    const plan = lines
      .filter((l, i) => i === 0 || l.trim().startsWith("->"))
      .map((l) => l.trim().replace(/^->\s*/, "").replace(/\s*\(actual.*$/, ""))
      .slice(0, 3)
      .join(" > ");
    out.push({ name, plan, executionMs: exec ? Number(exec[1]) : NaN });
  }
  return out;
}

export function durabilityTables(): FactTable[] {
  if (durabilityFacts.length === 0) return [];
  const rows: string[][] = [];
  for (const f of durabilityFacts) {
    const eps = summarize(f.replay.eventsPerS);
    rows.push([f.backend, `${f.replay.events}`, `${f.replay.runs}`, eps.n ? `${eps.p50.toFixed(0)} (min ${eps.min.toFixed(0)}, max ${eps.max.toFixed(0)})` : "-", fmtMs(summarize(f.replay.responseMs).p50), fmtMs(summarize(f.replay.totalMs).p50), f.seedS.toFixed(1)]);
  }
  const out: FactTable[] = [
    {
      title: "Replay throughput (thread/resume afterSeq=0, excludeTurns; time from the request to the last replayed event)",
      columns: ["backend", "stored events", "runs", "events/s p50", "response ms p50", "last event ms p50", "seeding s"],
      rows,
    },
  ];
  const payload: string[][] = [];
  for (const f of durabilityFacts) for (const [k, v] of Object.entries(f.payloadBytes)) payload.push([f.backend, k, (v / 1024).toFixed(0)]);
  if (payload.length) out.push({ title: "Response sizes", columns: ["backend", "response", "KiB"], rows: payload });
  const ex: string[][] = [];
  for (const f of durabilityFacts) for (const e of f.explain) ex.push([f.backend, e.name, e.plan, e.executionMs.toFixed(2)]);
  if (ex.length)
    out.push({ title: "Server-side SQL of thread/resume on the 10 000-item thread (EXPLAIN ANALYZE, run once after seeding)", columns: ["backend", "statement", "plan (top nodes)", "execution ms"], rows: ex });
  return out;
}
