/**
 * Running hooks: each configured command runs through the command runner — inside the OS sandbox
 * of the thread it runs for (its sandbox policy and cwd), never with more access than the agent's
 * own commands — with one JSON document on its stdin (as Codex and Claude Code hooks get it; an
 * environment variable would cap it at 128 KiB):
 *
 *   {"hook_event_name": "preToolUse", "thread_id", "turn_id", "cwd", "tool_name", "call_id",
 *    "tool_input": <the call's arguments>, "tool_response", "is_error" <postToolUse>,
 *    "status", "stop_reason", "error", "last_assistant_message", "stop_hook_active" <stop>}
 *
 * preToolUse vetoes: a hook blocks the call by exiting with code 2 (stderr is the reason) or by
 * printing {"decision": "block", "reason": "…"}. It fails closed: a hook that cannot run (no
 * sandbox, not found), times out, crashes or exits with any other non-zero code blocks the call
 * too, with a reason that says so — a check that did not run must not let the call through.
 * postToolUse observes; its failure is the hook's, never the tool's. A stop hook may send the
 * model back to work: exit code 2 (stderr is the message), {"decision": "block", "reason": "…"}
 * (Claude Code's spelling) or {"decision": "continue", "message": "…"}.
 *
 * Every run is reported (hook/started, hook/completed with Codex's HookRunSummary) through the
 * caller's reporter, which records it before it is published. Runs take the turn's abort signal:
 * an interrupt or a shutdown kills them, nobody waits out their timeout.
 */
import type { ToolOutcome } from "../agent/tools.js";
import { uuidv7 } from "../ids.js";
import type { SandboxPolicy } from "../protocol/common.js";
import type { HookRunSummary } from "../protocol/hooks.js";
import { policyOfMode, resolveSandbox } from "../sandbox/policy.js";
import type { CommandRunner } from "../sandbox/runner.js";
import { listHookEntries, type ConfiguredHook, type HookConfig, type HookEvent } from "./config.js";

export interface ToolCallFacts {
  threadId: string;
  turnId: string;
  cwd: string;
  tool: string;
  callId: string;
  /** The call's arguments as the model sent them (JSON text). */
  arguments: string;
}

export interface TurnEndFacts {
  threadId: string;
  turnId: string;
  cwd: string;
  status: string;
  stopReason: string;
  error: string | null;
  /** The model's last answer, when the turn ends with one. */
  lastAssistantMessage: string | null;
  /** A stop hook already sent the model back to work in this turn. */
  stopHookActive: boolean;
}

/** Records and announces hook runs (hook/started, hook/completed); a failure to record propagates. */
export interface HookReporter {
  started(run: HookRunSummary): Promise<void>;
  completed(run: HookRunSummary): Promise<void>;
}

/** What a stop hook asked for: continue the turn with `text` (written by hook run `runId`). */
export interface StopContinuation {
  text: string;
  runId: string;
}

interface HookLogger {
  warn(obj: object, msg: string): void;
}

/** The most of a tool's output passed to a postToolUse hook. */
const MAX_RESPONSE_CHARS = 1024 * 1024;
const OUTPUT_CAP_BYTES = 64 * 1024;

/** How one hook process ended: it ran to an exit code, or it failed to (why, in words). */
type RunOutcome = { ran: true; exitCode: number; stdout: string; stderr: string } | { ran: false; failure: string };

export class HookRunner {
  constructor(
    readonly config: HookConfig,
    private readonly commands: CommandRunner,
    /** The sandbox policy of a thread (hooks run confined like its commands). */
    private readonly policyOf: (threadId: string) => SandboxPolicy | null,
    private readonly log: HookLogger,
  ) {}

  list(cwds: readonly string[]) {
    return listHookEntries(this.config, cwds);
  }

  private matching(event: HookEvent, tool: string | null): ConfiguredHook[] {
    return this.config.hooks.filter((h) => h.event === event && (tool === null || h.matcher === null || h.matcher.test(tool)));
  }

  /** Whether any hook of `event` applies (so callers can skip building the input). */
  has(event: HookEvent, tool: string | null = null): boolean {
    return this.matching(event, tool).length > 0;
  }

