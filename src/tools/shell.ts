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
import { commandApprovalKey, ESCALATION_REFUSED, looksLikeSandboxDenial, planCommand, policyMode, sandboxFingerprint, type CommandPlan, type Confinement } from "./approval.js";
import { isReadOnlyCommand, parseCommandActions } from "./command-parse.js";
import type { ApprovalAnswer, ToolContext } from "./context.js";
import { proposeRule, rulesCover, type RulePattern } from "./execpolicy.js";
import { hostTool, type RunHandle, type ToolAction } from "./host.js";
import { DEFAULT_KILL_GRACE_MS, DEFAULT_OUTPUT_CAP_BYTES, truncateMiddle, type RunResult } from "./process.js";
import { BASH, shellInvocation } from "./shell-invocation.js";
import { resolveSandbox, type ResolvedSandbox } from "../sandbox/policy.js";
import { SANDBOX_HELP, type CommandResult } from "../sandbox/runner.js";
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

interface Workdir {
  cwd: string;
  cwdReal: string;
  /** Why the checks object to it (it lies outside the roots), or null. */
  objection: string | null;
}

async function resolveWorkdir(ctx: ToolContext, workdir: string | undefined): Promise<Workdir | ToolOutcome> {
  let where: Workdir = { cwd: ctx.cwd, cwdReal: await realpathLoose(ctx.cwd), objection: null };
  if (workdir !== undefined) {
    const check = await checkPath(ctx, workdir, "read");
    if (!check.ok && !check.outside) return textOutcome(`Cannot use workdir ${workdir}: ${check.reason}.`, true);
    where = { cwd: check.path!, cwdReal: check.real!, objection: check.ok ? null : `the working directory is not allowed: ${check.reason}` };
  }
  const st = await fs.stat(where.cwdReal).catch(() => null);
  if (st === null) return textOutcome(`Cannot run the command: the working directory ${where.cwd} does not exist.`, true);
  if (!st.isDirectory()) return textOutcome(`Cannot run the command: ${where.cwd} is not a directory.`, true);
  return where;
}

function timeoutOf(args: ShellArgs, opts: ShellOptions): { timeoutMs: number; clampedFrom: number | null } {
  if (args.timeout_ms === undefined) return { timeoutMs: opts.defaultTimeoutMs, clampedFrom: null };
  const asked = Math.max(1, Math.floor(args.timeout_ms));
  return asked > opts.maxTimeoutMs ? { timeoutMs: opts.maxTimeoutMs, clampedFrom: asked } : { timeoutMs: asked, clampedFrom: null };
}

const isAccept = (a: ApprovalAnswer) => a === "accept" || a === "acceptForSession" || a === "acceptWithExecpolicyAmendment";

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
          async execute(host, signal) {
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
          },
        };
      },
    },
    ctx,
  );
}

/** One call's approvals: its session key, the saved rules, the rule it proposes, the retry after a denial. */
class CommandApprovals {
  /** The rule `acceptWithExecpolicyAmendment` saves (shown as proposedExecpolicyAmendment). */
  proposal: string[] | null = null;
  private saved: string[] | null = null;
  private rules: RulePattern[] | null = null;
  readonly sessionApproved: boolean;

  constructor(
    private readonly ctx: ToolContext,
    private readonly args: ShellArgs,
    private readonly where: Workdir,
    /** Whether the model gets hints after a denial (not for the user's own `!command`). */
    private readonly hints: boolean,
  ) {
    // A session approval covers what was shown — the command, its working directory — and the
    // sandbox it was given for; one to run outside the sandbox covers running inside it too.
    const escalated = args.sandbox_permissions === "require_escalated" && ctx.sandbox !== "danger-full-access";
    this.sessionApproved = this.ctx.sessionApprovals.has(this.key(escalated ? "unsandboxed" : "sandboxed")) || this.ctx.sessionApprovals.has(this.key("unsandboxed"));
  }

  private key(confinement: Confinement): string {
    return commandApprovalKey(this.args.command, this.where.cwdReal, confinement === "unsandboxed" ? "unsandboxed" : sandboxFingerprint(this.ctx.sandboxPolicy));
  }

