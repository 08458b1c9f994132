/**
 * The `shell` tool: `bash -lc <command>` through the command runner (inside the OS sandbox unless
 * the thread is danger-full-access or the command runs escalated), as a `commandExecution` item
 * with live output deltas, bounded output, a timeout, and approvals per policy (approval.ts has
 * the rules, execpolicy.ts the saved rules, docs/approvals.md the table). The item's lifecycle
 * and the approval round trip are the tool host's (host.ts); this file plans and runs the command.
 *
 * The arguments are Codex's, so a model trained on Codex's shell tools uses this one the same way:
 * `sandbox_permissions: "require_escalated"` with a `justification` asks to run outside the
 * sandbox, and `prefix_rule` suggests the rule the user may save.
 */
import { promises as fs } from "node:fs";
import { z } from "zod";
import { textOutcome, type LoopTool, type ToolOutcome } from "../agent/tools.js";
import type { CommandExecutionItem } from "../protocol/items.js";
import { ESCALATION_REFUSED, looksLikeSandboxDenial, policyMode, type CommandPlan } from "./approval.js";
import { parseCommandActions } from "./command-parse.js";
import type { ToolContext } from "./context.js";
import { hostTool, type RunHandle, type ToolAction, type ToolResult } from "./host.js";
import { CommandApprovals, type Workdir } from "./shell-approvals.js";
import { DEFAULT_KILL_GRACE_MS, DEFAULT_OUTPUT_CAP_BYTES, truncateMiddle, type RunResult } from "./process.js";
import { BASH, shellInvocation } from "./shell-invocation.js";
import type { ResolvedSandbox } from "../sandbox/policy.js";
import { SANDBOX_HELP } from "../sandbox/runner.js";
import { checkPath, realpathLoose } from "./workspace.js";

export interface ShellOptions {
  defaultTimeoutMs: number;
  /** The most a call may ask for with timeout_ms. */
  maxTimeoutMs: number;
  /** Bytes kept per stream and for the item's aggregated output; also the most streamed as deltas. */
  outputCapBytes: number;
  /** Bytes of output the model gets back (head + tail). */
  modelOutputBytes: number;
  killGraceMs: number;
  /** Who asked for the command: the model (`agent`) or the user's own `!command` (`userShell`). */
  source: "agent" | "userShell";
}

export const DEFAULT_SHELL_OPTIONS: ShellOptions = {
  defaultTimeoutMs: 120_000,
  maxTimeoutMs: 600_000,
  outputCapBytes: DEFAULT_OUTPUT_CAP_BYTES,
  modelOutputBytes: 32 * 1024,
  killGraceMs: DEFAULT_KILL_GRACE_MS,
  source: "agent",
};

export const ShellArgs = z.object({
  command: z.string().min(1, "must not be empty").describe("The command line, run with `bash -lc`."),
  workdir: z.string().optional().describe("Working directory for the command, relative to the workspace root (default: the workspace root)."),
  timeout_ms: z.number().positive().optional().describe("Timeout in milliseconds (default 120000, at most 600000). The whole process tree is killed when it expires."),
  sandbox_permissions: z
    .enum(["use_default", "require_escalated"])
    .optional()
    .describe('Where the command runs. Default `use_default`: inside the sandbox. `require_escalated`: outside it, after the user approves (give `justification`).'),
  justification: z.string().optional().describe('The question the user is asked for `require_escalated`, e.g. "Do you want to install the dependencies?"; omit otherwise.'),
  prefix_rule: z
    .array(z.string())
    .optional()
    .describe('With `require_escalated`: a command prefix the user may approve for later commands too, e.g. ["npm", "install"].'),
});
type ShellArgs = z.infer<typeof ShellArgs>;
type CommandItem = z.infer<typeof CommandExecutionItem>;

