/**
 * Drives turns against the benched server and turns what the clients and the mock saw into
 * numbers: per-turn wall time split around the model call, and per-delta forwarding latency
 * (mock wrote the chunk → client received the matching item/agentMessage/delta).
 */
import os from "node:os";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { MARK, textChunks, type BenchMock, type MockReply } from "./mock.js";
import { procCpuSeconds } from "./proc.js";

/** The working directory of bench threads: one that exists (a turn refuses a missing cwd, issue 31). */
export const BENCH_CWD = os.tmpdir();
import { pool, type StreamClient } from "./stream-client.js";

const ms = (ns: bigint) => Number(ns) / 1e6;

export interface TurnResult {
  marker: string;
  threadId: string;
  status: string;
  /** turn/start sent → its response received. */
  sentNs: bigint;
  responseNs: bigint;
  /** turn/completed received. */
  completedNs: bigint;
  deltas: { delta: string; recvNs: bigint }[];
  /** turn/completed's params as received. */
  completedParams: any;
}

let markerSeq = 0;
export const nextMarker = (prefix = "m") => `${prefix}${(markerSeq++).toString(36)}`;

export function userInput(marker: string) {
  return [{ type: "text", text: `${MARK}${marker} Answer in one short paragraph.`, text_elements: [] }];
}

/** One turn on `threadId`; resolves at turn/completed with what the client saw. */
export async function runTurn(c: StreamClient, threadId: string, marker: string, timeoutMs = 120_000): Promise<TurnResult> {
  const deltas: TurnResult["deltas"] = [];
  c.onNotification = (method, params, recvNs) => {
    if (method === "item/agentMessage/delta" && params.threadId === threadId) deltas.push({ delta: params.delta, recvNs });
  };
  const done = c.waitFor("turn/completed", (p) => p.threadId === threadId, timeoutMs);
  done.catch(() => {});
  const { sentNs, recvNs } = await c.call("turn/start", { threadId, input: userInput(marker) }, timeoutMs);
  const completed = await done;
  return { marker, threadId, status: completed.params.turn.status, sentNs, responseNs: recvNs, completedNs: completed.recvNs, deltas, completedParams: completed.params };
}

export interface TurnTiming {
  /** turn/start sent → turn/completed received. */
  totalMs: number;
  /** First → last SSE frame written by the mock (its own streaming time). */
  mockMs: number;
  /** total − mock: what the server (and the wire) added. */
  overheadMs: number;
  /** turn/start sent → the mock wrote its first frame (request reached the model). */
  toModelMs: number;
  /** The mock's last frame → turn/completed received. */
  afterModelMs: number;
  /** turn/start sent → its response. */
  responseMs: number;
}

export function turnTiming(mock: BenchMock, r: TurnResult): TurnTiming | null {
  const t = mock.trace(r.marker);
  if (!t) return null;
  const totalMs = ms(r.completedNs - r.sentNs);
  const mockMs = ms(t.lastNs - t.firstNs);
  return {
    totalMs,
    mockMs,
    overheadMs: totalMs - mockMs,
    toModelMs: ms(t.firstNs - r.sentNs),
    afterModelMs: ms(r.completedNs - t.lastNs),
    responseMs: ms(r.responseNs - r.sentNs),
  };
}

/** Chunk written by the mock → delta received, per delta; deltas that match no chunk are counted. */
export function deltaLatencies(mock: BenchMock, results: TurnResult[]): { lat: number[]; first: number[]; rest: number[]; unmatched: number } {
  const lat: number[] = [];
  const first: number[] = [];
  const rest: number[] = [];
  let unmatched = 0;
  for (const r of results) {
    const t = mock.trace(r.marker);
    r.deltas.forEach((d, i) => {
      const sent = t?.chunks.get(d.delta);
      if (sent === undefined) unmatched++;
      else {
        const v = ms(d.recvNs - sent);
        lat.push(v);
        // The first delta of an item waits for its item/started to be recorded (a transaction).
        (i === 0 ? first : rest).push(v);
      }
    });
  }
  return { lat, first, rest, unmatched };
}

export interface StreamSlot {
  client: StreamClient;
  threadId: string;
}