  plan(mode: ReturnType<typeof policyMode>, escalate: boolean, ruleApproved: boolean): CommandPlan {
    return planCommand({
      mode,
      sandboxed: this.ctx.sandbox !== "danger-full-access",
      escalate,
      justification: this.args.justification?.trim() || null,
      readOnly: isReadOnlyCommand(this.args.command),
      workdirObjection: this.where.objection,
      sessionApproved: this.sessionApproved,
      ruleApproved,
      sandboxName: this.ctx.sandbox,
    });
  }

  /** Saved rules are read only when a question is due (they live in the database). */
  private async savedRules(): Promise<RulePattern[]> {
    return (this.rules ??= await this.ctx.execPolicy.patterns());
  }

  async rulesCover(): Promise<boolean> {
    return rulesCover(this.args.command, await this.savedRules());
  }

  /** Chooses the rule to offer; none for a question about the workdir (a rule would not answer it next time). */
  async propose(): Promise<void> {
    this.proposal = this.where.objection === null ? proposeRule(this.args.command, this.args.prefix_rule, await this.savedRules()) : null;
  }

  grantSession(confinement: Confinement): void {
    this.ctx.sessionApprovals.add(this.key(confinement));
  }

  async saveRule(): Promise<void> {
    if (!this.proposal) return;
    await this.ctx.execPolicy.add(this.proposal);
    this.saved = this.proposal;
  }

  savedNote(): string | null {
    if (!this.saved) return null;
    return `The user saved a rule: commands that start with ${JSON.stringify(this.saved)} are approved from now on without asking (one that must run outside the sandbox still needs sandbox_permissions "require_escalated").`;
  }

  /** The thread's sandbox for the first attempt; an accepted workdir outside the writable roots is writable for this command. */
  async confinement(workdirGranted: boolean): Promise<ResolvedSandbox> {
    const sandbox = await resolveSandbox(this.ctx.sandboxPolicy, this.ctx.cwd);
    if (workdirGranted && sandbox?.mode === "workspace-write" && !sandbox.writableRoots.includes(this.where.cwdReal))
      return { ...sandbox, writableRoots: [...sandbox.writableRoots, this.where.cwdReal] };
    return sandbox;
  }

  /**
   * After the sandbox denied the first attempt: run again outside it when already approved, ask
   * first when the policy offers that (one question; a saved rule answers it), or tell the model.
   */
  async afterDenial(plan: CommandPlan, host: RunHandle, unsandboxed: () => Promise<CommandResult>): Promise<{ result: CommandResult | { ran: false }; note: string | null; endTurn: boolean }> {
    const again = async () => {
      this.ctx.outputDelta(host.itemId, "\n[running again without the sandbox]\n");
      const result = await unsandboxed();
      if (!result.ran) throw new Error("an unconfined command cannot be refused by the sandbox");
      return { result, note: null, endTurn: false };
    };
    if (plan.afterDenial === "retry") return again();
    if (plan.afterDenial === "report") return { result: { ran: false }, note: this.denialHint(), endTurn: false };
    if (await this.rulesCover()) return again();
    this.proposal = proposeRule(this.args.command, this.args.prefix_rule, await this.savedRules());
    const answer = await host.ask(`the command failed inside the ${this.ctx.sandbox} sandbox; accept to run it again without the sandbox`);
    if (answer === "acceptForSession") this.grantSession("unsandboxed");
    if (answer === "acceptWithExecpolicyAmendment") await this.saveRule();
    if (isAccept(answer)) return again();
    const note =
      answer === "cancel"
        ? "The user cancelled running it again outside the sandbox; the turn is ending."
        : "The user declined to run it again outside the sandbox. Do not retry it unchanged; choose another approach or ask the user.";
    return { result: { ran: false }, note, endTurn: answer === "cancel" };
  }

  /** What the model is told after a denial it may act on (the model's commands under on-request). */
  private denialHint(): string | null {
    if (!this.hints) return null;
    const mode = policyMode(this.ctx.approvalPolicy);
    if (mode === "never")
      return `This looks like the ${this.ctx.sandbox} sandbox stopped the command. The approval policy is "never": it cannot run outside the sandbox, so work within it.`;
    if (mode !== "on-request" || this.args.sandbox_permissions === "require_escalated") return null;
    return `This looks like the ${this.ctx.sandbox} sandbox stopped the command. If it must run outside the sandbox, call shell again with the same command, sandbox_permissions "require_escalated" and a justification (the question the user is asked).`;
  }
}
