/**
 * Group "soak" (issue 33 item 5): does the server slow down the longer it works? One server, one
 * connection, a steady sequential loop for `minutes` minutes:
 *
 *   thread/start → turn/start (the mock model asks for a shell command, then answers) →
 *   turn/start (plain text) → thread/unsubscribe → thread/fork (of the now unloaded thread;
 *   the fork is unsubscribed at once) → thread/resume (loads it again) → thread/read includeTurns
 *   → thread/list (first page) → thread/unsubscribe
 *
 * Each operation's p50 per minute of the loop, plus the server's CPU per loop (utime + stime from
 * /proc) and RSS at the end of each minute, so that drift shows as a ratio (last full minute vs
 * minute 0 of the same run) rather than as a comparison across runs on a shared machine.
 *
 * The data grows as in real use (2 threads, 2 turns per loop), so a slowdown may be data size or
 * process state: the ratio alone does not tell; `--soak-restart` (one more minute on a fresh
 * process, same home) does. On a shared machine the latencies follow its load; the server's CPU
 * per loop much less so.
 */
import os from "node:os";
import type { Backend, BenchContext, FactTable } from "../lib/context.js";
import { BenchMock } from "../lib/mock.js";
import { procCpuSeconds, procMemory, type ServerProcess } from "../lib/proc.js";
import { fmtMs, summarize } from "../lib/stats.js";
import { StreamClient } from "../lib/stream-client.js";
import { BENCH_CWD, nextMarker, runTurn } from "../lib/turn-driver.js";

const ms = (ns: bigint) => Number(ns) / 1e6;

export const SOAK_OPS = ["thread/start", "turn: shell", "turn: text", "thread/fork", "thread/resume", "thread/read", "thread/list"] as const;
type Op = (typeof SOAK_OPS)[number];

export interface SoakMinute {
  minute: number;
  loops: number;
  p50: Record<Op, number>;
  /** p99 and max over this minute's thread/* calls (a stall of the one database session shows here). */
  callsP99: number;
  callsMax: number;
  /** Server CPU ms per loop during this minute. */
  cpuMsPerLoop: number;
  rssMB: number;
  load1: number;
}

export interface SoakRun {
  backend: string;
  label: string;
  minutes: SoakMinute[];
  errors: number;
}
export const soakRuns: SoakRun[] = [];

export interface SoakOptions {
  minutes: number;
  /** Extra server environment (e.g. an A/B switch), and a label for the table. */
  env?: Record<string, string>;
  label?: string;
  /** After the loop: restart the server on the same home and run one more minute. */
  restartMinute?: boolean;
}

export async function groupSoak(ctx: BenchContext, b: Backend, opts: SoakOptions): Promise<void> {
  const mock = await BenchMock.start({ text: "OK" }, false);
  const label = opts.label ?? "";
  try {
    const env = {
      ...mock.serverEnv(),
      ...opts.env,
    };
    let srv = await ctx.spawn(b, { env });
    try {
      const run: SoakRun = { backend: b.name, label, minutes: [], errors: 0 };
      soakRuns.push(run);
      await loop(ctx, b, srv, mock, run, opts.minutes, 0);
      if (opts.restartMinute) {
        await srv.stop();
        srv = await ctx.spawn(b, { env });
        const after: SoakRun = { backend: b.name, label: `${label}${label ? ", " : ""}after a restart on the same home`, minutes: [], errors: 0 };
        soakRuns.push(after);
        await loop(ctx, b, srv, mock, after, 1, 0);
      }
    } finally {
      await srv.stop();
    }
  } finally {
    await mock.close();
  }
}

