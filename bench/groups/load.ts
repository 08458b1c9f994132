/**
 * Group "load" (issue "Self-hosting and hardening"): 500 connections each streaming a turn from
 * the mock at the same time, while one more client that stopped reading (its socket paused) is
 * subscribed to a busy thread. The busy thread is driven by a normal client and runs large turns
 * back to back through the server's `anthropic` provider pointed at a second mock instance (its
 * own step queue, so its replies never mix with the 500 streams' `openai` replies).
 *
 * Recorded: delta latency of the 500 normal clients, server RSS (before, peak = VmHWM, after),
 * server CPU (utime + stime from /proc), and from GET /metrics the coalesced deltas, overflow
 * closes and buffered bytes; and the close code the slow client gets once it reads again.
 */
import { writeFileSync } from "node:fs";
import type { Backend, BenchContext, FactTable } from "../lib/context.js";
import { BenchMock, textChunks } from "../lib/mock.js";
import { httpGetText, metricValue, procCpuSeconds, procMemory } from "../lib/proc.js";
import { fmtMs, summarize } from "../lib/stats.js";
import { connectMany, pool, StreamClient } from "../lib/stream-client.js";
import { BENCH_CWD, nextMarker, runTurn, streamRound, threadsFor } from "../lib/turn-driver.js";
import { LOAD_LIMITS, STREAM } from "./turns.js";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface LoadFacts {
  backend: string;
  streams: number;
  turns: number;
  failed: number;
  deltas: number;
  unmatched: number;
  roundS: number;
  benchLoopP99Ms: number;
  rssBeforeMB: number;
  rssPeakMB: number;
  rssAfterRoundMB: number;
  rssAfterMB: number;
  cpuS: number;
  wallS: number;
  busyTurns: number;
  busyBytesMB: number;
  coalesced: number;
  overflowCloses: number;
  maxBufferedMB: number;
  bufferedAfterMB: number;
  slowCloseCode: string;
  timeToCloseS: number | null;
  outboundMaxMB: number;
  peakReset: boolean;
  startSpreadS: number;
}
export const loadFacts: LoadFacts[] = [];

/**
 * The busy thread: one long turn streaming 4 KiB text chunks about every millisecond (up to
 * 15 000 of them, ~60 MiB) — e.g. a model writing a very large file — interrupted once the slow
 * client has been closed. One long turn, not many turns: the thread's context (re-sent to the
 * model every turn) would otherwise grow by what was streamed and dominate the server's work.
 */
const BUSY_REPLY = { text: textChunks(15_000, 4096), chunkDelayMs: 1 };

/** Resets VmHWM (peak RSS) of a process (Linux: echo 5 > /proc/PID/clear_refs; needs permission). */
function resetPeak(pid: number): boolean {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, "5");
    return true;
  } catch {
    return false;
  }
}

