/**
 * `npx tsx bench/grep-sandbox.ts [--app=DIR] [--runs=15]` (issue 24, items 3 and 7): the grep
 * tool and the command sandbox of the built tree DIR (default this tree; build it first).
 *
 * grep: the tool as the model calls it, over (a) a synthetic tree of 1 000 files × 20 KiB of
 * source-like lines and (b) a 1 MiB file of `a…a!` lines with the pattern `^(a+)+$` (skipped when
 * it would never finish: the pre-issue-24 engine backtracks exponentially there). Wall time per
 * call (median, p95) and the longest the event loop of this process was blocked during the calls
 * (monitorEventLoopDelay max): a search on the event loop blocks it for its whole duration, one in
 * a worker thread only for posting and reading messages.
 *
 * sandbox: `true` through the CommandRunner — unconfined, bwrap read-only, bwrap workspace-write
 * (with a .git to protect) — and, where the tree has them, with resource limits (prlimit) and a
 * private /tmp. Median and p95 of the wall time per command.
 */
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { monitorEventLoopDelay, performance } from "node:perf_hooks";
import { fileURLToPath, pathToFileURL } from "node:url";

const argv = process.argv.slice(2);
const opt = (name: string) => argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const APP = path.resolve(opt("app") ?? fileURLToPath(new URL("..", import.meta.url)));
const RUNS = Number(opt("runs") ?? 15);
const mod = async (rel: string) => import(pathToFileURL(path.join(APP, "dist", rel)).href);

function stats(samples: number[]): string {
  const s = [...samples].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
  return `${at(0.5).toFixed(1)} ms | ${at(0.95).toFixed(1)} ms`;
}

async function makeTree(root: string): Promise<void> {
  const line = (i: number) => `export function handler${i}(request: Request): Response { return respond(request, ${i}); }\n`;
  const body = Array.from({ length: 220 }, (_, i) => line(i)).join("");
  for (let d = 0; d < 20; d++) {
    await mkdir(path.join(root, "tree", `dir${d}`), { recursive: true });
    for (let f = 0; f < 50; f++) await writeFile(path.join(root, "tree", `dir${d}`, `file${f}.ts`), body);
  }
  await writeFile(path.join(root, "redos.txt"), `${"a".repeat(40)}!\n`.repeat(25_000));
}

async function benchGrep(root: string) {
  const { grepTool } = await mod("tools/grep.js");
  const { CommandRunner } = await mod("sandbox/runner.js");
  const { policyOfMode } = await mod("sandbox/policy.js");
  const ctx = { threadId: "bench", turnId: "t", cwd: root, sandbox: "read-only", sandboxPolicy: policyOfMode("read-only"), commands: new CommandRunner(), approvalPolicy: "never", sessionApprovals: new Set() };
  const tool = grepTool(ctx);
  const call = (args: object) => tool.execute({ type: "toolCall", id: "c", name: "grep", arguments: JSON.stringify(args) }, new AbortController().signal);
  const cases: Array<[string, object, boolean]> = [
    ["literal over 1 000 files (20 MiB)", { pattern: "handler219\\(", path: "tree" }, true],
    ["class + alternation over 1 000 files", { pattern: "respond\\(request, (1|2)[0-9]\\)", path: "tree" }, true],
    ["^(a+)+$ over 25 000 lines of a…a!", { pattern: "^(a+)+$", path: "redos.txt" }, !/JavaScript regular expression/.test(tool.spec.description)],
  ];
  console.log("| grep case | median | p95 | event loop blocked (max) |");
  console.log("|---|---|---|---|");
  for (const [label, args, runnable] of cases) {
    if (!runnable) {
      console.log(`| ${label} | never finishes (exponential backtracking on the event loop) | | the whole process, until killed |`);
      continue;
    }
    await call(args); // warm: worker start, page cache
    const h = monitorEventLoopDelay({ resolution: 5 });
    h.enable();
    const samples: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      const t = performance.now();
      const out = await call(args);
      if (out.isError) throw new Error(`grep failed: ${JSON.stringify(out.content)}`);
      samples.push(performance.now() - t);
    }
    h.disable();
    console.log(`| ${label} | ${stats(samples)} | ${(h.max / 1e6).toFixed(0)} ms |`);
  }
}

async function benchSandbox(root: string) {
  const { CommandRunner } = await mod("sandbox/runner.js");
  const { resolveSandbox, policyOfMode } = await mod("sandbox/policy.js");
  let TrustBoundary: any = null;
  try {
    ({ TrustBoundary } = await mod("sandbox/boundary.js"));
  } catch {
    /* before issue 24: no boundary */
  }
  const ws = path.join(root, "ws");
  await mkdir(path.join(ws, ".git"), { recursive: true });
  const plain = new CommandRunner();
  const status = await plain.status();
  if (!status.available) throw new Error(`no sandbox here: ${status.reason}`);
  const cases: Array<[string, any, any]> = [
    ["unconfined (danger-full-access)", plain, null],
    ["bwrap read-only", plain, await resolveSandbox(policyOfMode("read-only"), ws)],
    ["bwrap workspace-write", plain, await resolveSandbox(policyOfMode("workspace-write"), ws)],
  ];
  if (TrustBoundary) {
    const noLimits = new CommandRunner({ boundary: new TrustBoundary({ limits: { processes: null, addressSpaceBytes: null, fileSizeBytes: null, cpuSeconds: null } }) });
    const privateTmp = new CommandRunner({ boundary: new TrustBoundary({ tmpBase: path.join(root, "private-tmp") }) });
    cases.splice(3, 0, ["bwrap workspace-write, no limits (no prlimit)", noLimits, cases[2]![2]]);
    cases.push(["bwrap workspace-write + private /tmp", privateTmp, await resolveSandbox(policyOfMode("workspace-write"), ws, { tmpScope: "bench" })]);
  }
  console.log(`| command \`true\` (limits: ${status.prlimit ? "prlimit" : "none"}) | median | p95 |`);
  console.log("|---|---|---|");
  for (const [label, runner, sandbox] of cases) {
    const samples: number[] = [];
    for (let i = 0; i < RUNS + 5; i++) {
      const t = performance.now();
      const r = await runner.run({ argv: ["true"], sandbox, cwd: ws, timeoutMs: 10_000 });
      if (!r.ran || r.run.exitCode !== 0) throw new Error(`\`true\` failed (${label}): ${JSON.stringify(r)}`);
      if (i >= 5) samples.push(performance.now() - t);
    }
    console.log(`| ${label} | ${stats(samples)} |`);
  }
}

async function main() {
  const root = await mkdtemp(path.join(os.tmpdir(), "aas-bench-grep-"));
  try {
    console.log(`grep and sandbox: ${APP}, ${RUNS} runs each`);
    await makeTree(root);
    await benchGrep(root);
    await benchSandbox(root);
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