const DESCRIPTION = [
  "Runs a shell command with `bash -lc` in the workspace and returns its exit code and output (stdout and stderr interleaved).",
  "Long output is shortened to its beginning and end. Prefer read_file, list_dir and grep for reading and searching files, and apply_patch for editing them.",
  "Background processes do not outlive the command.",
  'Commands run inside the thread\'s sandbox. When one must run outside it — it writes outside the writable directories, needs the network, or failed because the sandbox stopped it — call shell again with sandbox_permissions "require_escalated" and a justification (a short question for the user); do not ask the user in a message first.',
  "Depending on the approval policy the user is asked, a saved rule approves it, or the request is refused.",
  'You may suggest a prefix_rule that would approve similar commands in future (e.g. ["cargo", "test"]); never one that starts with a shell, an interpreter running inline code, env, sudo or xargs, and none for destructive commands.',
].join(" ");

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} seconds`;

function modelText(run: RunResult, timeoutMs: number, opts: ShellOptions, clampedFrom: number | null): string {
  const lines: string[] = [];
  if (run.timedOut) lines.push(`Command timed out after ${timeoutMs} ms; its whole process group was killed.`);
  if (run.aborted) lines.push("Command was interrupted; its whole process group was killed.");
  if (clampedFrom !== null) lines.push(`(timeout_ms ${clampedFrom} was capped at ${opts.maxTimeoutMs}.)`);
  const code = run.exitCode;
  let codeNote = "";
  if (code === 127) codeNote = " (command not found)";
  else if (code === 126) codeNote = " (permission denied or not executable)";
  lines.push(`Exit code: ${code ?? "none"}${codeNote}`);
  lines.push(`Wall time: ${seconds(run.durationMs)}`);
  const shortened = truncateMiddle(run.combined.text, opts.modelOutputBytes);
  const total = run.combined.totalBytes;
  const cut = run.combined.omittedBytes > 0 || shortened.omittedBytes > 0;
  lines.push(cut ? `Output (${total} bytes in total; the middle was omitted):` : "Output:");
  lines.push(shortened.text === "" ? "(no output)" : shortened.text);
  return lines.join("\n");
}

async function resolveWorkdir(ctx: ToolContext, workdir: string | undefined): Promise<Workdir | ToolOutcome> {
  const real = await realpathLoose(ctx.cwd);
  let where: Workdir = { cwd: ctx.cwd, cwdReal: real, objection: null };
  let host = real;
  if (workdir !== undefined) {
    const check = await checkPath(ctx, workdir, "workdir");
    if (!check.ok && !check.outside) return textOutcome(`Cannot use workdir ${workdir}: ${check.reason}.`, true);
    where = { cwd: check.path!, cwdReal: check.real!, objection: check.ok ? null : `the working directory is not allowed: ${check.reason}` };
    host = check.host!; // where it is outside the sandbox (a private /tmp differs)
  }
  const st = await fs.stat(host).catch((err: NodeJS.ErrnoException) => err);
  if (st instanceof Error) {
    if (st.code === "ENOENT" || st.code === "ENOTDIR") return textOutcome(`Cannot run the command: the working directory ${where.cwd} does not exist.`, true);
    return textOutcome(`Cannot run the command: the working directory ${where.cwd} cannot be used (${st.code ?? st.message}).`, true);
  }
  if (!st.isDirectory()) return textOutcome(`Cannot run the command: ${where.cwd} is not a directory.`, true);
  return where;
}

function timeoutOf(args: ShellArgs, opts: ShellOptions): { timeoutMs: number; clampedFrom: number | null } {
  if (args.timeout_ms === undefined) return { timeoutMs: opts.defaultTimeoutMs, clampedFrom: null };
  const asked = Math.max(1, Math.floor(args.timeout_ms));
  return asked > opts.maxTimeoutMs ? { timeoutMs: opts.maxTimeoutMs, clampedFrom: asked } : { timeoutMs: asked, clampedFrom: null };
}

export function shellTool(ctx: ToolContext, options: Partial<ShellOptions> = {}): LoopTool {
  const opts = { ...DEFAULT_SHELL_OPTIONS, ...options };

  return hostTool(
    {
      name: "shell",
      description: DESCRIPTION,
      schema: ShellArgs,
      readOnly: false,
      async plan(args): Promise<ToolAction | ToolOutcome> {
        const where = await resolveWorkdir(ctx, args.workdir);
        if ("content" in where) return where;
        const mode = policyMode(ctx.approvalPolicy);
        const escalate = args.sandbox_permissions === "require_escalated";
        // As Codex: an escalation nobody can approve is refused before anything is recorded.
        if (escalate && mode === "never")
          return textOutcome(`Refused: ${ESCALATION_REFUSED}. It was not run. Work within the ${ctx.sandbox} sandbox (call shell without require_escalated), or tell the user what you need.`, true);

        const approvals = new CommandApprovals(ctx, args, where, opts.source === "agent");
        let plan = approvals.plan(mode, escalate, false);
        if (plan.gate.action === "ask" && (await approvals.rulesCover())) plan = approvals.plan(mode, escalate, true);
        if (plan.gate.action === "ask") await approvals.propose();

        const { timeoutMs, clampedFrom } = timeoutOf(args, opts);
        const invocation = shellInvocation(args.command);
        const commandActions = parseCommandActions(args.command, where.cwd);
        const draft: Omit<CommandItem, "id" | "startedAtMs"> = {
          type: "commandExecution",
          pluginId: null,
          scriptPath: null,
          command: invocation,
          cwd: where.cwd,
          processId: null,
          source: opts.source,
          status: "inProgress",
          commandActions,
          aggregatedOutput: null,
          exitCode: null,
          durationMs: null,
        };
        return {
          item: draft,
          gate: plan.gate,
          approval: (itemId, startedAtMs, reason) => ({
            kind: "command",
            params: { kind: "command", itemId, startedAtMs, environmentId: null, reason, command: invocation, cwd: where.cwd, commandActions, proposedExecpolicyAmendment: approvals.proposal },
          }),
          acceptedForSession: () => approvals.grantSession(plan.first),
          acceptedWithRule: () => approvals.saveRule(),
          notRun(why, reason, elapsedMs) {
            const text =
              why === "cancel"
                ? "The user cancelled this command; it was not run and the turn is ending."
                : why === "decline"
                  ? "The user declined to run this command; it was not run. Do not retry it unchanged; choose another approach or ask the user."
                  : `Refused to run this command: ${reason}. The approval policy is "never", so approval cannot be requested; work within the sandbox (${ctx.sandbox}).`;
            return { patch: { status: "declined", durationMs: elapsedMs }, outcome: textOutcome(text, true) };
          },
          execute: (host, signal) => runCommand({ ctx, opts, args, where, plan, approvals, timeoutMs, clampedFrom }, host, signal),
        };
      },
    },
    ctx,
  );
}

/** What one planned call runs with. */
interface CommandCall {
  ctx: ToolContext;
  opts: ShellOptions;
  args: ShellArgs;
  where: Workdir;
  plan: CommandPlan;
  approvals: CommandApprovals;
  timeoutMs: number;
  clampedFrom: number | null;
}

/** Runs the command: the first attempt where the plan says, then whatever follows a sandbox denial. */
async function runCommand(call: CommandCall, host: RunHandle, signal: AbortSignal): Promise<ToolResult> {
  const { ctx, opts, args, where, plan, approvals, timeoutMs, clampedFrom } = call;
  const item = host.item as CommandItem;
  const done = (patch: Partial<CommandItem>, outcome: ToolOutcome) => ({ patch: { durationMs: Date.now() - host.startedAtMs, ...patch }, outcome });
  let streamed = 0;
  const attempt = (sandbox: ResolvedSandbox | null) =>
    ctx.commands.run({
      argv: [BASH, "-lc", args.command],
      sandbox,
      cwd: where.cwdReal,
      env: { PAGER: "cat", GIT_PAGER: "cat" },
      timeoutMs,
      outputCapBytes: opts.outputCapBytes,
      killGraceMs: opts.killGraceMs,
      signal,
      onSpawn: (pid) => {
        item.processId = String(pid);
      },
      onOutput: (_stream, text) => {
        if (streamed >= opts.outputCapBytes) return;
        streamed += Buffer.byteLength(text);
        ctx.outputDelta(host.itemId, text);
      },
    });
  const workdirGranted = where.objection !== null && (approvals.sessionApproved || plan.gate.action === "ask");
  const first = await attempt(plan.first === "unsandboxed" ? null : await approvals.confinement(workdirGranted));
  if (!first.ran) {
    return done(
      { status: "failed", aggregatedOutput: `Not run: ${first.reason}.` },
      textOutcome(`Could not run the command: ${first.reason}. Tell the user to ${SANDBOX_HELP}, or to switch the thread to danger-full-access.`, true),
    );
  }
  const denied = first.sandboxed && !signal.aborted && looksLikeSandboxDenial(first.run);
  const after = denied ? await approvals.afterDenial(plan, host, () => attempt(null)) : { result: first, note: null, endTurn: false };
  const run = after.result.ran ? after.result.run : first.run;
  if (run.spawnError) {
    return done({ status: "failed", aggregatedOutput: run.spawnError.message, durationMs: run.durationMs }, textOutcome(`Could not start the command: ${run.spawnError.message}`, true));
  }
  const exitCode = run.timedOut ? 124 : run.exitCode;
  const ok = exitCode === 0 && !run.aborted;
  const notes = [after.note, approvals.savedNote()].filter((n) => n !== null);
  const outcome = textOutcome([modelText({ ...run, exitCode }, timeoutMs, opts, clampedFrom), ...notes].join("\n\n"), !ok);
  return done({ status: ok ? "completed" : "failed", aggregatedOutput: run.combined.text, exitCode, durationMs: run.durationMs }, after.endTurn ? { ...outcome, endTurn: true } : outcome);
}