  /** Runs the preToolUse hooks in order; the first block's reason (a failed hook blocks too), or null to let the call run. */
  async beforeTool(facts: ToolCallFacts, signal: AbortSignal, report: HookReporter): Promise<string | null> {
    for (const hook of this.matching("preToolUse", facts.tool)) {
      const verdict = await this.runReported(hook, facts, { hook_event_name: "preToolUse", ...callFields(facts) }, signal, report, (out) => {
        if (!out.ran) {
          const reason = `the preToolUse hook \`${hook.command}\` ${out.failure}, so the call was blocked (a hook that vets calls fails closed)`;
          return { status: "failed", entries: [{ kind: "error", text: reason }], value: reason };
        }
        const blocked = `the preToolUse hook \`${hook.command}\` blocked it`;
        const reason = out.exitCode === 2 ? out.stderr.trim() || blocked : decisionOf(out.stdout, ["block"], blocked);
        return reason === null ? { status: "completed", entries: [], value: null } : { status: "blocked", entries: [{ kind: "feedback", text: reason }], value: reason };
      });
      if (verdict !== null) return verdict;
    }
    return null;
  }

  /** Runs the postToolUse hooks; they only observe, and a failing one is reported as its own failure. */
  async afterTool(facts: ToolCallFacts & { outcome: ToolOutcome }, signal: AbortSignal, report: HookReporter): Promise<void> {
    const hooks = this.matching("postToolUse", facts.tool);
    if (hooks.length === 0) return;
    const response = facts.outcome.content.map((b) => (b.type === "text" ? b.text : "[image]")).join("\n").slice(0, MAX_RESPONSE_CHARS);
    const input = { hook_event_name: "postToolUse", ...callFields(facts), tool_response: response, is_error: facts.outcome.isError };
    for (const hook of hooks) await this.runReported(hook, facts, input, signal, report, observed(hook));
  }

  /**
   * Runs the stop hooks as the turn ends. With `mayContinue`, the first hook that asks the model to
   * go on decides (the rest do not run): its message is returned. Otherwise they only observe.
   */
  async stop(facts: TurnEndFacts, mayContinue: boolean, signal: AbortSignal, report: HookReporter): Promise<StopContinuation | null> {
    const input = {
      hook_event_name: "stop",
      thread_id: facts.threadId,
      turn_id: facts.turnId,
      cwd: facts.cwd,
      status: facts.status,
      stop_reason: facts.stopReason,
      error: facts.error,
      last_assistant_message: facts.lastAssistantMessage,
      stop_hook_active: facts.stopHookActive,
    };
    for (const hook of this.matching("stop", null)) {
      const runId = uuidv7();
      const text = await this.runReported(hook, facts, input, signal, report, (out) => {
        if (!out.ran) return observed(hook)(out);
        const goOn = "Continue working on the task.";
        const message = out.exitCode === 2 ? out.stderr.trim() || goOn : decisionOf(out.stdout, ["block", "continue"], goOn);
        if (message === null) return observed(hook)(out);
        const note = mayContinue ? message : `${message} (not followed: stop hooks already sent the model back to work as often as a turn allows)`;
        return { status: "blocked", entries: [{ kind: "feedback", text: note }], value: mayContinue ? message : null };
      }, runId);
      if (text !== null) return { text, runId };
    }
    return null;
  }

  /** One hook run between its hook/started and hook/completed; `judge` reads its outcome. */
  private async runReported<T>(
    hook: ConfiguredHook,
    facts: { threadId: string; turnId: string; cwd: string },
    input: object,
    signal: AbortSignal,
    report: HookReporter,
    judge: (out: RunOutcome) => { status: HookRunSummary["status"]; entries: HookRunSummary["entries"]; value: T },
    id: string = uuidv7(),
  ): Promise<T> {
    const startedMs = Date.now();
    const summary: HookRunSummary = {
      id,
      eventName: hook.event,
      handlerType: "command",
      executionMode: "sync",
      scope: "turn",
      sourcePath: this.config.path,
      source: "user",
      displayOrder: hook.displayOrder,
      status: "running",
      statusMessage: hook.statusMessage,
      startedAt: Math.floor(startedMs / 1000),
      completedAt: null,
      durationMs: null,
      entries: [],
    };
    await report.started(summary);
    const out = await this.run(hook, facts.threadId, facts.cwd, input, signal);
    const verdict = judge(out);
    if (verdict.status === "failed") this.log.warn({ hook: hook.key, entries: verdict.entries }, "hook failed");
    const endedMs = Date.now();
    await report.completed({ ...summary, status: verdict.status, entries: verdict.entries, completedAt: Math.floor(endedMs / 1000), durationMs: endedMs - startedMs });
    return verdict.value;
  }

