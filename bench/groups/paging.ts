/**
 * Group "paging" (issue 17: paged history as Codex 0.171 has it): threads with 10, 1 000 and
 * 10 000 stored items (message-only turns, 2 items each, seeded with SQL), then against the real
 * server (child process) the calls a client makes instead of downloading a whole thread:
 * thread/read without turns, thread/turns/list (first page and the page after it),
 * thread/items/list, thread/resume with excludeTurns or initialTurnsPage, thread/fork (default
 * and excludeTurns). thread/read includeTurns is measured too, as the baseline paging replaces.
 * Every resume/fork starts from an unloaded thread (the client unsubscribes after each call).
 * Target (issue 17): ≤ 20 ms p50 at 10 000 items for the paged/excludeTurns calls; default fork
 * O(1) in the history (@10 000 ≤ 2 × @10).
 */
import type { Backend, BenchContext } from "../lib/context.js";
import { seedHistoryThread, type SeededThread } from "../lib/seed-history.js";
import { fmtMs, summarize } from "../lib/stats.js";
import { StreamClient } from "../lib/stream-client.js";

const ms = (ns: bigint) => Number(ns) / 1e6;
export const PAGING_SIZES = [10, 1000, 10000];
/** Metric names (the verdicts in bench/run.ts look them up by these prefixes). */
export const PAGED_CALLS = [
  "thread/read (no turns)",
  "thread/turns/list limit 25 (first page)",
  "thread/turns/list limit 25 (second page)",
  "thread/items/list limit 100",
  "thread/resume excludeTurns",
  "thread/resume initialTurnsPage limit 25",
  "thread/fork excludeTurns",
  "thread/fork (default)",
] as const;

export async function groupPaging(ctx: BenchContext, b: Backend): Promise<void> {
  const seeded = new Map<number, SeededThread>();
  {
    const t = Date.now();
    const db = await b.openSeed();
    try {
      for (const items of PAGING_SIZES) seeded.set(items, await seedHistoryThread(db.sql, { turns: items / 2 }));
      if (b.name === "postgres") await db.sql.unsafe("analyze");
    } finally {
      await db.close();
    }
    ctx.log(`${b.name} paging: seeded threads of ${PAGING_SIZES.join(", ")} items in ${((Date.now() - t) / 1000).toFixed(1)} s`);
  }
  const srv = await ctx.spawn(b);
  const c = await StreamClient.connect(srv.url);
  try {
    // PGlite: the server ANALYZEs 1 s after start on its only connection; let that pass.
    if (b.name === "pglite") await new Promise((r) => setTimeout(r, 3000));
    const timed = async (method: string, params: Record<string, unknown>) => {
      const r = await c.call(method, params);
      return { ms: ms(r.recvNs - r.sentNs), result: r.result, bytes: r.bytes };
    };
    const unsubscribe = async (threadId: string) => {
      const { status } = await c.request("thread/unsubscribe", { threadId });
      if (status !== "unsubscribed") throw new Error(`thread/unsubscribe ${threadId}: ${status}`);
    };
    const calls: Record<(typeof PAGED_CALLS)[number], (id: string) => Promise<number>> = {
      "thread/read (no turns)": async (id) => (await timed("thread/read", { threadId: id })).ms,
      "thread/turns/list limit 25 (first page)": async (id) => (await timed("thread/turns/list", { threadId: id, limit: 25 })).ms,
      "thread/turns/list limit 25 (second page)": async (id) => {
        const first = await c.request("thread/turns/list", { threadId: id, limit: 25 });
        if (!first.nextCursor) return (await timed("thread/turns/list", { threadId: id, limit: 25 })).ms;
        return (await timed("thread/turns/list", { threadId: id, limit: 25, cursor: first.nextCursor })).ms;
      },
      "thread/items/list limit 100": async (id) => (await timed("thread/items/list", { threadId: id, limit: 100 })).ms,
      "thread/resume excludeTurns": async (id) => {
        const r = await timed("thread/resume", { threadId: id, excludeTurns: true });
        await unsubscribe(id);
        return r.ms;
      },
      "thread/resume initialTurnsPage limit 25": async (id) => {
        const r = await timed("thread/resume", { threadId: id, initialTurnsPage: { limit: 25 } });
        const turns = [...seeded.values()].find((s) => s.id === id)!.turns;
        if (r.result.initialTurnsPage.data.length !== Math.min(25, turns)) throw new Error("initialTurnsPage has the wrong size");
        await unsubscribe(id);
        return r.ms;
      },
      "thread/fork excludeTurns": async (id) => {
        const r = await timed("thread/fork", { threadId: id, excludeTurns: true });
        await unsubscribe(r.result.thread.id);
        return r.ms;
      },
      "thread/fork (default)": async (id) => {
        const r = await timed("thread/fork", { threadId: id });
        await unsubscribe(r.result.thread.id);
        return r.ms;
      },
    };
    // Warm-up: every call once on the smallest thread.
    for (let i = 0; i < 5; i++) for (const fn of Object.values(calls)) await fn(seeded.get(10)!.id);
    const n = ctx.quick ? 5 : 30;
    for (const items of PAGING_SIZES) {
      const id = seeded.get(items)!.id;
      for (const name of PAGED_CALLS) {
        const out: number[] = [];
        const t = Date.now();
        for (let i = 0; i < n && Date.now() - t < 20_000; i++) out.push(await calls[name](id));
        ctx.latency.push({ backend: b.name, metric: `paging: ${name} @${items} items`, s: summarize(out) });
        ctx.log(`${b.name} ${name} @${items}: p50 ${fmtMs(summarize(out).p50)} ms`);
      }
      // The baseline paging replaces: the whole thread in one response.
      const full: number[] = [];
      let bytes = 0;
      const t = Date.now();
      for (let i = 0; i < (items >= 10000 ? Math.min(n, 10) : n) && Date.now() - t < 20_000; i++) {
        const r = await timed("thread/read", { threadId: id, includeTurns: true });
        bytes = r.bytes;
        full.push(r.ms);
      }
      ctx.latency.push({ backend: b.name, metric: `paging: baseline thread/read includeTurns @${items} items (${(bytes / 1024).toFixed(0)} KiB)`, s: summarize(full) });
      ctx.log(`${b.name} read includeTurns @${items}: p50 ${fmtMs(summarize(full).p50)} ms, ${(bytes / 1024).toFixed(0)} KiB`);
    }
  } finally {
    await c.close();
    await srv.stop();
  }
}
