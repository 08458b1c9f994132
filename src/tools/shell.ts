/**
 * The `shell` tool: `bash -lc <command>` through the command runner (inside the OS sandbox unless
 * the thread is danger-full-access), as a `commandExecution` item with live output deltas, bounded
 * output, a timeout, and approvals per policy (see approval.ts for the rules). The item's lifecycle
 * and the approval round trip are the tool host's (host.ts); this file plans and runs the command.
 */
import { promises as fs } from "node:fs";
import { z } from "zod";
import { textOutcome, type LoopTool, type ToolOutcome } from "../agent/tools.js";
import type { CommandExecutionItem } from "../protocol/items.js";
import { commandApprovalKey, decideCommand, looksLikeSandboxDenial, retriesOutsideSandbox, unsandboxedApprovalKey } from "./approval.js";
import { isReadOnlyCommand, parseCommandActions } from "./command-parse.js";
import type { ToolContext } from "./context.js";
import { hostTool, type ToolAction } from "./host.js";
import { DEFAULT_KILL_GRACE_MS, DEFAULT_OUTPUT_CAP_BYTES, truncateMiddle, type RunResult } from "./process.js";
import { resolveSandbox, type ResolvedSandbox } from "../sandbox/policy.js";
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
});
type CommandItem = z.infer<typeof CommandExecutionItem>;

const DESCRIPTION = [
  "Runs a shell command with `bash -lc` in the workspace and returns its exit code and output (stdout and stderr interleaved).",
  "Long output is shortened to its beginning and end. Prefer read_file, list_dir and grep for reading and searching files, and apply_patch for editing them.",
  "Background processes do not outlive the command.",
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

export function shellTool(ctx: ToolContext, options: Partial<ShellOptions> = {}): LoopTool {
  const opts = { ...DEFAULT_SHELL_OPTIONS, ...options };

  return hostTool(
    {
      name: "shell",
      description: DESCRIPTION,
      schema: ShellArgs,
      readOnly: false,
      async plan(args): Promise<ToolAction | ToolOutcome> {
        // Where it runs.
        let cwd = ctx.cwd;
        let cwdReal: string;
        let cwdHost: string;
        let workdirObjection: string | null = null;
        if (args.workdir !== undefined) {
          const check = await checkPath(ctx, args.workdir, "workdir");
          if (!check.ok && !check.outside) return textOutcome(`Cannot use workdir ${args.workdir}: ${check.reason}.`, true);
          if (!check.ok) workdirObjection = `the working directory is not allowed: ${check.reason}`;
          cwd = check.path!;
          cwdReal = check.real!;
          cwdHost = check.host!; // where it is outside the sandbox (a private /tmp differs)
        } else {
          cwdReal = cwdHost = await realpathLoose(ctx.cwd);
        }
        const st = await fs.stat(cwdHost).catch(() => null);
        if (st === null) return textOutcome(`Cannot run the command: the working directory ${cwd} does not exist.`, true);
        if (!st.isDirectory()) return textOutcome(`Cannot run the command: ${cwd} is not a directory.`, true);

        // Whether it may run without asking. What the command may touch is the OS sandbox's job
        // (every command runs confined unless the thread is danger-full-access); the approval policy
        // only decides what to ask first.
        const readOnly = isReadOnlyCommand(args.command);
        const objection = workdirObjection;
        const key = commandApprovalKey(args.command);
        let workdirGranted = ctx.sessionApprovals.has(key) && objection !== null;
        const gate = decideCommand({ policy: ctx.approvalPolicy, sessionApproved: ctx.sessionApprovals.has(key), readOnly, sandboxObjection: objection });
        if (gate.action === "ask") workdirGranted = objection !== null; // asked: an accept grants the workdir too

        let timeoutMs = opts.defaultTimeoutMs;
        let clampedFrom: number | null = null;
        if (args.timeout_ms !== undefined) {
          timeoutMs = Math.max(1, Math.floor(args.timeout_ms));
          if (timeoutMs > opts.maxTimeoutMs) {
            clampedFrom = timeoutMs;
            timeoutMs = opts.maxTimeoutMs;
          }
        }
        const commandActions = parseCommandActions(args.command, cwd);
        const draft: Omit<CommandItem, "id" | "startedAtMs"> = {
          type: "commandExecution",
          pluginId: null,
          scriptPath: null,
          command: args.command,
          cwd,
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
          gate,
          approval: (itemId, startedAtMs, reason) => ({
            kind: "command",
            params: { kind: "command", itemId, startedAtMs, environmentId: null, reason, command: args.command, cwd, commandActions },
          }),
          acceptedForSession: () => ctx.sessionApprovals.add(key),
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
            // Run it: confined, and after a sandbox denial outside the sandbox if the policy asks for that.
            let confinement = ctx.sessionApprovals.has(unsandboxedApprovalKey(args.command)) ? null : await resolveSandbox(ctx.sandboxPolicy, ctx.cwd, { tmpScope: ctx.threadId });
            // An accepted workdir outside the writable roots is granted for this command: writable there.
            if (workdirGranted && confinement?.mode === "workspace-write" && !confinement.writableRoots.includes(cwdReal))
              confinement = { ...confinement, writableRoots: [...confinement.writableRoots, cwdReal] };
            let streamed = 0;
            const attempt = (sandbox: ResolvedSandbox) =>
              ctx.commands.run({
                argv: ["bash", "-lc", args.command],
                sandbox,
                cwd: cwdReal,
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
            let result = await attempt(confinement);
            if (!result.ran) {
              return done(
                { status: "failed", aggregatedOutput: `Not run: ${result.reason}.` },
                textOutcome(`Could not run the command: ${result.reason}. Tell the user to ${SANDBOX_HELP}, or to switch the thread to danger-full-access.`, true),
              );
            }
            if (result.sandboxed && !signal.aborted && retriesOutsideSandbox(ctx.approvalPolicy) && looksLikeSandboxDenial(result.run)) {
              const answer = await host.ask(`the command failed inside the ${ctx.sandbox} sandbox (exit code ${result.run.exitCode}); accept to run it again without the sandbox`);
              if (answer === "acceptForSession") ctx.sessionApprovals.add(unsandboxedApprovalKey(args.command));
              if (answer === "accept" || answer === "acceptForSession") {
                ctx.outputDelta(host.itemId, "\n[running again without the sandbox]\n");
                result = await attempt(null);
                if (!result.ran) throw new Error("an unconfined command cannot be refused by the sandbox");
              }
            }
            const run = result.run;
            if (run.spawnError) {
              return done({ status: "failed", aggregatedOutput: run.spawnError.message, durationMs: run.durationMs }, textOutcome(`Could not start the command: ${run.spawnError.message}`, true));
            }
            const exitCode = run.timedOut ? 124 : run.exitCode;
            const ok = exitCode === 0 && !run.aborted;
            return done(
              { status: ok ? "completed" : "failed", aggregatedOutput: run.combined.text, exitCode, durationMs: run.durationMs },
              textOutcome(modelText({ ...run, exitCode }, timeoutMs, opts, clampedFrom), !ok),
            );
          },
        };
      },
    },
    ctx,
  );
}
