/** Shared fixtures for the built-in tool tests: temp workspaces and a recording ToolContext. */
import { execFileSync } from "node:child_process";
import { mkdtempSync, realpathSync, rmSync, mkdirSync, readdirSync, readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { ToolCallBlock } from "../../src/agent/messages.js";
import type { LoopTool, ToolOutcome } from "../../src/agent/tools.js";
import type { AskForApproval, SandboxMode, SandboxPolicy } from "../../src/protocol/common.js";
import { policyOfMode } from "../../src/sandbox/policy.js";
import { CommandRunner } from "../../src/sandbox/runner.js";
import type { ThreadItem } from "../../src/protocol/items.js";
import type { ApprovalAnswer, ApprovalRequest, PlanStepStatus, ToolContext } from "../../src/tools/context.js";
import type { RulePattern } from "../../src/tools/execpolicy.js";

/**
 * A sandbox of directories: `ws` is the workspace, `outside` is neither the workspace nor a temp
 * dir, and TMPDIR points at `tmp` so that os.tmpdir() (a writable root) does not contain the others.
 * They live under /var/tmp, not /tmp: /tmp is a writable root of workspace-write (Codex's semantics),
 * so nothing under it would be "outside".
 */
export interface Dirs {
  root: string;
  ws: string;
  outside: string;
  tmp: string;
  cleanup(): void;
}

const TEST_ROOT = process.platform === "linux" ? "/var/tmp" : os.tmpdir();

export function makeDirs(): Dirs {
  const root = realpathSync(mkdtempSync(path.join(TEST_ROOT, "tools-test-")));
  const ws = path.join(root, "ws");
  const outside = path.join(root, "outside");
  const tmp = path.join(root, "tmp");
  for (const d of [ws, outside, tmp]) mkdirSync(d);
  const savedTmp = process.env.TMPDIR;
  process.env.TMPDIR = tmp;
  return {
    root,
    ws,
    outside,
    tmp,
    cleanup() {
      if (savedTmp === undefined) delete process.env.TMPDIR;
      else process.env.TMPDIR = savedTmp;
      rmSync(root, { recursive: true, force: true });
    },
  };
}

export type ContextEvent =
  | { type: "started"; item: ThreadItem }
  | { type: "completed"; item: ThreadItem }
  | { type: "delta"; itemId: string; delta: string }
  | { type: "diff"; diff: string }
  | { type: "plan"; explanation: string | null; plan: Array<{ step: string; status: PlanStepStatus }> }
  | { type: "approval"; request: ApprovalRequest };

/**
 * One runner for the tool tests (it probes bubblewrap once). HOME is an empty directory so that
 * the machine's own ~/.bashrc (read by `bash -lc`) cannot add output to the commands under test.
 */
const quietHome = mkdtempSync(path.join(os.tmpdir(), "tools-home-"));
process.once("exit", () => rmSync(quietHome, { recursive: true, force: true }));
export const sharedRunner = new CommandRunner({ set: { HOME: quietHome } });

/**
 * Host pids of running (not zombie) processes whose command line is exactly `argv`. Sandboxed
 * commands live in their own PID namespace, so the pids they print ($!, $$) mean nothing outside:
 * tests find their processes by a unique command line instead.
 */
export function processesRunning(argv: string): number[] {
  const out: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const cmd = readFileSync(`/proc/${name}/cmdline`, "utf8").split("\0").filter(Boolean).join(" ");
      if (cmd !== argv) continue;
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      const state = stat.slice(stat.lastIndexOf(")") + 2)[0];
      if (state !== "Z" && state !== "X") out.push(Number(name));
    } catch {
      /* gone meanwhile */
    }
  }
  return out;
}

/** A ToolContext that records every call; approvals are answered from a queue (default: accept). */
export class RecordingContext implements ToolContext {
  readonly threadId = "thread-1";
  readonly turnId = "turn-1";
  readonly sessionApprovals = new Set<string>();
  readonly events: ContextEvent[] = [];
  /** Answers for the next approval requests, in order; when empty, `defaultAnswer`. */
  answers: ApprovalAnswer[] = [];
  defaultAnswer: ApprovalAnswer = "accept";
  /** Saved approval rules (the server keeps them in its database: src/store/execpolicy-store.ts). */
  readonly rules: RulePattern[] = [];
  readonly execPolicy = {
    patterns: async () => [...this.rules],
    add: async (pattern: RulePattern) => void this.rules.push(pattern),
  };
  private nextId = 1;

