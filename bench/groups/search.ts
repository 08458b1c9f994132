/**
 * Group "search" (issue 33 item 6: search at scale): thread/search and thread/list searchTerm at
 * 100 000 and 1 000 000 stored messages, against the real server (child process).
 *
 * Data: threads seeded with set-based SQL (bench/lib/seed.ts seedThreads: a year of activity,
 * 1 in 20 archived), each with a transcript of 5 turns = 10 messages (seedTranscripts): 10 000
 * threads = 100 000 messages, topped up to 100 000 threads = 1 000 000 messages. The words: every
 * message names one of 12 modules and one of 8 faults ("deadlock": 1 message in 8, in about half
 * of the threads), every agent message says "buffer" (1 message in 2); "kumquat" is in the first
 * message of 1 thread in 100 (the rare word); "ticketN" in one thread only. The search GIN indexes
 * are dropped while seeding and built again afterwards (withSearchIndexesDropped; the same
 * definitions; a built index is more compact than one grown by inserts, and seeding 1M messages on
 * PGlite takes minutes instead of ~30).
 *
 * Measured per size on a fresh server: one call to check the answer, then 10 warm-up calls and up
 * to 200 calls or 5 s; p50/p99 of the warmed-up calls. Also the CPU the calls cost (the server
 * process plus, on Postgres, its database backends), which the load of other work on the machine
 * does not inflate as much as wall-clock latency. Target (issue 33): thread/search on a frequent
 * word ≤ 20 ms p50 at 1M messages, on both backends.
 */
import { readFileSync } from "node:fs";
import type { Backend, BenchContext } from "../lib/context.js";
import { procCpuSeconds } from "../lib/proc.js";
import { oneThreadTerm, SEARCH_TRANSCRIPT, seedThreads, seedTranscripts, TRANSCRIPT_TURNS, withSearchIndexesDropped } from "../lib/seed.js";
import { fmtMs, summarize } from "../lib/stats.js";
import { StreamClient } from "../lib/stream-client.js";

const ms = (ns: bigint) => Number(ns) / 1e6;
/** Stored threads per size (× 10 messages each). */
export const SEARCH_SIZES = [10_000, 100_000];
const label = (threads: number) => (threads * TRANSCRIPT_TURNS * 2 >= 1_000_000 ? `${(threads * TRANSCRIPT_TURNS * 2) / 1_000_000}M` : `${(threads * TRANSCRIPT_TURNS * 2) / 1000}k`);
/** The word of the target row: in 1 message in 8 (seedTranscripts' faults). */
export const FREQUENT_WORD = "deadlock";

/** CPU seconds of a Postgres backend (utime + stime of /proc/<pid>/stat; the bench runs on the database's machine). */
function backendCpuSeconds(pids: number[]): number {
  let s = 0;
  for (const pid of pids) {
    try {
      const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
      s += (Number(f[11]) + Number(f[12])) / 100;
    } catch {
      /* not on this machine (a remote database): counted as 0 */
    }
  }
  return s;
}