export interface RoundResult {
  results: TurnResult[];
  failed: number;
  errors: string[];
  lat: number[];
  /** Latency of each turn's first delta / of all later ones. */
  first: number[];
  rest: number[];
  unmatched: number;
  deltas: number;
  wallMs: number;
  /** Server CPU seconds used during the round. */
  cpuS: number;
  /** The bench process's own event-loop delay p99 during the round (client-side queueing). */
  benchLoopP99Ms: number;
  /** CPU seconds the bench process (mock + clients) used during the round. */
  benchCpuS: number;
  /** All requests reached the mock before the gates opened. */
  allConcurrent: boolean;
  /** The round in the monotonic clock, µs (for bench/profile-summary.mjs --from/--to). */
  window: string;
  /** First turn/start sent → the last model request reached the mock (starting all turns). */
  startSpreadMs: number;
  /** Gates opened → last turn/completed (the streaming part of the round). */
  streamMs: number;
}

export interface RoundOptions {
  chunks: number;
  chunkDelayMs: number;
  chunkBytes?: number;
  /** Bound for the whole round. */
  timeoutMs: number;
}

/**
 * `slots.length` turns streaming at the same time. Every reply is held by a mock gate after its
 * first two SSE events until all requests have arrived, then the gates open spread over one
 * chunk interval, so the streams run concurrently and do not write their chunks in lock-step.
 */
export async function streamRound(mock: BenchMock, serverPid: number, slots: StreamSlot[], o: RoundOptions): Promise<RoundResult> {
  const n = slots.length;
  const opens: (() => void)[] = [];
  const steps: MockReply[] = slots.map(() => {
    let open!: () => void;
    const wait = new Promise<void>((r) => (open = r));
    opens.push(open);
    return { text: textChunks(o.chunks, o.chunkBytes), chunkDelayMs: o.chunkDelayMs, gate: { afterEvents: 2, wait } };
  });
  const before = mock.requestCount;
  mock.enqueue(...steps);
  const eld = monitorEventLoopDelay({ resolution: 1 });
  eld.enable();
  const cpu0 = procCpuSeconds(serverPid);
  const benchCpu0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  const errors: string[] = [];
  let failed = 0;
  const deadline = Date.now() + o.timeoutMs;
  const turns = slots.map((s) =>
    runTurn(s.client, s.threadId, nextMarker("s"), o.timeoutMs).catch((err) => {
      failed++;
      if (errors.length < 5) errors.push((err as Error).message);
      return null;
    }),
  );
  // Open the gates once every request is in (or at the bound), staggered over one chunk interval.
  let allConcurrent = true;
  while (mock.requestCount - before < n - failed && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
  if (mock.requestCount - before < n) allConcurrent = false;
  const gatesOpenNs = process.hrtime.bigint();
  const spread = Math.max(1, o.chunkDelayMs);
  const batches = Math.min(n, spread);
  for (let b = 0; b < batches; b++) {
    setTimeout(() => {
      for (let j = b; j < n; j += batches) opens[j]!();
    }, Math.floor((b * spread) / batches));
  }
  const settled = await Promise.all(turns);
  const t1 = process.hrtime.bigint();
  const wallMs = ms(t1 - t0);
  const cpuS = procCpuSeconds(serverPid) - cpu0;
  const benchCpu = process.cpuUsage(benchCpu0);
  eld.disable();
  const results = settled.filter((r): r is TurnResult => r !== null);
  for (const r of results) if (r.status !== "completed") failed++;
  const { lat, first, rest, unmatched } = deltaLatencies(mock, results);
  let lastRequestNs = t0;
  let lastDoneNs = gatesOpenNs;
  for (const r of results) {
    const tr = mock.trace(r.marker);
    if (tr && tr.firstNs > lastRequestNs) lastRequestNs = tr.firstNs;
    if (r.completedNs > lastDoneNs) lastDoneNs = r.completedNs;
  }
  return {
    results,
    failed,
    errors,
    lat,
    first,
    rest,
    unmatched,
    deltas: results.reduce((a, r) => a + r.deltas.length, 0),
    wallMs,
    cpuS,
    benchLoopP99Ms: eld.percentile(99) / 1e6,
    benchCpuS: (benchCpu.user + benchCpu.system) / 1e6,
    allConcurrent,
    window: `--from=${t0 / 1000n} --to=${t1 / 1000n}`,
    startSpreadMs: ms(lastRequestNs - t0),
    streamMs: ms(lastDoneNs - gatesOpenNs),
  };
}

/** Starts one thread per client (the client is subscribed to it, so it stays loaded). */
export async function threadsFor(clients: StreamClient[], concurrency = 25, params: object = { cwd: BENCH_CWD }): Promise<StreamSlot[]> {
  return pool(clients, concurrency, async (client) => ({ client, threadId: (await client.request("thread/start", params)).thread.id as string }));
}
