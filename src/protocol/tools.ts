/** Tool-related notifications, server requests and command/exec (Codex v2 shapes). */
import { z } from "zod";
import { JsonValue, SandboxPolicy } from "./common.js";
import { CommandAction, DynamicToolCallOutputContentItem } from "./items.js";
import { RequestId } from "./jsonrpc.js";

const seq = z.number().int().positive();

export const CommandExecutionOutputDeltaNotification = z
  .object({ threadId: z.string(), turnId: z.string(), itemId: z.string(), delta: z.string(), seq })
  .meta({ id: "CommandExecutionOutputDeltaNotification" });

export const TurnDiffUpdatedNotification = z
  .object({ threadId: z.string(), turnId: z.string(), diff: z.string(), seq })
  .meta({ id: "TurnDiffUpdatedNotification" });

export const TurnPlanStep = z.object({ step: z.string(), status: z.enum(["pending", "inProgress", "completed"]) }).meta({ id: "TurnPlanStep" });
export const TurnPlanUpdatedNotification = z
  .object({ threadId: z.string(), turnId: z.string(), explanation: z.string().nullable(), plan: z.array(TurnPlanStep), seq })
  .meta({ id: "TurnPlanUpdatedNotification" });

export const ServerRequestResolvedNotification = z
  .object({ threadId: z.string(), requestId: RequestId, seq })
  .meta({ id: "ServerRequestResolvedNotification" });

/** A command prefix a rule approves (Codex's ExecPolicyAmendment), e.g. ["touch", "a5"]. */
export const ExecPolicyAmendment = z.array(z.string()).meta({ id: "ExecPolicyAmendment" });

/** The plain decisions (a file change takes only these). */
export const ApprovalDecision = z.enum(["accept", "acceptForSession", "decline", "cancel"]).meta({ id: "FileChangeApprovalDecision" });
export type ApprovalDecision = z.infer<typeof ApprovalDecision>;

/** A command's decisions: the plain ones, or accept and save the proposed rule. */
export const CommandExecutionApprovalDecision = z
  .union([ApprovalDecision, z.strictObject({ acceptWithExecpolicyAmendment: z.object({ execpolicy_amendment: ExecPolicyAmendment }) })])
  .meta({ id: "CommandExecutionApprovalDecision" });
export type CommandExecutionApprovalDecision = z.infer<typeof CommandExecutionApprovalDecision>;

export const CommandExecutionRequestApprovalParams = z
  .object({
    kind: z.literal("command"),
    threadId: z.string(),
    turnId: z.string(),
    itemId: z.string(),
    startedAtMs: z.number().int(),
    approvalId: z.string().nullable().optional(),
    environmentId: z.string().nullable(),
    reason: z.string().nullable().optional(),
    command: z.string().nullable().optional(),
    cwd: z.string().nullable().optional(),
    commandActions: z.array(CommandAction).nullable().optional(),
    /** The rule `acceptWithExecpolicyAmendment` would save (null: none is offered). */
    proposedExecpolicyAmendment: ExecPolicyAmendment.nullable().optional(),
    /** The decisions this request accepts, in the order a client should show them. */
    availableDecisions: z.array(CommandExecutionApprovalDecision).optional(),
  })
  .meta({ id: "CommandExecutionRequestApprovalParams" });
export type CommandExecutionRequestApprovalParams = z.infer<typeof CommandExecutionRequestApprovalParams>;
export const CommandExecutionRequestApprovalResponse = z
  .object({ decision: CommandExecutionApprovalDecision })
  .meta({ id: "CommandExecutionRequestApprovalResponse" });

export const FileChangeRequestApprovalParams = z
  .object({
    threadId: z.string(),
    turnId: z.string(),
    itemId: z.string(),
    startedAtMs: z.number().int(),
    reason: z.string().nullable().optional(),
    grantRoot: z.string().nullable().optional(),
  })
  .meta({ id: "FileChangeRequestApprovalParams" });
export type FileChangeRequestApprovalParams = z.infer<typeof FileChangeRequestApprovalParams>;
export const FileChangeRequestApprovalResponse = z
  .object({ decision: ApprovalDecision })
  .meta({ id: "FileChangeRequestApprovalResponse" });

export const DynamicToolCallParams = z
  .object({ threadId: z.string(), turnId: z.string(), callId: z.string(), namespace: z.string().nullable(), tool: z.string(), arguments: JsonValue })
  .meta({ id: "DynamicToolCallParams" });
export const DynamicToolCallResponse = z
  .object({ contentItems: z.array(DynamicToolCallOutputContentItem), success: z.boolean() })
  .meta({ id: "DynamicToolCallResponse" });

export const CommandExecParams = z
  .object({
    command: z.array(z.string()).min(1, "command must not be empty"),
    cwd: z.string().nullable().optional(),
    env: z.record(z.string(), z.string().nullable()).nullable().optional(),
    timeoutMs: z.number().int().positive().nullable().optional(),
    outputBytesCap: z.number().int().positive().nullable().optional(),
    /** The sandbox for this command; the server's default policy when absent. */
    sandboxPolicy: SandboxPolicy.nullable().optional(),
  })
  .meta({ id: "CommandExecParams" });
export type CommandExecParams = z.infer<typeof CommandExecParams>;
export const CommandExecResponse = z
  .object({ exitCode: z.number().int(), stdout: z.string(), stderr: z.string() })
  .meta({ id: "CommandExecResponse" });