  readonly sandboxPolicy: SandboxPolicy;

  constructor(
    readonly cwd: string,
    readonly sandbox: SandboxMode = "workspace-write",
    readonly approvalPolicy: AskForApproval = "on-request",
    policy?: SandboxPolicy,
    readonly commands: CommandRunner = sharedRunner,
  ) {
    this.sandboxPolicy = policy ?? policyOfMode(sandbox);
  }

  newItemId(): string {
    return `item-${this.nextId++}`;
  }
  async startItem(item: ThreadItem): Promise<void> {
    this.events.push({ type: "started", item: structuredClone(item) });
  }
  async completeItem(item: ThreadItem): Promise<void> {
    this.events.push({ type: "completed", item: structuredClone(item) });
  }
  outputDelta(itemId: string, delta: string): void {
    this.events.push({ type: "delta", itemId, delta });
  }
  async diffUpdated(diff: string): Promise<void> {
    this.events.push({ type: "diff", diff });
  }
  async planUpdated(explanation: string | null, plan: Array<{ step: string; status: PlanStepStatus }>): Promise<void> {
    this.events.push({ type: "plan", explanation, plan });
  }
  async requestApproval(request: ApprovalRequest, signal: AbortSignal): Promise<ApprovalAnswer> {
    this.events.push({ type: "approval", request: structuredClone(request) });
    if (signal.aborted) return "cancel";
    return this.answers.shift() ?? this.defaultAnswer;
  }
  async askClients(): Promise<null> {
    return null;
  }

  get approvals(): ApprovalRequest[] {
    return this.events.flatMap((e) => (e.type === "approval" ? [e.request] : []));
  }
  get started(): ThreadItem[] {
    return this.events.flatMap((e) => (e.type === "started" ? [e.item] : []));
  }
  get completed(): ThreadItem[] {
    return this.events.flatMap((e) => (e.type === "completed" ? [e.item] : []));
  }
  get deltas(): string[] {
    return this.events.flatMap((e) => (e.type === "delta" ? [e.delta] : []));
  }
  get diffs(): string[] {
    return this.events.flatMap((e) => (e.type === "diff" ? [e.diff] : []));
  }
}

let callCounter = 0;
export function call(name: string, args: unknown): ToolCallBlock {
  return { type: "toolCall", id: `call-${++callCounter}`, name, arguments: typeof args === "string" ? args : JSON.stringify(args) };
}

export async function run(tool: LoopTool, args: unknown, signal: AbortSignal = new AbortController().signal): Promise<ToolOutcome> {
  return tool.execute(call(tool.spec.name, args), signal);
}

export const textOf = (o: ToolOutcome) => o.content.map((c) => (c.type === "text" ? c.text : "")).join("");

export function toolNamed(tools: LoopTool[], name: string): LoopTool {
  const t = tools.find((x) => x.spec.name === name);
  if (!t) throw new Error(`no tool ${name}`);
  return t;
}

/** Running (not zombie) processes among `pids`. */
export function runningPids(pids: number[]): number[] {
  return pids.filter((pid) => {
    try {
      process.kill(pid, 0);
    } catch {
      return false;
    }
    try {
      const stat = execFileSync("ps", ["-o", "stat=", "-p", String(pid)]).toString().trim();
      return stat !== "" && !stat.startsWith("Z");
    } catch {
      return false;
    }
  });
}

/** Waits (bounded) until `running()` finds nothing; returns what it still finds. */
export async function waitGone(running: () => number[], ms = 5_000): Promise<number[]> {
  const deadline = Date.now() + ms;
  let alive = running();
  while (alive.length && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
    alive = running();
  }
  return alive;
}

/** Waits (bounded) until none of `pids` runs; returns those still running. */
export async function waitAllGone(pids: number[], ms = 3_000): Promise<number[]> {
  const deadline = Date.now() + ms;
  let alive = runningPids(pids);
  while (alive.length && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
    alive = runningPids(alive);
  }
  return alive;
}
