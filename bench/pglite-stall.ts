/**
 * `npx tsx bench/pglite-stall.ts [--threads=20000] [--chunks=200] [--searches=20] [--app=DIR]`
 * (issue 33 items 3 and 5): does a slow query of the embedded database stop the streams of
 * other turns? One turn streams `--chunks` deltas, one every 20 ms, right after the server
 * starts on a PGlite home seeded with `--threads` threads of 5 turns each: the server's own
 * ANALYZE (1 s after start) and `--searches` thread/search calls from a second connection run
 * meanwhile. Prints the stream's delta latency (mock chunk written → client delta) and its
 * largest gap between two deltas, and how long the searches took. The built CLI of DIR (default
 * this tree; build it first). Only 127.0.0.1 traffic; the home is removed at the end.
 */
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import type { Sql } from "postgres";
import { BenchMock, textChunks } from "./lib/mock.js";
import { spawnServer } from "./lib/proc.js";
import { SEARCH_TRANSCRIPT, seedThreads, seedTranscripts, withSearchIndexesDropped } from "./lib/seed.js";
import { summarize } from "./lib/stats.js";
import { StreamClient } from "./lib/stream-client.js";
import { BENCH_CWD, deltaLatencies, nextMarker, runTurn } from "./lib/turn-driver.js";

const argv = process.argv.slice(2);
const opt = (name: string) => argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const ROOT = fileURLToPath(new URL("..", import.meta.url));
const APP = path.resolve(opt("app") ?? ROOT);
const THREADS = Number(opt("threads") ?? 20_000);
const CHUNKS = Number(opt("chunks") ?? 200);
const SEARCHES = Number(opt("searches") ?? 20);

async function seedHome(home: string): Promise<void> {
  const { openDatabase } = (await import(pathToFileURL(path.join(APP, "dist", "store", "database.js")).href)) as typeof import("../src/store/database.js");
  const db = await openDatabase({ dataDir: path.join(home, "pglite") });
  try {
    const sql = db.sql as Sql;
    await withSearchIndexesDropped(sql, async () => {
      await seedThreads(sql, 1, THREADS);
      await seedTranscripts(sql);
    });
  } finally {
    await db.close();
  }
}

async function main() {
  const home = await mkdtemp(path.join(os.tmpdir(), "aas-stall-"));
  const mock = await BenchMock.start({ text: textChunks(CHUNKS), chunkDelayMs: 20 });
  let srv: Awaited<ReturnType<typeof spawnServer>> | undefined;
  try {
    const t = Date.now();
    await seedHome(home);
    console.error(`seeded ${THREADS} threads, ${THREADS * 10} messages in ${((Date.now() - t) / 1000).toFixed(0)} s`);
    srv = await spawnServer({ command: [process.execPath, path.join(APP, "bin", "app-server.js")], cwd: APP, home, timeoutMs: 60_000, env: mock.serverEnv() });
    const streamer = await StreamClient.connect(srv.url);
    const searcher = await StreamClient.connect(srv.url);
    const thread = (await streamer.request("thread/start", { cwd: BENCH_CWD })).thread.id as string;
    const searchMs: number[] = [];
    const searching = (async () => {
      for (let i = 0; i < SEARCHES; i++) {
        const s0 = performance.now();
        await searcher.request("thread/search", { query: `${SEARCH_TRANSCRIPT} ${["parser", "lexer", "router", "sandbox"][i % 4]}`, limit: 20 });
        searchMs.push(performance.now() - s0);
      }
    })();
    const turn = await runTurn(streamer, thread, nextMarker("s"));
    await searching;
    const { lat } = deltaLatencies(mock, [turn]);
    let gap = 0;
    for (let i = 1; i < turn.deltas.length; i++) gap = Math.max(gap, Number(turn.deltas[i]!.recvNs - turn.deltas[i - 1]!.recvNs) / 1e6);
    const l = summarize(lat);
    const s = summarize(searchMs);
    console.log(
      `${path.basename(APP)}: ${turn.deltas.length} deltas, latency p50 ${l.p50.toFixed(2)} p99 ${l.p99.toFixed(1)} max ${l.max.toFixed(1)} ms, largest gap ${gap.toFixed(1)} ms (sent every 20); ` +
        `${searchMs.length} searches p50 ${s.p50.toFixed(1)} max ${s.max.toFixed(1)} ms; load ${os.loadavg()[0]!.toFixed(2)}`,
    );
    await streamer.close();
    await searcher.close();
  } finally {
    await srv?.stop();
    await mock.close();
    await rm(home, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
