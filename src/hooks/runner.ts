/**
 * Running hooks: each configured command runs through the command runner — inside the OS sandbox
 * of the thread it runs for (its sandbox policy and cwd), never with more access than the agent's
 * own commands — with one JSON document on stdin:
 *
 *   {"hook_event_name": "preToolUse", "thread_id", "turn_id", "cwd", "tool_name", "call_id",
 *    "tool_input": <the call's arguments>, "tool_response": <postToolUse: the result text>,
 *    "status", "stop_reason", "error" <stop>}
 *
 * A preToolUse hook vetoes the call by exiting with code 2 (stderr is the reason) or by printing
 * {"decision": "block", "reason": "…"} on stdout; the model is told the call was blocked and why.
 * Any other failure (a crash, a timeout) is logged and does not block: a broken hook must not
 * stop every tool. postToolUse and stop hooks only observe.
 */
import type { ToolOutcome } from "../agent/tools.js";
import type { SandboxPolicy } from "../protocol/common.js";
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
}

interface HookLogger {
  warn(obj: object, msg: string): void;
}

/** The most of a tool's output passed to a postToolUse hook (it travels in the environment). */
const MAX_RESPONSE_CHARS = 64 * 1024;

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

  /** Runs the preToolUse hooks; the first veto's reason, or null to let the call run. */
  async beforeTool(facts: ToolCallFacts, signal: AbortSignal): Promise<string | null> {
    for (const hook of this.matching("preToolUse", facts.tool)) {
      const r = await this.run(hook, facts.threadId, facts.cwd, { hook_event_name: "preToolUse", ...callFields(facts) }, signal);
      if (r === null) continue;
      if (r.exitCode === 2) return r.stderr.trim() || `the ${hook.key} hook blocked it`;
      const decision = parseDecision(r.stdout);
      if (decision) return decision;
    }
    return null;
  }

  async afterTool(facts: ToolCallFacts & { outcome: ToolOutcome }, signal: AbortSignal): Promise<void> {
    const response = facts.outcome.content.map((b) => (b.type === "text" ? b.text : "[image]")).join("\n").slice(0, MAX_RESPONSE_CHARS);
    for (const hook of this.matching("postToolUse", facts.tool)) {
      await this.run(hook, facts.threadId, facts.cwd, { hook_event_name: "postToolUse", ...callFields(facts), tool_response: response, is_error: facts.outcome.isError }, signal);
    }
  }

  async turnEnded(facts: TurnEndFacts): Promise<void> {
    for (const hook of this.matching("stop", null)) {
      await this.run(
        hook,
        facts.threadId,
        facts.cwd,
        { hook_event_name: "stop", thread_id: facts.threadId, turn_id: facts.turnId, cwd: facts.cwd, status: facts.status, stop_reason: facts.stopReason, error: facts.error },
        new AbortController().signal,
      );
    }
  }

  /** One hook process; null when it could not run or failed in a way that does not decide anything. */
  private async run(hook: ConfiguredHook, threadId: string, cwd: string, input: object, signal: AbortSignal): Promise<{ exitCode: number | null; stdout: string; stderr: string } | null> {
    // A thread no longer loaded: read-only, never unconfined.
    const sandbox = await resolveSandbox(this.policyOf(threadId) ?? policyOfMode("read-only"), cwd);
    const result = await this.commands.run({
      // stdin from the environment: the runner's processes take no stdin of their own.
      argv: ["bash", "-c", 'printf "%s" "$APP_SERVER_HOOK_INPUT" | bash -c "$0"', hook.command],
      sandbox,
      cwd,
      env: { APP_SERVER_HOOK_INPUT: JSON.stringify(input), APP_SERVER_HOOK_EVENT: hook.event },
      timeoutMs: hook.timeoutSec * 1000,
      outputCapBytes: 64 * 1024,
      signal,
    });
    if (!result.ran) {
      this.log.warn({ hook: hook.key, reason: result.reason }, "hook not run");
      return null;
    }
    const run = result.run;
    if (run.spawnError || run.timedOut || run.aborted) {
      this.log.warn({ hook: hook.key, timedOut: run.timedOut, error: run.spawnError?.message }, "hook failed");
      return null;
    }
    if (run.exitCode !== 0 && run.exitCode !== 2) this.log.warn({ hook: hook.key, exitCode: run.exitCode, stderr: run.stderr.text.slice(0, 500) }, "hook failed");
    return { exitCode: run.exitCode, stdout: run.stdout.text, stderr: run.stderr.text };
  }
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

function parseDecision(stdout: string): string | null {
  const text = stdout.trim();
  if (!text.startsWith("{")) return null;
  try {
    const v = JSON.parse(text) as { decision?: unknown; reason?: unknown };
    if (v.decision === "block") return typeof v.reason === "string" && v.reason ? v.reason : "a hook blocked it";
  } catch {
    /* not a decision */
  }
  return null;
}