  /** One hook process: its exit code and output, or why it did not run to an exit code of its own. */
  private async run(hook: ConfiguredHook, threadId: string, cwd: string, input: object, signal: AbortSignal): Promise<RunOutcome> {
    if (signal.aborted) return { ran: false, failure: "was not run: the turn was interrupted" };
    let result: Awaited<ReturnType<CommandRunner["run"]>>;
    try {
      // A thread no longer loaded: read-only, never unconfined.
      const sandbox = await resolveSandbox(this.policyOf(threadId) ?? policyOfMode("read-only"), cwd);
      result = await this.commands.run({
        argv: ["bash", "-c", hook.command],
        sandbox,
        cwd,
        env: { APP_SERVER_HOOK_EVENT: hook.event },
        stdin: JSON.stringify(input),
        timeoutMs: hook.timeoutSec * 1000,
        outputCapBytes: OUTPUT_CAP_BYTES,
        signal,
      });
    } catch (err) {
      return { ran: false, failure: `could not run (${err instanceof Error ? err.message : String(err)})` };
    }
    if (!result.ran) return { ran: false, failure: `could not run (${result.reason})` };
    const run = result.run;
    if (run.spawnError) return { ran: false, failure: `could not run (${run.spawnError.message})` };
    if (run.aborted) return { ran: false, failure: "was stopped: the turn was interrupted" };
    if (run.timedOut) return { ran: false, failure: `timed out after ${hook.timeoutSec} s` };
    if (run.signal) return { ran: false, failure: `crashed (killed by ${run.signal})` };
    const exitCode = run.exitCode ?? -1;
    if (exitCode !== 0 && exitCode !== 2) {
      const stderr = run.stderr.text.trim().slice(0, 500);
      return { ran: false, failure: `failed (exit code ${exitCode}${stderr ? `: ${stderr}` : ""})` };
    }
    return { ran: true, exitCode, stdout: run.stdout.text, stderr: run.stderr.text };
  }
}

/** The verdict of a hook that only observes: completed, or failed with why. */
function observed(hook: ConfiguredHook) {
  return (out: RunOutcome) =>
    out.ran
      ? { status: "completed" as const, entries: [], value: null }
      : { status: "failed" as const, entries: [{ kind: "error" as const, text: `the ${hook.event} hook \`${hook.command}\` ${out.failure}` }], value: null };
}

function callFields(f: ToolCallFacts) {
  let input: unknown = f.arguments;
  try {
    input = JSON.parse(f.arguments);
  } catch {
    /* the raw text, as the model sent it */
  }
  return { thread_id: f.threadId, turn_id: f.turnId, cwd: f.cwd, tool_name: f.tool, call_id: f.callId, tool_input: input };
}

/** The reason/message of a JSON decision on stdout whose `decision` is one of `accepted` (`fallback` when it gives none); null for anything else. */
function decisionOf(stdout: string, accepted: readonly string[], fallback: string): string | null {
  const text = stdout.trim();
  if (!text.startsWith("{")) return null;
  try {
    const v = JSON.parse(text) as { decision?: unknown; reason?: unknown; message?: unknown };
    if (typeof v.decision !== "string" || !accepted.includes(v.decision)) return null;
    const said = typeof v.message === "string" && v.message ? v.message : typeof v.reason === "string" && v.reason ? v.reason : null;
    return said ?? fallback;
  } catch {
    // Not a decision: stdout that is not one JSON object is plain output (as Codex and Claude Code
    // read it), and the exit code alone decides. Nothing is lost: the run is reported either way.
    return null;
  }
}
