/**
 * ACP session modes: the four approval/sandbox presets an editor can switch between
 * (`session/set_mode`, or the `mode` config option). Each is a pair of the thread's Codex settings,
 * so a mode is never a second policy: the server's approval policy and sandbox decide everything.
 *
 *   read-only    on-request + read-only          reads and answers; asks before an edit and before
 *                                                a command the model wants to run unsandboxed
 *   ask          untrusted + workspace-write     asks before every command (but a few read-only
 *                                                ones) and before every edit
 *   auto         on-request + workspace-write    works in the workspace; asks only for what the
 *                                                sandbox does not allow (the server's default)
 *   full-access  never + danger-full-access      no sandbox, never asks
 */
import type { SessionMode, SessionModeState } from "@agentclientprotocol/sdk/unstable";
import type { AskForApproval, SandboxMode, SandboxPolicy } from "../protocol/common.js";

export const MODE_IDS = ["read-only", "ask", "auto", "full-access"] as const;
export type ModeId = (typeof MODE_IDS)[number];

interface ModePreset {
  id: ModeId;
  name: string;
  description: string;
  approvalPolicy: AskForApproval;
  sandbox: SandboxMode;
}

const PRESETS: readonly ModePreset[] = [
  {
    id: "read-only",
    name: "Read Only",
    description: "Reads files and answers; asks before any edit, and before a command that needs more than reading (sandbox read-only, no network)",
    approvalPolicy: "on-request",
    sandbox: "read-only",
  },
  {
    id: "ask",
    name: "Ask",
    description: "Asks before every command (except a few read-only ones) and before every edit (sandbox workspace-write)",
    approvalPolicy: "untrusted",
    sandbox: "workspace-write",
  },
  {
    id: "auto",
    name: "Auto",
    description: "Edits and runs commands in the workspace; asks only for what the sandbox does not allow",
    approvalPolicy: "on-request",
    sandbox: "workspace-write",
  },
  {
    id: "full-access",
    name: "Full Access",
    description: "No sandbox and no questions: commands and edits run anywhere, with network access",
    approvalPolicy: "never",
    sandbox: "danger-full-access",
  },
];

export const DEFAULT_MODE: ModeId = "auto";

export function isModeId(id: string): id is ModeId {
  return (MODE_IDS as readonly string[]).includes(id);
}

export function preset(id: ModeId): ModePreset {
  return PRESETS.find((p) => p.id === id)!;
}

/** The thread settings of a mode, for thread/start. */
export function threadSettingsOf(id: ModeId): { approvalPolicy: AskForApproval; sandbox: SandboxMode } {
  const p = preset(id);
  return { approvalPolicy: p.approvalPolicy, sandbox: p.sandbox };
}

/**
 * The settings of a mode for turn/start (which takes a sandbox policy, not a mode): extra
 * workspace roots (the session's additional directories) stay writable under workspace-write.
 */
export function turnSettingsOf(id: ModeId, writableRoots: string[]): { approvalPolicy: AskForApproval; sandboxPolicy: SandboxPolicy } {
  const p = preset(id);
  const sandboxPolicy: SandboxPolicy =
    p.sandbox === "danger-full-access"
      ? { type: "dangerFullAccess" }
      : p.sandbox === "read-only"
        ? { type: "readOnly", networkAccess: false }
        : { type: "workspaceWrite", writableRoots, networkAccess: false, excludeTmpdirEnvVar: false, excludeSlashTmp: false };
  return { approvalPolicy: p.approvalPolicy, sandboxPolicy };
}

/**
 * The mode a thread's settings amount to, for a thread started elsewhere (the TUI, the
 * playground) or by an earlier session: by its sandbox, and for the workspace sandbox by whether
 * it asks before every command. Settings no preset has (on-failure, granular) read as the preset
 * with the same sandbox; the next mode switch sets a preset's settings exactly.
 */
export function modeOfSettings(approvalPolicy: AskForApproval, sandbox: SandboxPolicy): ModeId {
  if (sandbox.type === "dangerFullAccess") return "full-access";
  if (sandbox.type === "readOnly") return "read-only";
  return approvalPolicy === "untrusted" ? "ask" : "auto";
}

export function availableModes(): SessionMode[] {
  return PRESETS.map((p) => ({ id: p.id, name: p.name, description: p.description }));
}

export function modeState(current: ModeId): SessionModeState {
  return { currentModeId: current, availableModes: availableModes() };
}
