/**
 * Issue 16, item 2: what would forwarding every delta from a worker thread (owning the provider
 * stream) to the thread owning the client sockets cost? A micro-benchmark of node:worker_threads
 * postMessage with a delta notification's shape, against what the server does per delta anyway
 * (JSON.stringify of the notification).
 *
 *  1. CPU per delta (both threads, process.cpuUsage covers all) sending 200 000 deltas one
 *     postMessage each, and batched 50 per postMessage.
 *  2. Latency (send → receive, monotonic clock shared by the threads) at 25 000 deltas/s offered
 *     (25 every millisecond), the 500-stream rate.
 *
 * Run: npx tsx bench/worker-threads-delta.ts
 */
import os from "node:os";
import { Worker } from "node:worker_threads";
import { fmtMs, summarize } from "./lib/stats.js";

const N = 200_000;
const delta = (i: number) => ({
  method: "item/agentMessage/delta",
  params: { threadId: "019a1b2c-3d4e-7f60-8a9b-0c1d2e3f4a5b", turnId: "019a1b2c-3d4e-7f60-8a9b-0c1d2e3f4a5c", itemId: "msg_019a1b2c3d4e", delta: "hello ", seq: i },
});

// The worker's code as a string (eval: tsx's loader does not reach worker threads).
const WORKER = `
const { parentPort, workerData } = require("node:worker_threads");
const N = ${N};
const delta = ${delta.toString()};
const { mode } = workerData;
if (mode === "single") for (let i = 0; i < N; i++) parentPort.postMessage(delta(i));
if (mode === "batch") for (let i = 0; i < N; i += 50) parentPort.postMessage(Array.from({ length: 50 }, (_, k) => delta(i + k)));
if (mode === "paced") {
  let i = 0;
  const timer = setInterval(() => {
    for (let k = 0; k < 25; k++) parentPort.postMessage({ ...delta(i++), sentNs: process.hrtime.bigint() });
    if (i >= 50000) clearInterval(timer);
  }, 1);
}
`;

{
  const run = (mode: "single" | "batch" | "paced") =>
    new Promise<{ cpuUsPerDelta: number; wallMs: number; lat: number[] }>((resolve, reject) => {
      const total = mode === "paced" ? 50_000 : N;
      const cpu0 = process.cpuUsage();
      const t0 = performance.now();
      const lat: number[] = [];
      let got = 0;
      const w = new Worker(WORKER, { eval: true, workerData: { mode } });
      w.on("error", reject);
      w.on("message", (m: any) => {
        if (Array.isArray(m)) got += m.length;
        else {
          got++;
          if (m.sentNs) lat.push(Number(process.hrtime.bigint() - m.sentNs) / 1e6);
        }
        if (got === total) {
          const cpu = process.cpuUsage(cpu0);
          const wallMs = performance.now() - t0;
          void w.terminate();
          resolve({ cpuUsPerDelta: (cpu.user + cpu.system) / total, wallMs, lat });
        }
      });
    });

  // What the server pays per delta regardless: serialising the notification once.
  const s0 = process.cpuUsage();
  let bytes = 0;
  for (let i = 0; i < N; i++) bytes += JSON.stringify({ jsonrpc: "2.0", ...delta(i) }).length;
  const s = process.cpuUsage(s0);
  console.log(`### worker_threads postMessage per delta (${os.cpus().length} × ${os.cpus()[0]?.model}, Node ${process.version})\n`);
  console.log("| path | deltas | CPU µs per delta (both threads) | wall ms | latency p50 / p99 ms |");
  console.log("|---|---|---|---|---|");
  console.log(`| JSON.stringify of the notification (baseline, ${(bytes / N).toFixed(0)} B) | ${N} | ${((s.user + s.system) / N).toFixed(2)} | – | – |`);
  const warm = await run("single"); // JIT warm-up
  void warm;
  const single = await run("single");
  console.log(`| postMessage, one delta each | ${N} | ${single.cpuUsPerDelta.toFixed(2)} | ${single.wallMs.toFixed(0)} | – |`);
  const batch = await run("batch");
  console.log(`| postMessage, 50 deltas per message | ${N} | ${batch.cpuUsPerDelta.toFixed(2)} | ${batch.wallMs.toFixed(0)} | – |`);
  const paced = await run("paced");
  const l = summarize(paced.lat);
  console.log(`| postMessage at 25 000 deltas/s (25 per ms) | ${paced.lat.length} | ${paced.cpuUsPerDelta.toFixed(2)} (incl. idle waits) | ${paced.wallMs.toFixed(0)} | ${fmtMs(l.p50)} / ${fmtMs(l.p99)} |`);
}
