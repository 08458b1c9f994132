/**
 * Who decides whether an action runs: the approval policy and the sandbox (DESIGN.md §10).
 *
 *   untrusted   ask before every command not on the read-only allow list and before every patch
 *   on-request  ask only for what the sandbox does not allow
 *   on-failure  accepted; behaves as on-request (we have no OS sandbox whose failures could trigger a retry)
 *   never       never ask; what the sandbox does not allow is refused and reported to the model
 *   {granular}  on-request when `sandbox_approval` is set, otherwise never
 *
 * What the sandbox allows without asking:
 *   read-only           commands on the read-only allow list (run in a readable directory); no writes
 *   workspace-write     any command whose working directory is inside the writable roots; writes there.
 *                       LIMITATION: there is no OS-level sandbox, so a command that was allowed can
 *                       still write anywhere the server's user can. Only the working directory is checked.
 *   danger-full-access  everything
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
