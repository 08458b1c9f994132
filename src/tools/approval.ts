/**
 * Who decides whether an action runs: the approval policy and the sandbox (DESIGN.md §10; the full
 * table is docs/approvals.md).
 *
 * Every command runs inside the OS sandbox (src/sandbox) unless the thread is danger-full-access
 * or the command runs escalated: the sandbox, not this file, decides what a running command can
 * touch. This file decides what is asked first, where the first attempt runs, and what happens
 * when the sandbox denies it — one prompt per command at most:
 *
 *   untrusted   ask before every command not on the read-only allow list and before every patch;
 *               an approved command that the sandbox denies runs again outside it without asking
 *               again; a denied allow-listed command is offered one run outside it
 *   on-request  ask only for what the model asks for (sandbox_permissions "require_escalated":
 *               the justification is the prompt's reason, and accepted it runs outside the
 *               sandbox) and for what the checks object to (a workdir or a patch outside the
 *               writable roots); a sandbox denial is reported to the model
 *   on-failure  as on-request, but a sandbox denial is offered one run outside the sandbox (no
 *               prompt when the command was already approved)
 *   never       never ask; an escalation request and what the checks object to are refused and
 *               reported to the model
 *   {granular}  on-request when `sandbox_approval` is set, otherwise never
 *
 * "Approved already" is: this call's prompt, a session approval (`acceptForSession`, keyed on the
 * command, its working directory and the sandbox it was approved for), or a saved rule
 * (execpolicy.ts). A rule answers only questions about the command itself, never a workdir's.
 */
import type { AskForApproval, SandboxPolicy } from "../protocol/common.js";

export type Decision = { action: "run" } | { action: "ask"; reason: string } | { action: "refuse"; reason: string };

export type PolicyMode = "untrusted" | "on-request" | "on-failure" | "never";

export function policyMode(policy: AskForApproval): PolicyMode {
  if (typeof policy === "object") return policy.granular.sandbox_approval ? "on-request" : "never";
  return policy;
}

/** Where a command runs: inside the thread's sandbox, or outside any. */
export type Confinement = "sandboxed" | "unsandboxed";

/** The sandbox a session approval was given for, as a stable string; "unsandboxed" for none. */
export function sandboxFingerprint(policy: SandboxPolicy): string {
  switch (policy.type) {
    case "dangerFullAccess":
      return "unsandboxed";
    case "readOnly":
      return JSON.stringify(["read-only", policy.networkAccess]);
    case "workspaceWrite":
      return JSON.stringify(["workspace-write", [...policy.writableRoots].sort(), policy.networkAccess, policy.excludeTmpdirEnvVar, policy.excludeSlashTmp]);
  }
}

/** A session approval of a command: what was shown (the command and its working directory) and the sandbox it covers. */
export const commandApprovalKey = (command: string, cwd: string, sandbox: string) => `command:${JSON.stringify([command, cwd, sandbox])}`;
export const fileApprovalKey = (realPath: string) => `file:${realPath}`;

/** What a command prints when the sandbox stopped it (Codex keys its retry prompt on the same kind of text). */
const DENIAL_HINTS = /read-only file system|operation not permitted|permission denied|network is unreachable|could not resolve host|temporary failure in name resolution|name or service not known|connection refused/i;

/** A failed run whose output looks like the sandbox stopped it (not a timeout or an interrupt). */
export function looksLikeSandboxDenial(run: { exitCode: number | null; timedOut: boolean; aborted: boolean; combined: { text: string } }): boolean {
  return run.exitCode !== 0 && !run.timedOut && !run.aborted && DENIAL_HINTS.test(run.combined.text);
}

export interface CommandFacts {
  mode: PolicyMode;
  /** The thread has a sandbox (not danger-full-access). */
  sandboxed: boolean;
  /** The model asked to run the command outside the sandbox (`require_escalated`). */
  escalate: boolean;
  justification: string | null;
  /** On the read-only allow list. */
  readOnly: boolean;
  /** Why the checks object to the workdir, or null. */
  workdirObjection: string | null;
  /** A session approval covers this command here, in this sandbox. */
  sessionApproved: boolean;
  /** Saved rules cover the command. */
  ruleApproved: boolean;
  /** The thread's sandbox mode, for reasons. */
  sandboxName: string;
}

export interface CommandPlan {
  gate: Decision;
  first: Confinement;
  /** After a sandbox denial of the first attempt: tell the model, run again outside, or ask first. */
  afterDenial: "report" | "retry" | "ask";
}

export const ESCALATION_REFUSED =
  'this command asks to run outside the sandbox (sandbox_permissions "require_escalated"), but the approval policy is "never", so nobody can approve that';

export function planCommand(f: CommandFacts): CommandPlan {
  const escalated = f.escalate && f.sandboxed;
  const first: Confinement = f.sandboxed && !escalated ? "sandboxed" : "unsandboxed";
  // A rule answers questions about the command, never about where it runs (the workdir).
  const approved = f.sessionApproved || (f.ruleApproved && f.workdirObjection === null);
  let gate: Decision;
  if (f.mode === "never") {
    if (f.escalate) gate = { action: "refuse", reason: ESCALATION_REFUSED };
    else gate = f.workdirObjection === null || f.sessionApproved ? { action: "run" } : { action: "refuse", reason: f.workdirObjection };
  } else if (approved) gate = { action: "run" };
  else if (escalated) {
    gate = { action: "ask", reason: f.justification ?? `the command asks to run outside the ${f.sandboxName} sandbox` };
  } else if (f.workdirObjection !== null) gate = { action: "ask", reason: f.workdirObjection };
  else if (f.mode === "untrusted" && (!f.readOnly || f.escalate))
    gate = { action: "ask", reason: (f.escalate ? f.justification : null) ?? "the approval policy is untrusted and this command is not on the read-only allow list" };
  else gate = { action: "run" };
  const retries = f.mode === "untrusted" || f.mode === "on-failure";
  const afterDenial = !retries || first === "unsandboxed" ? "report" : approved || gate.action === "ask" ? "retry" : "ask";
  return { gate, first, afterDenial };
}

export interface PatchFacts {
  policy: AskForApproval;
  /** Every file the patch touches is already approved for the session. */
  allSessionApproved: boolean;
  /** Why the sandbox would not allow writing some of the files (not counting session-approved ones). */
  sandboxObjections: string[];
}

export function decidePatch(f: PatchFacts): Decision {
  const objection = f.sandboxObjections.length ? f.sandboxObjections.join("; ") : null;
  if (f.allSessionApproved) return { action: "run" };
  switch (policyMode(f.policy)) {
    case "untrusted":
      return { action: "ask", reason: objection ?? "the approval policy is untrusted: every patch needs approval" };
    case "on-request":
    case "on-failure":
      return objection === null ? { action: "run" } : { action: "ask", reason: objection };
    case "never":
      return objection === null ? { action: "run" } : { action: "refuse", reason: objection };
  }
}
