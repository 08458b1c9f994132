/**
 * Who decides whether an action runs: the approval policy and the sandbox (DESIGN.md §10).
 *
 * Every command runs inside the OS sandbox (src/sandbox) unless the thread is danger-full-access:
 * the sandbox, not this file, decides what a running command can touch. The policy decides what
 * is asked first, and when a command that failed inside the sandbox may run again outside it:
 *
 *   untrusted   ask before every command not on the read-only allow list and before every patch;
 *               after a sandbox denial, ask before running the command again without the sandbox
 *   on-request  ask only for what the checks below object to (a workdir outside the workspace, a
 *               patch outside the writable roots); a sandbox denial is reported to the model
 *   on-failure  as on-request, and after a sandbox denial ask before running it again unconfined
 *   never       never ask; what the checks object to is refused and reported to the model
 *   {granular}  on-request when `sandbox_approval` is set, otherwise never
 *
 * A key in the thread's session approvals (`command:<exact text>`, `file:<real path>`) counts
 * as an answer the user already gave: the action runs without asking again.
 */
import type { AskForApproval } from "../protocol/common.js";

export type Decision = { action: "run" } | { action: "ask"; reason: string } | { action: "refuse"; reason: string };

/** The three behaviours the policies reduce to. */
export type PolicyMode = "untrusted" | "on-request" | "never";

export function policyMode(policy: AskForApproval): PolicyMode {
  if (typeof policy === "object") return policy.granular.sandbox_approval ? "on-request" : "never";
  if (policy === "untrusted") return "untrusted";
  if (policy === "never") return "never";
  return "on-request";
}

export const commandApprovalKey = (command: string) => `command:${command}`;
/** acceptForSession on "run it again without the sandbox": that command skips the sandbox from then on. */
export const unsandboxedApprovalKey = (command: string) => `command-unsandboxed:${command}`;

/** Whether a command that failed inside the sandbox may be offered a run outside it (Codex: untrusted, on-failure). */
export function retriesOutsideSandbox(policy: AskForApproval): boolean {
  return policy === "untrusted" || policy === "on-failure";
}

/** What a command prints when the sandbox stopped it (Codex keys its retry prompt on the same kind of text). */
const DENIAL_HINTS = /read-only file system|operation not permitted|permission denied|network is unreachable|could not resolve host|temporary failure in name resolution|name or service not known|connection refused/i;

/** A failed run whose output looks like the sandbox stopped it (not a timeout or an interrupt). */
export function looksLikeSandboxDenial(run: { exitCode: number | null; timedOut: boolean; aborted: boolean; combined: { text: string } }): boolean {
  return run.exitCode !== 0 && !run.timedOut && !run.aborted && DENIAL_HINTS.test(run.combined.text);
}
export const fileApprovalKey = (realPath: string) => `file:${realPath}`;

export interface CommandFacts {
  policy: AskForApproval;
  sessionApproved: boolean;
  /** On the read-only allow list. */
  readOnly: boolean;
  /** Why the sandbox would not allow it, or null when it does. */
  sandboxObjection: string | null;
}

export function decideCommand(f: CommandFacts): Decision {
  if (f.sessionApproved) return { action: "run" };
  switch (policyMode(f.policy)) {
    case "untrusted":
      if (f.readOnly && f.sandboxObjection === null) return { action: "run" };
      return { action: "ask", reason: f.sandboxObjection ?? "the approval policy is untrusted and this command is not on the read-only allow list" };
    case "on-request":
      return f.sandboxObjection === null ? { action: "run" } : { action: "ask", reason: f.sandboxObjection };
    case "never":
      return f.sandboxObjection === null ? { action: "run" } : { action: "refuse", reason: f.sandboxObjection };
  }
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
      return objection === null ? { action: "run" } : { action: "ask", reason: objection };
    case "never":
      return objection === null ? { action: "run" } : { action: "refuse", reason: objection };
  }
}
