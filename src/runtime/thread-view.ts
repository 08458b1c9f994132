/** Builds protocol objects (Thread, settings responses) from stored records. */
import type { SandboxPolicy, ThreadStatus } from "../protocol/common.js";
import type { Thread, ThreadStartResponse, Turn } from "../protocol/thread.js";
import type { ThreadRecord } from "../store/records.js";
import { activeProfile } from "./permissions.js";

const seconds = (ms: number) => Math.floor(ms / 1000);

export function threadView(r: ThreadRecord, status: ThreadStatus, turns: Turn[] = []): Thread {
  return {
    id: r.id,
    sessionId: r.sessionId,
    forkedFromId: r.forkedFromId,
    parentThreadId: null,
    preview: r.preview,
    ephemeral: r.ephemeral,
    section: null,
    sectionEnteredAt: null,
    projectId: null,
    historyMode: "legacy",
    modelProvider: r.modelProvider,
    model: r.model,
    reasoningEffort: r.reasoningEffort,
    createdAt: seconds(r.createdAtMs),
    updatedAt: seconds(r.updatedAtMs),
    recencyAt: seconds(r.updatedAtMs),
    status,
    path: null,
    cwd: r.cwd,
    cliVersion: r.cliVersion,
    originator: null,
    source: r.source as Thread["source"],
    threadSource: null,
    agentNickname: null,
    agentRole: null,
    gitInfo: null,
    name: r.name,
    turns,
  };
}

/** Codex reports the sandbox as a policy object: the stored one, or the mode's defaults. */
export function sandboxPolicy(r: Pick<ThreadRecord, "sandbox" | "cwd" | "sandboxPolicy">): SandboxPolicy {
  if (r.sandboxPolicy) return r.sandboxPolicy;
  switch (r.sandbox) {
    case "danger-full-access":
      return { type: "dangerFullAccess" };
    case "read-only":
      return { type: "readOnly", networkAccess: false };
    default:
      return { type: "workspaceWrite", writableRoots: [r.cwd], networkAccess: false, excludeTmpdirEnvVar: false, excludeSlashTmp: false };
  }
}

export function settingsResponse(thread: Thread, r: ThreadRecord): ThreadStartResponse {
  return {
    thread,
    model: r.model,
    modelProvider: r.modelProvider,
    serviceTier: null,
    disabledPluginIds: [],
    cwd: r.cwd,
    instructionSources: [],
    approvalPolicy: r.approvalPolicy,
    approvalsReviewer: "user",
    sandbox: sandboxPolicy(r),
    activePermissionProfile: activeProfile(r),
    reasoningEffort: r.reasoningEffort,
  };
}