async function loop(ctx: BenchContext, b: Backend, srv: ServerProcess, mock: BenchMock, run: SoakRun, minutes: number, firstMinute: number): Promise<void> {
  const c = await StreamClient.connect(srv.url);
  try {
    const threadParams = { cwd: BENCH_CWD, approvalPolicy: "never", sandbox: "danger-full-access" };
    const time = async <T>(samples: number[], fn: () => Promise<{ sentNs: bigint; recvNs: bigint } & T>): Promise<T> => {
      const r = await fn();
      samples.push(ms(r.recvNs - r.sentNs));
      return r;
    };
    // Warm-up: every path a few times, not counted.
    const oneLoop = async (s: Record<Op, number[]>) => {
      mock.reset();
      const st = await time(s["thread/start"], () => c.call("thread/start", threadParams));
      const threadId = st.result.thread.id as string;
      mock.enqueue({ toolCalls: [{ name: "shell", arguments: { command: "echo soak-$((6*7))" } }] }, { text: ["ran ", "it: ", "42"] });
      const shell = await runTurn(c, threadId, nextMarker("soak"));
      if (shell.status !== "completed") throw new Error(`shell turn ${shell.status}`);
      s["turn: shell"].push(ms(shell.completedNs - shell.sentNs));
      mock.enqueue({ text: ["a ", "plain ", "text ", "answer ", "in ", "chunks."] });
      const text = await runTurn(c, threadId, nextMarker("soak"));
      if (text.status !== "completed") throw new Error(`text turn ${text.status}`);
      s["turn: text"].push(ms(text.completedNs - text.sentNs));
      c.onNotification = null;
      await c.request("thread/unsubscribe", { threadId });
      const fork = await time(s["thread/fork"], () => c.call("thread/fork", { threadId }));
      await c.request("thread/unsubscribe", { threadId: fork.result.thread.id });
      await time(s["thread/resume"], () => c.call("thread/resume", { threadId }));
      await time(s["thread/read"], () => c.call("thread/read", { threadId, includeTurns: true }));
      await time(s["thread/list"], () => c.call("thread/list", {}));
      await c.request("thread/unsubscribe", { threadId });
    };
    const fresh = () => Object.fromEntries(SOAK_OPS.map((o) => [o, [] as number[]])) as Record<Op, number[]>;
    for (let i = 0; i < 5; i++) await oneLoop(fresh());

    for (let m = 0; m < minutes; m++) {
      const s = fresh();
      const cpu0 = procCpuSeconds(srv.pid);
      const t0 = Date.now();
      let loops = 0;
      while (Date.now() - t0 < 60_000) {
        try {
          await oneLoop(s);
          loops++;
        } catch (err) {
          run.errors++;
          if (run.errors <= 5) ctx.errors.push(`soak ${b.name}${run.label ? ` (${run.label})` : ""}: ${(err as Error).message}`);
          if (!c.isOpen) throw err;
        }
      }
      const cpu = procCpuSeconds(srv.pid) - cpu0;
      const mem = procMemory(srv.pid);
      const calls = summarize(SOAK_OPS.filter((o) => o.startsWith("thread/")).flatMap((o) => s[o]));
      const row: SoakMinute = {
        minute: firstMinute + m,
        loops,
        callsP99: calls.p99,
        callsMax: calls.max,
        p50: Object.fromEntries(SOAK_OPS.map((o) => [o, summarize(s[o]).p50])) as Record<Op, number>,
        cpuMsPerLoop: loops ? (cpu * 1000) / loops : NaN,
        rssMB: mem.rssMB,
        load1: os.loadavg()[0]!,
      };
      run.minutes.push(row);
      ctx.log(
        `soak ${b.name}${run.label ? ` (${run.label})` : ""} minute ${row.minute}: ${loops} loops, ` +
          SOAK_OPS.map((o) => `${o} ${fmtMs(row.p50[o])}`).join(", ") +
          `, calls p99 ${fmtMs(row.callsP99)} max ${fmtMs(row.callsMax)}, CPU ${row.cpuMsPerLoop.toFixed(0)} ms/loop, RSS ${row.rssMB.toFixed(0)} MiB, load ${row.load1.toFixed(1)}`,
      );
    }
  } finally {
    await c.close();
  }
}

export function soakTables(): FactTable[] {
  const out: FactTable[] = [];
  for (const r of soakRuns) {
    if (!r.minutes.length) continue;
    const rows = r.minutes.map((m) => [
      `${m.minute}`,
      `${m.loops}`,
      ...SOAK_OPS.map((o) => fmtMs(m.p50[o])),
      fmtMs(m.callsP99),
      fmtMs(m.callsMax),
      m.cpuMsPerLoop.toFixed(0),
      m.rssMB.toFixed(0),
      m.load1.toFixed(1),
    ]);
    const first = r.minutes[0]!;
    const last = r.minutes[r.minutes.length - 1]!;
    const notes: string[] = [];
    if (r.minutes.length > 1) {
      rows.push([
        `ratio ${last.minute}/${first.minute}`,
        "",
        ...SOAK_OPS.map((o) => `${(last.p50[o] / first.p50[o]).toFixed(2)}×`),
        "",
        "",
        `${(last.cpuMsPerLoop / first.cpuMsPerLoop).toFixed(2)}×`,
        "",
        "",
      ]);
    }
    if (r.errors) notes.push(`${r.errors} loops failed`);
    out.push({
      title: `Soak, ${r.backend}${r.label ? ` (${r.label})` : ""}: p50 ms per minute of a steady loop (one connection, sequential)`,
      columns: ["minute", "loops", ...SOAK_OPS, "thread/* calls p99", "max", "server CPU ms/loop", "RSS MiB", "load 1-min"],
      rows,
      notes,
    });
  }
  return out;
}

/** Issue 33 item 5: the last minute of a steady loop vs its minute 0, p50, ≤ 1.1× for these. */
const DRIFT_OPS: Op[] = ["thread/fork", "thread/resume", "thread/list", "turn: shell"];

export function soakVerdicts(): { target: string; measured: string; met: boolean | null }[] {
  return soakRuns
    .filter((r) => r.minutes.length > 1)
    .map((r) => {
      const first = r.minutes[0]!;
      const last = r.minutes[r.minutes.length - 1]!;
      const ratios = DRIFT_OPS.map((o) => [o, last.p50[o] / first.p50[o]] as const);
      return {
        target: `soak ${r.backend}${r.label ? ` (${r.label})` : ""}: minute ${last.minute} / minute 0 p50 ≤ 1.1× (fork, resume, list, shell turn)`,
        measured: `${ratios.map(([o, x]) => `${o} ${x.toFixed(2)}×`).join(", ")}; server CPU per loop ${(last.cpuMsPerLoop / first.cpuMsPerLoop).toFixed(2)}×; load ${first.load1.toFixed(1)} → ${last.load1.toFixed(1)}`,
        met: ratios.every(([, x]) => x <= 1.1),
      };
    });
}