export async function groupSearch(ctx: BenchContext, b: Backend): Promise<void> {
  let seeded = 0;
  const cpuRows: string[][] = [];
  for (const threads of SEARCH_SIZES) {
    let one = "";
    {
      const t = Date.now();
      const db = await b.openSeed();
      try {
        if (seeded === 0) await db.sql.unsafe("truncate threads cascade");
        // The same rows and indexes as inserting with the indexes in place; the GIN indexes built once.
        await withSearchIndexesDropped(db.sql, async () => {
          await seedThreads(db.sql, seeded + 1, threads);
          await seedTranscripts(db.sql);
        });
        seeded = threads;
        one = await oneThreadTerm(db.sql);
        // Postgres' autovacuum analyzes a bulk load within a minute; the server ANALYZEs PGlite.
        if (b.name === "postgres") await db.sql.unsafe("analyze threads, turns, items");
      } finally {
        await db.close();
      }
      ctx.log(`${b.name} search: seeded ${threads} threads, ${label(threads)} messages in ${((Date.now() - t) / 1000).toFixed(0)} s`);
    }
    const srv = await ctx.spawn(b);
    const c = await StreamClient.connect(srv.url);
    const closers: (() => Promise<void> | undefined)[] = [];
    try {
      // PGlite: the server ANALYZEs grown tables shortly after start on its only connection; let that pass.
      if (b.name === "pglite") await new Promise((r) => setTimeout(r, 5000));
      // Postgres: the server's database backends (their CPU is the search's too), looked up per case.
      const pg = b.name === "postgres" ? await b.openSeed() : null;
      const backends = async () =>
        pg ? (await pg.sql<{ pid: number }[]>`select pid from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()`).map((r) => r.pid) : [];
      closers.push(() => pg?.close());
      const at = label(threads);
      type Params = Record<string, unknown> | ((call: number) => Record<string, unknown>);
      const cases: [string, string, Params][] = [
        [`thread/search frequent word`, "thread/search", { query: FREQUENT_WORD }],
        // The server keeps the planner's estimate of a query for a while (src/store/thread-search.ts):
        // a query it has not seen, with the same matches (a word nobody wrote, excluded).
        [`thread/search frequent word, a new query each call`, "thread/search", (call) => ({ query: `${FREQUENT_WORD} -zz${call}x${process.pid}` })],
        [`thread/search rare word`, "thread/search", { query: SEARCH_TRANSCRIPT }],
        [`thread/search word of one thread`, "thread/search", { query: one }],
        [`thread/search word in every other message`, "thread/search", { query: "buffer" }],
        [`thread/search "parser deadlock -timeout"`, "thread/search", { query: "parser deadlock -timeout" }],
        [`thread/search phrase "a deadlock when"`, "thread/search", { query: `"a ${FREQUENT_WORD} when"` }],
        [`thread/search frequent word, archived`, "thread/search", { query: FREQUENT_WORD, archived: true }],
        [`thread/search no match`, "thread/search", { query: "zz-no-such-word" }],
        [`thread/list searchTerm frequent word`, "thread/list", { searchTerm: FREQUENT_WORD }],
        [`thread/list searchTerm rare word`, "thread/list", { searchTerm: SEARCH_TRANSCRIPT }],
      ];
      // The page after the first: the cursor of the first page, as a client pages.
      const first = await c.request("thread/search", { query: FREQUENT_WORD });
      if (first.data.length !== 25 || !first.nextCursor) throw new Error(`thread/search "${FREQUENT_WORD}" returned ${first.data.length} rows`);
      cases.splice(1, 0, [`thread/search frequent word, second page`, "thread/search", { query: FREQUENT_WORD, cursor: first.nextCursor }]);
      let calls = 0;
      for (const [name, method, given] of cases) {
        const params = () => (typeof given === "function" ? given(calls++) : given);
        const once = await c.request(method, params());
        if (method === "thread/search" && name !== "thread/search no match" && (once.data.length === 0 || !once.data[0].snippet))
          throw new Error(`${name}: ${once.data.length} rows, snippet ${JSON.stringify(once.data[0]?.snippet)}`);
        for (let i = 0; i < 10; i++) await c.call(method, params());
        const out: number[] = [];
        const pids = await backends();
        const cpu0 = procCpuSeconds(srv.pid) + backendCpuSeconds(pids);
        const t = Date.now();
        for (let i = 0; i < (ctx.quick ? 20 : 200) && Date.now() - t < 5_000; i++) {
          const r = await c.call(method, params());
          out.push(ms(r.recvNs - r.sentNs));
        }
        const cpuMs = ((procCpuSeconds(srv.pid) + backendCpuSeconds(pids) - cpu0) * 1000) / out.length;
        const s = summarize(out);
        ctx.latency.push({ backend: b.name, metric: `search: ${name} @${at} messages`, s });
        cpuRows.push([b.name, `${name} @${at} messages`, String(once.data.length), fmtMs(s.p50), fmtMs(cpuMs)]);
        ctx.log(`${b.name} search: ${name} @${at}: p50 ${fmtMs(s.p50)} ms, CPU ${fmtMs(cpuMs)} ms a call (${once.data.length} rows)`);
      }
    } finally {
      for (const close of closers) await close();
      await c.close();
      await srv.stop();
    }
  }
  ctx.tables.push({
    title: `search: CPU per call (${b.name}; server process${b.name === "postgres" ? " + its Postgres backends" : ", PGlite inside it"})`,
    columns: ["backend", "case", "rows", "p50 ms", "CPU ms a call"],
    rows: cpuRows,
  });
}