export async function groupLoad(ctx: BenchContext, b: Backend): Promise<void> {
  const nStreams = ctx.quick ? 100 : 500;
  const mock = await BenchMock.start();
  const busyMock = await BenchMock.start(BUSY_REPLY, false);
  // The default 32 MiB outbound cap.
  const outboundMax = 32 * 1024 * 1024;
  const srv = await ctx.spawn(b, { env: { ...mock.serverEnv(), ...busyMock.anthropicEnv(), ...LOAD_LIMITS } });
  const metricsUrl = `${srv.httpUrl}/metrics`;
  const metrics = async () => {
    const text = await httpGetText(metricsUrl);
    return {
      coalesced: metricValue(text, "app_server_coalesced_deltas_total"),
      overflow: metricValue(text, "app_server_outbound_overflow_closes_total"),
      buffered: metricValue(text, "app_server_outbound_buffered_bytes"),
    };
  };
  let clients: StreamClient[] = [];
  const extra: StreamClient[] = [];
  try {
    const t0 = Date.now();
    clients = await connectMany(srv.url, nStreams);
    const slots = await threadsFor(clients);
    ctx.log(`${b.name} load: ${nStreams} connections with a thread each in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    await streamRound(mock, srv.pid, slots.slice(0, 20), { ...STREAM, timeoutMs: 60_000 }); // warm-up

    // The busy thread, its driver (a normal reader), and the slow client subscribed to it.
    const driver = await StreamClient.connect(srv.url, "busy-driver");
    const slow = await StreamClient.connect(srv.url, "slow-reader");
    extra.push(driver, slow);
    const busyThread = (await driver.request("thread/start", { cwd: BENCH_CWD, modelProvider: "anthropic", model: "mock-model" })).thread.id;
    busyMock.enqueue({ text: "warm" });
    await runTurn(driver, busyThread, nextMarker("b")); // warm-up: loads the anthropic SDK
    await slow.request("thread/resume", { threadId: busyThread });
    await sleep(700);
    const peakReset = resetPeak(srv.pid);
    const rssBefore = procMemory(srv.pid).rssMB;
    const m0 = await metrics();
    const cpu0 = procCpuSeconds(srv.pid);
    const tStart = Date.now();
    slow.pauseReading();

    // The busy turn: count what the driver receives (not kept).
    let busyBytes = 0;
    driver.onNotification = (method, params) => {
      if (method === "item/agentMessage/delta") busyBytes += params.delta.length;
    };
    const busyDone = driver.waitFor("turn/completed", (p) => p.threadId === busyThread, 300_000);
    busyDone.catch(() => {});
    const busyTurnId: string = (await driver.request("turn/start", { threadId: busyThread, input: [{ type: "text", text: "Write the big file.", text_elements: [] }] })).turn.id;

    // Poll /metrics for the slow client's backlog and the overflow close.
    let maxBuffered = 0;
    let stopPoll = false;
    let overflowSeenAt: number | null = null;
    const poller = (async () => {
      while (!stopPoll) {
        const m = await metrics().catch(() => null);
        if (m) {
          maxBuffered = Math.max(maxBuffered, m.buffered);
          if (m.overflow > m0.overflow && overflowSeenAt === null) overflowSeenAt = Date.now();
        }
        await sleep(200);
      }
    })();

    // Let the backlog build (≥ 2 MiB queued or 10 s), then run the streams through it.
    const buildDeadline = Date.now() + 10_000;
    while (Date.now() < buildDeadline && maxBuffered < 2 * 1024 * 1024 && overflowSeenAt === null) await sleep(100);
    ctx.log(`${b.name} load: slow client backlog ${(maxBuffered / 1048576).toFixed(1)} MiB after ${((Date.now() - tStart) / 1000).toFixed(1)} s; starting ${nStreams} streams`);
    const round = await streamRound(mock, srv.pid, slots, { ...STREAM, timeoutMs: 120_000 });
    const rssAfterRound = procMemory(srv.pid).rssMB;
    ctx.log(`${b.name} load round: profile window ${round.window}`);
    for (const e of round.errors) ctx.errors.push(`${b.name} load: ${e}`);

    // Keep the busy turn going until the overflow close (bounded), then interrupt it.
    const closeDeadline = Date.now() + (ctx.quick ? 30_000 : 45_000);
    while (Date.now() < closeDeadline && overflowSeenAt === null) await sleep(100);
    stopPoll = true;
    await poller;
    const cpuS = procCpuSeconds(srv.pid) - cpu0;
    const wallS = (Date.now() - tStart) / 1000;
    const mid = await metrics();
    const peak = procMemory(srv.pid).hwmMB;
    const busyMB = busyBytes / 1048576;
    await driver.request("turn/interrupt", { threadId: busyThread, turnId: busyTurnId });
    await Promise.race([busyDone, sleep(60_000)]);
    driver.onNotification = null;

    // The slow client reads again: it gets what was buffered, then the close frame.
    slow.resumeReading();
    const closeInfo = await Promise.race([slow.closed, sleep(15_000).then(() => null)]);
    const slowCloseCode = closeInfo ? `${closeInfo.code}${closeInfo.reason ? ` ("${closeInfo.reason}")` : ""}` : "still open after 15 s of reading";

    // Everyone leaves; RSS once the server is idle again.
    await pool(clients, 50, (c) => c.close());
    for (const c of extra) await c.close();
    clients = [];
    await sleep(2000);
    const after = procMemory(srv.pid).rssMB;
    const end = await metrics();

    const s = summarize(round.lat);
    ctx.latency.push({ backend: b.name, metric: `load: delta latency, ${nStreams} streams + 1 slow client on a busy thread`, s });
    loadFacts.push({
      backend: b.name,
      streams: nStreams,
      turns: round.results.length,
      failed: round.failed,
      deltas: round.deltas,
      unmatched: round.unmatched,
      roundS: round.wallMs / 1000,
      benchLoopP99Ms: round.benchLoopP99Ms,
      rssBeforeMB: rssBefore,
      rssPeakMB: peak,
      rssAfterRoundMB: rssAfterRound,
      rssAfterMB: after,
      cpuS,
      wallS,
      busyTurns: 1,
      busyBytesMB: busyMB,
      coalesced: mid.coalesced - m0.coalesced,
      overflowCloses: end.overflow - m0.overflow,
      maxBufferedMB: maxBuffered / 1048576,
      bufferedAfterMB: end.buffered / 1048576,
      slowCloseCode,
      timeToCloseS: overflowSeenAt === null ? null : (overflowSeenAt - tStart) / 1000,
      outboundMaxMB: outboundMax / 1048576,
      peakReset,
      startSpreadS: round.startSpreadMs / 1000,
    });
    ctx.memory.push({ backend: b.name, metric: `load: RSS before / after the round, peak (VmHWM${peakReset ? " since the phase began" : ""})`, rss: summarize([rssBefore, rssAfterRound]), hwm: summarize([peak]) });
    ctx.memory.push({ backend: b.name, metric: "load: RSS 2 s after all clients left", rss: summarize([after]), hwm: summarize([procMemory(srv.pid).hwmMB]) });
    ctx.log(
      `${b.name} load: delta p50 ${fmtMs(s.p50)} p99 ${fmtMs(s.p99)} ms; busy ${busyMB.toFixed(0)} MiB; coalesced ${mid.coalesced - m0.coalesced}; overflow closes ${end.overflow - m0.overflow}; slow client ${slowCloseCode}; CPU ${cpuS.toFixed(1)} s / ${wallS.toFixed(1)} s; RSS ${rssBefore.toFixed(0)} → peak ${peak.toFixed(0)} → ${after.toFixed(0)} MiB`,
    );
  } finally {
    await pool(clients, 50, (c) => c.close()).catch(() => {});
    for (const c of extra) c.terminate();
    await srv.stop();
    await mock.close();
    await busyMock.close();
  }
}

export function loadTables(): FactTable[] {
  if (loadFacts.length === 0) return [];
  const rows: string[][] = [];
  for (const f of loadFacts) {
    rows.push(
      [
        f.backend,
        `${f.turns - f.failed}/${f.streams} turns, ${f.deltas} deltas${f.unmatched ? ` (${f.unmatched} merged/unmatched)` : ""} in ${f.roundS.toFixed(1)} s (${f.startSpreadS.toFixed(1)} s to start the turns)`,
        `${f.rssBeforeMB.toFixed(0)} / ${f.rssPeakMB.toFixed(0)} / ${f.rssAfterRoundMB.toFixed(0)} / ${f.rssAfterMB.toFixed(0)}`,
        `${f.cpuS.toFixed(1)} s in ${f.wallS.toFixed(1)} s (${((f.cpuS / f.wallS) * 100).toFixed(0)}% of a core)`,
        `${f.busyBytesMB.toFixed(0)} MiB of deltas to its driver`,
        `${f.maxBufferedMB.toFixed(1)} MiB max; ${f.bufferedAfterMB.toFixed(1)} after`,
        `${f.coalesced}`,
        `${f.overflowCloses}${f.timeToCloseS !== null ? ` (after ${f.timeToCloseS.toFixed(1)} s)` : ""}`,
        f.slowCloseCode,
      ],
    );
  }
  return [
    {
      title: `Load: ${loadFacts.map((f) => f.streams).join("/")} streaming connections + 1 slow client (socket paused) subscribed to a busy thread`,
      columns: ["backend", "normal clients", "server RSS MiB before / peak / after round / idle after", "server CPU (from the pause to the close)", "busy thread", "outbound buffered (/metrics)", "coalesced deltas", "overflow closes", "slow client close"],
      rows,
      notes: [
        "Busy thread: one turn through the `anthropic` provider (a second mock instance) streaming 4 KiB chunks about every millisecond, interrupted after the slow client was closed; its driver reads normally. The slow client subscribed with thread/resume and then paused its socket. Peak RSS = VmHWM, reset when the slow client paused, read before the busy turn was interrupted; \"idle after\" comes after the interrupt, which stores and sends the busy turn's partial agentMessage (tens of MiB of text in one item).",
        `Outbound limits: the defaults (queue above 1 MiB in the socket, close above ${loadFacts[0]!.outboundMaxMB} MiB queued). Server started with APP_SERVER_MAX_CONNECTIONS=${LOAD_LIMITS.APP_SERVER_MAX_CONNECTIONS}, APP_SERVER_MAX_CONCURRENT_TURNS=${LOAD_LIMITS.APP_SERVER_MAX_CONCURRENT_TURNS}.`,
        `Bench-side event-loop delay p99 during the round: ${loadFacts.map((f) => `${f.backend} ${fmtMs(f.benchLoopP99Ms)} ms`).join(", ")} (the clients and the mock share the bench process: this is part of every latency sample).`,
      ],
    },
  ];
}
