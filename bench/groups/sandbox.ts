/**
 * Per-command cost of the OS sandbox: `true` through the server's own CommandRunner (dist/),
 * unconfined (danger-full-access) and inside bubblewrap (read-only; workspace-write with a
 * .git to protect), plus bwrap's RSS while a confined `sleep` runs. Backend-independent.
 */
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { pathToFileURL } from "node:url";
import type { LatencyRow, MemRow } from "../lib/context.js";
import { summarize } from "../lib/stats.js";

type RunnerModule = typeof import("../../src/sandbox/runner.js");
type PolicyModule = typeof import("../../src/sandbox/policy.js");

export async function groupSandbox(app: string, n: number, out: { latency: LatencyRow[]; memory: MemRow[]; notes: string[] }): Promise<void> {
  const { CommandRunner } = (await import(pathToFileURL(path.join(app, "dist", "sandbox", "runner.js")).href)) as RunnerModule;
  const { resolveSandbox, policyOfMode } = (await import(pathToFileURL(path.join(app, "dist", "sandbox", "policy.js")).href)) as PolicyModule;
  const runner = new CommandRunner();
  const status = await runner.status();
  if (!status.available) {
    out.notes.push(`sandbox: not measured, the OS sandbox is unavailable here (${status.reason}).`);
    return;
  }
  const ws = await mkdtemp(path.join(os.tmpdir(), "aas-bench-sandbox-"));
  try {
    await mkdir(path.join(ws, ".git"));
    const cases: Array<[string, Awaited<ReturnType<typeof resolveSandbox>>]> = [
      ["unconfined (danger-full-access)", null],
      ["bwrap read-only", await resolveSandbox(policyOfMode("read-only"), ws)],
      ["bwrap workspace-write", await resolveSandbox(policyOfMode("workspace-write"), ws)],
    ];
    for (const [label, sandbox] of cases) {
      const samples: number[] = [];
      for (let i = 0; i < n + 5; i++) {
        const t = performance.now();
        const r = await runner.run({ argv: ["true"], sandbox, cwd: ws, timeoutMs: 10_000 });
        if (!r.ran || r.run.exitCode !== 0) throw new Error(`sandbox bench: \`true\` failed (${label})`);
        if (i >= 5) samples.push(performance.now() - t); // the first runs warm the page cache
      }
      out.latency.push({ backend: "-", metric: `command \`true\`: ${label}`, s: summarize(samples) });
    }
    // What a confined command costs in memory besides its own: bwrap's two processes (RSS, KiB → MiB).
    const rss: number[] = [];
    for (let i = 0; i < Math.min(n, 10); i++) {
      let pid = 0;
      const running = runner.run({ argv: ["sleep", "5"], sandbox: cases[2]![1], cwd: ws, timeoutMs: 10_000, onSpawn: (p) => (pid = p), signal: AbortSignal.timeout(400) });
      await new Promise((r) => setTimeout(r, 150));
      rss.push(bwrapTreeRssMiB(pid));
      await running;
    }
    out.memory.push({ backend: "-", metric: "bwrap processes around a confined command", rss: summarize(rss), hwm: summarize(rss) });
  } finally {
    await rm(ws, { recursive: true, force: true });
  }
}

/** RSS of the bwrap process and its bwrap child (the namespace's PID 1), in MiB. */
function bwrapTreeRssMiB(pid: number): number {
  const rssOf = (p: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${p}/status`, "utf8"))?.[1] ?? 0) / 1024;
  let total = rssOf(pid);
  try {
    for (const child of readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter(Boolean)) {
      if (readFileSync(`/proc/${child}/comm`, "utf8").trim() === "bwrap") total += rssOf(Number(child));
    }
  } catch {
    /* gone */
  }
  return total;
}
