/**
 * Group "memory" (issue 33's table: idle RSS ≤ 60 MiB, after 20 turns ≤ 78 MiB): a fresh server
 * with the mock model, VmRSS 1 s after ready, then after 20 message-only turns of 50 chunks on one
 * thread (client still connected, 1 s idle). Repeated on fresh servers so the row is a p50, not one
 * process's luck. bench/memory-after-turns.ts is the longer, single-server version with heap
 * snapshots and a big reply.
 */
import type { Backend, BenchContext } from "../lib/context.js";
import { BenchMock, textChunks } from "../lib/mock.js";
import { procMemory } from "../lib/proc.js";
import { summarize } from "../lib/stats.js";
import { StreamClient } from "../lib/stream-client.js";
import { BENCH_CWD, nextMarker, runTurn } from "../lib/turn-driver.js";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export const MEMORY_IDLE = "memory: idle RSS 1 s after ready (mock provider configured)";
export const MEMORY_AFTER_TURNS = "memory: RSS after 20 turns on one thread (client connected, 1 s idle)";

export async function groupMemory(ctx: BenchContext, b: Backend): Promise<void> {
  const runs = ctx.quick ? 1 : 3;
  const mock = await BenchMock.start({ text: textChunks(50) }, false);
  const idle: number[] = [];
  const idleHwm: number[] = [];
  const after: number[] = [];
  const afterHwm: number[] = [];
  try {
    for (let i = 0; i < runs; i++) {
      const srv = await ctx.spawn(b, { env: mock.serverEnv() });
      try {
        await sleep(1000);
        const m0 = procMemory(srv.pid);
        idle.push(m0.rssMB);
        idleHwm.push(m0.hwmMB);
        const c = await StreamClient.connect(srv.url);
        try {
          const threadId = (await c.request("thread/start", { cwd: BENCH_CWD })).thread.id;
          for (let t = 0; t < 20; t++) {
            const r = await runTurn(c, threadId, nextMarker("mem"));
            if (r.status !== "completed") throw new Error(`memory: turn ${t} ended ${r.status}`);
          }
          await sleep(1000);
          const m1 = procMemory(srv.pid);
          after.push(m1.rssMB);
          afterHwm.push(m1.hwmMB);
          ctx.log(`${b.name} memory #${i + 1}: idle ${m0.rssMB.toFixed(1)} MiB, after 20 turns ${m1.rssMB.toFixed(1)} MiB`);
        } finally {
          await c.close();
        }
      } finally {
        await srv.stop();
      }
    }
  } finally {
    await mock.close();
  }
  ctx.memory.push({ backend: b.name, metric: MEMORY_IDLE, rss: summarize(idle), hwm: summarize(idleHwm) });
  ctx.memory.push({ backend: b.name, metric: MEMORY_AFTER_TURNS, rss: summarize(after), hwm: summarize(afterHwm) });
}
