/**
 * Per-thread settings overrides (turn/start, thread/resume, thread/fork). The system prompt is
 * fixed at thread start, so a change is recorded by appending one developer message that states
 * the new settings at that point of the history (DESIGN.md §5).
 */
import { settingsChanged, type EnvironmentSettings } from "../agent/prompt.js";
import type { DeveloperMessage } from "../agent/messages.js";
import type { AskForApproval, SandboxMode, SandboxPolicy } from "../protocol/common.js";
import type { ThreadRecord } from "../store/records.js";

export interface SettingsOverrides {
  model?: string | null;
  modelProvider?: string | null;
  cwd?: string | null;
  approvalPolicy?: AskForApproval | null;
  sandbox?: SandboxMode | null;
  sandboxPolicy?: SandboxPolicy | null;
  effort?: string | null;
  baseInstructions?: string | null;
  developerInstructions?: string | null;
}

export function sandboxModeOf(policy: SandboxPolicy): SandboxMode {
  return policy.type === "dangerFullAccess" ? "danger-full-access" : policy.type === "readOnly" ? "read-only" : "workspace-write";
}

export function applyOverrides(r: ThreadRecord, o: SettingsOverrides): ThreadRecord {
  return {
    ...r,
    model: o.model ?? r.model,
    modelProvider: o.modelProvider ?? r.modelProvider,
    reasoningEffort: o.effort ?? r.reasoningEffort,
    cwd: o.cwd ?? r.cwd,
    approvalPolicy: o.approvalPolicy ?? r.approvalPolicy,
    sandbox: o.sandboxPolicy ? sandboxModeOf(o.sandboxPolicy) : (o.sandbox ?? r.sandbox),
    // A bare mode that changes the mode replaces the policy with that mode's defaults.
    sandboxPolicy: o.sandboxPolicy ?? (o.sandbox && o.sandbox !== r.sandbox ? null : r.sandboxPolicy),
  };
}

export function environmentOf(r: Pick<ThreadRecord, "cwd" | "approvalPolicy" | "sandbox">, shell: string): EnvironmentSettings {
  const policy = typeof r.approvalPolicy === "string" ? r.approvalPolicy : "granular";
  return { cwd: r.cwd, approvalPolicy: policy, sandbox: r.sandbox, shell };
}

/** The developer message announcing what changed between two settings, or null when nothing did. */
export function settingsMessage(before: ThreadRecord, after: ThreadRecord, shell: string, o: SettingsOverrides = {}): DeveloperMessage | null {
  const a = environmentOf(before, shell);
  const b = environmentOf(after, shell);
  const changed: Partial<EnvironmentSettings> & { instructions?: string } = {};
  if (a.cwd !== b.cwd) changed.cwd = b.cwd;
  if (a.approvalPolicy !== b.approvalPolicy) changed.approvalPolicy = b.approvalPolicy;
  if (a.sandbox !== b.sandbox) changed.sandbox = b.sandbox;
  const instructions = [o.baseInstructions, o.developerInstructions].filter((x): x is string => typeof x === "string" && x.length > 0);
  if (instructions.length) changed.instructions = instructions.join("\n\n");
  return Object.keys(changed).length ? settingsChanged(changed) : null;
}
