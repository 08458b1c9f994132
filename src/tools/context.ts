/**
 * What a tool may do besides computing its result: record and announce its item, stream output,
 * report the turn's diff and plan, and ask the thread's clients something (a dynamic tool call,
 * an approval). The turn runner implements it; tools never see JSON-RPC or SQL.
 */
import type { ToolCallBlock } from "../agent/messages.js";
import type { AskForApproval, SandboxMode, SandboxPolicy } from "../protocol/common.js";
import type { ClientReply } from "../protocol/jsonrpc.js";
import type { CommandRunner } from "../sandbox/runner.js";
import type { ThreadItem } from "../protocol/items.js";
import type { ApprovalDecision, CommandExecutionRequestApprovalParams, FileChangeRequestApprovalParams } from "../protocol/tools.js";
import type { RulePattern } from "./execpolicy.js";

export type PlanStepStatus = "pending" | "inProgress" | "completed";

/** An approval question; the runtime adds threadId, turnId and the decisions it accepts. */
export type ApprovalRequest =
  | { kind: "command"; params: Omit<CommandExecutionRequestApprovalParams, "threadId" | "turnId" | "availableDecisions"> }
  | { kind: "fileChange"; params: Omit<FileChangeRequestApprovalParams, "threadId" | "turnId"> };

/**
 * What the user answered. `acceptWithExecpolicyAmendment` means: accept, and save the rule the
 * request proposed (an answer naming any other rule counts as `decline`).
 */
export type ApprovalAnswer = ApprovalDecision | "acceptWithExecpolicyAmendment";

/** The saved approval rules (src/tools/execpolicy.ts), shared by every process of the server. */
export interface ExecPolicyRules {
  patterns(): Promise<RulePattern[]>;
  /** Saves an allow rule accepted in this thread. */
  add(pattern: RulePattern): Promise<void>;
}

export interface ToolContext {
  readonly threadId: string;
  readonly turnId: string;
  /** The thread's working directory (absolute). */
  readonly cwd: string;
  readonly sandbox: SandboxMode;
  /** The thread's full sandbox policy (writable roots, network, /tmp exclusions). */
  readonly sandboxPolicy: SandboxPolicy;
  /** Runs commands inside the OS sandbox (the only way tools start processes). */
  readonly commands: CommandRunner;
  readonly approvalPolicy: AskForApproval;
  /**
   * Keys approved with `acceptForSession` in this thread (approval.ts: a command with its working
   * directory and sandbox, a file's real path): tools add to it and consult it so the user is not
   * asked twice.
   */
  readonly sessionApprovals: Set<string>;
  /** The saved approval rules. */
  readonly execPolicy: ExecPolicyRules;
  /** A fresh item id (allocated before the tool acts, DESIGN.md §4). */
  newItemId(): string;
  /** Records the item as started, then announces `item/started`. */
  startItem(item: ThreadItem): Promise<void>;
  /** Records the item's final state, then announces `item/completed`. */
  completeItem(item: ThreadItem): Promise<void>;
  /** Streams a chunk of a running command's output (`item/commandExecution/outputDelta`, not stored). */
  outputDelta(itemId: string, delta: string): void;
  /** Progress a running MCP tool reported (`item/mcpToolCall/progress`, not stored); optional for contexts without clients. */
  mcpProgress?(itemId: string, message: string): void;
  /** The turn's aggregated unified diff changed (`turn/diff/updated`). */
  diffUpdated(diff: string): Promise<void>;
  /** The plan changed (`turn/plan/updated`). */
  planUpdated(explanation: string | null, plan: Array<{ step: string; status: PlanStepStatus }>): Promise<void>;
  /**
   * Asks the user: the thread shows `waitingOnApproval` while every subscribed client gets the
   * request; the first valid answer wins. An error reply or an unknown decision counts as
   * `decline`; an interrupted turn answers `cancel`.
   */
  requestApproval(request: ApprovalRequest, signal: AbortSignal): Promise<ApprovalAnswer>;
  /** Sends a server request to the thread's clients; null when the turn was interrupted first. */
  askClients(method: string, params: object, signal: AbortSignal): Promise<ClientReply | null>;
  /**
   * The user's preToolUse hooks for a call about to run (absent: none apply, e.g. the user's own
   * shell command): the reason they block it, or null. The host asks after the call's item started
   * and before any approval, and closes a blocked call's item with the reason.
   */
  preToolUse?(tool: string, call: ToolCallBlock, signal: AbortSignal): Promise<string | null>;
}
