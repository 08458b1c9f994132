/**
 * Codex approval requests → ACP `session/request_permission`, and the user's choice back to a
 * Codex decision. The options offered follow the decisions the request allows:
 *
 *   allow_once     accept
 *   allow_always   acceptWithExecpolicyAmendment when the request offers one (a persisted prefix
 *                  rule: commands starting with it are never asked about again), else
 *                  acceptForSession (this command, or these files, for the rest of the session)
 *   reject_once    decline (the model is told and goes on)
 *   reject_always  decline, and this session declines the same command (or the same files)
 *                  again without asking: the server has no persistent "deny" rule to record
 *
 * A cancelled outcome (the user cancelled the prompt turn) is `cancel`, which ends the turn.
 * MCP tool calls are asked through Codex's elicitation form (`mcpServer/elicitation/request` with
 * `_meta.codex_approval_kind: "mcp_tool_call"`); its three choices map onto the same options.
 */
import type { PermissionOption, RequestPermissionOutcome, ToolCallUpdate } from "@agentclientprotocol/sdk/unstable";
import type { CommandExecutionRequestApprovalParams, FileChangeRequestApprovalParams } from "../protocol/tools.js";
import type { FileUpdateChange } from "../protocol/items.js";
import { scriptOf } from "../tools/shell-invocation.js";

/** A Codex command decision: a name, or the amendment object (issue 25's persisted rules). */
export type CommandDecision = string | { acceptWithExecpolicyAmendment: { execpolicy_amendment: string[] } };

/** What the bridge asks the editor, and how each answer becomes the Codex response. */
export interface PermissionQuestion<R> {
  toolCall: ToolCallUpdate;
  options: PermissionOption[];
  /** The Codex response for an option id, or for a cancelled outcome (null). */
  answer(optionId: string | null): R;
  /** Set when the user chose reject_always: the key this session now declines by itself. */
  rememberRejection?: string;
}

const OPTION = {
  allowOnce: "allow-once",
  allowAlways: "allow-always",
  rejectOnce: "reject-once",
  rejectAlways: "reject-always",
} as const;

/** The params fields issue 25 adds to Codex's approval request (optional: older servers omit them). */
type CommandParams = CommandExecutionRequestApprovalParams & {
  proposedExecpolicyAmendment?: string[] | null;
  availableDecisions?: CommandDecision[];
};

function amendmentOffered(p: CommandParams): CommandDecision | null {
  const offered = p.availableDecisions?.find((d) => typeof d === "object" && d !== null && "acceptWithExecpolicyAmendment" in d);
  if (offered) return offered;
  const prefix = p.proposedExecpolicyAmendment;
  const named = p.availableDecisions === undefined || p.availableDecisions.includes("acceptWithExecpolicyAmendment");
  return prefix && prefix.length > 0 && named ? { acceptWithExecpolicyAmendment: { execpolicy_amendment: prefix } } : null;
}

const allows = (p: { availableDecisions?: CommandDecision[] }, d: string) => p.availableDecisions === undefined || p.availableDecisions.includes(d);

export function commandRejectionKey(p: { command?: string | null; cwd?: string | null }): string {
  return `command\0${p.cwd ?? ""}\0${p.command ?? ""}`;
}

export function fileRejectionKey(changes: FileUpdateChange[]): string {
  return `files\0${changes.map((c) => c.path).sort().join("\0")}`;
}

function answerOf(chosen: Map<string, CommandDecision>, optionId: string | null): CommandDecision {
  if (optionId === null) return "cancel";
  return chosen.get(optionId) ?? "decline";
}

export function commandQuestion(p: CommandParams): PermissionQuestion<{ decision: CommandDecision }> {
  const options: PermissionOption[] = [];
  const decisions = new Map<string, CommandDecision>();
  const add = (optionId: string, name: string, kind: PermissionOption["kind"], decision: CommandDecision) => {
    options.push({ optionId, name, kind });
    decisions.set(optionId, decision);
  };
  if (allows(p, "accept")) add(OPTION.allowOnce, "Yes", "allow_once", "accept");
  const amendment = amendmentOffered(p);
  if (amendment && typeof amendment === "object")
    add(OPTION.allowAlways, `Yes, and don't ask again for commands that start with \`${amendment.acceptWithExecpolicyAmendment.execpolicy_amendment.join(" ")}\``, "allow_always", amendment);
  else if (allows(p, "acceptForSession")) add(OPTION.allowAlways, "Yes, and don't ask again for this command in this session", "allow_always", "acceptForSession");
  add(OPTION.rejectOnce, "No", "reject_once", "decline");
  add(OPTION.rejectAlways, "No, and don't ask again for this command in this session", "reject_always", "decline");
  const key = commandRejectionKey(p);
  return {
    toolCall: {
      toolCallId: p.itemId,
      title: p.command ? scriptOf(p.command) : "Run a command",
      kind: "execute",
      rawInput: { command: p.command ? scriptOf(p.command) : null, cwd: p.cwd ?? null, ...(p.reason ? { reason: p.reason } : {}) },
      ...(p.reason ? { content: [{ type: "content" as const, content: { type: "text" as const, text: p.reason } }] } : {}),
    },
    options,
    answer: (optionId) => ({ decision: answerOf(decisions, optionId) }),
    rememberRejection: key,
  };
}

export function fileChangeQuestion(p: FileChangeRequestApprovalParams, changes: FileUpdateChange[]): PermissionQuestion<{ decision: string }> {
  const options: PermissionOption[] = [
    { optionId: OPTION.allowOnce, name: "Yes", kind: "allow_once" },
    { optionId: OPTION.allowAlways, name: "Yes, and don't ask again for these files in this session", kind: "allow_always" },
    { optionId: OPTION.rejectOnce, name: "No", kind: "reject_once" },
    { optionId: OPTION.rejectAlways, name: "No, and don't ask again for these files in this session", kind: "reject_always" },
  ];
  const decisions = new Map<string, CommandDecision>([
    [OPTION.allowOnce, "accept"],
    [OPTION.allowAlways, "acceptForSession"],
    [OPTION.rejectOnce, "decline"],
    [OPTION.rejectAlways, "decline"],
  ]);
  return {
    toolCall: {
      toolCallId: p.itemId,
      kind: "edit",
      ...(p.reason ? { content: [{ type: "content" as const, content: { type: "text" as const, text: p.reason } }] } : {}),
    },
    options,
    answer: (optionId) => ({ decision: answerOf(decisions, optionId) as string }),
    rememberRejection: fileRejectionKey(changes),
  };
}

/** Codex's MCP tool-call approval form: its choices (src/mcp/tool.ts) are the option ids' values. */
export interface McpApprovalForm {
  serverName: string;
  message: string;
  _meta?: unknown;
  requestedSchema?: unknown;
}

export function isMcpToolApproval(p: McpApprovalForm): boolean {
  const meta = p._meta as { codex_approval_kind?: unknown } | null | undefined;
  return meta?.codex_approval_kind === "mcp_tool_call";
}

export function mcpToolQuestion(p: McpApprovalForm, toolCallId: string): PermissionQuestion<{ action: string; content?: Record<string, string> }> {
  const tool = (p._meta as { tool?: unknown } | null)?.tool;
  const choices = ((p.requestedSchema as { properties?: { decision?: { enum?: string[] } } } | undefined)?.properties?.decision?.enum ?? []) as string[];
  const [once, session, deny] = [choices[0] ?? "Approve Once", choices[1] ?? "Approve this Session", choices[2] ?? "Deny"];
  return {
    toolCall: { toolCallId, title: `${p.serverName}: ${typeof tool === "string" ? tool : "tool call"}`, kind: "other", content: [{ type: "content", content: { type: "text", text: p.message } }] },
    options: [
      { optionId: OPTION.allowOnce, name: "Yes", kind: "allow_once" },
      { optionId: OPTION.allowAlways, name: "Yes, and don't ask again for this tool in this session", kind: "allow_always" },
      { optionId: OPTION.rejectOnce, name: "No", kind: "reject_once" },
    ],
    answer: (optionId) => {
      if (optionId === null) return { action: "cancel" };
      if (optionId === OPTION.allowOnce) return { action: "accept", content: { decision: once } };
      if (optionId === OPTION.allowAlways) return { action: "accept", content: { decision: session } };
      return { action: "accept", content: { decision: deny } };
    },
  };
}

/** The option id an outcome chose, or null when the request was cancelled. */
export function chosenOption(outcome: RequestPermissionOutcome): string | null {
  return outcome.outcome === "selected" ? outcome.optionId : null;
}

export const REJECT_ALWAYS = OPTION.rejectAlways;
