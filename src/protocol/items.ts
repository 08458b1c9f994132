/** Thread items (Codex v2 `ThreadItem`): the payload is flat on the wire, discriminated by `type`. */
import { z } from "zod";
import { JsonValue, UserInput } from "./common.js";

const lifecycle = {
  /** Unix ms when the item started, if recorded. */
  startedAtMs: z.number().int().nullable().optional(),
  /** Unix ms when the item completed, if recorded. */
  completedAtMs: z.number().int().nullable().optional(),
};

export const CommandAction = z
  .discriminatedUnion("type", [
    z.object({ type: z.literal("read"), command: z.string(), name: z.string(), path: z.string() }),
    z.object({ type: z.literal("listFiles"), command: z.string(), path: z.string().nullable() }),
    z.object({ type: z.literal("search"), command: z.string(), query: z.string().nullable(), path: z.string().nullable() }),
    z.object({ type: z.literal("unknown"), command: z.string() }),
  ])
  .meta({ id: "CommandAction" });
export type CommandAction = z.infer<typeof CommandAction>;

export const PatchChangeKind = z
  .discriminatedUnion("type", [
    z.object({ type: z.literal("add") }),
    z.object({ type: z.literal("delete") }),
    z.object({ type: z.literal("update"), move_path: z.string().nullable() }),
  ])
  .meta({ id: "PatchChangeKind" });

export const FileUpdateChange = z.object({ path: z.string(), kind: PatchChangeKind, diff: z.string() }).meta({ id: "FileUpdateChange" });
export type FileUpdateChange = z.infer<typeof FileUpdateChange>;

export const DynamicToolCallOutputContentItem = z
  .discriminatedUnion("type", [
    z.object({ type: z.literal("inputText"), text: z.string() }),
    z.object({ type: z.literal("inputImage"), imageUrl: z.string() }),
  ])
  .meta({ id: "DynamicToolCallOutputContentItem" });
export type DynamicToolCallOutputContentItem = z.infer<typeof DynamicToolCallOutputContentItem>;

const ExecStatus = z.enum(["inProgress", "completed", "failed", "declined"]);
const CallStatus = z.enum(["inProgress", "completed", "failed"]);

export const UserMessageItem = z.object({ type: z.literal("userMessage"), id: z.string(), clientId: z.string().nullable(), content: z.array(UserInput), ...lifecycle });
export const AgentMessageItem = z.object({
  type: z.literal("agentMessage"),
  id: z.string(),
  text: z.string(),
  phase: z.string().nullable(),
  moderation: z.null(),
  memoryCitation: z.null(),
  delivery: z.null(),
  questions: z.null(),
  ...lifecycle,
});
export const ReasoningItem = z.object({ type: z.literal("reasoning"), id: z.string(), summary: z.array(z.string()), content: z.array(z.string()), ...lifecycle });
export const PlanItem = z.object({ type: z.literal("plan"), id: z.string(), text: z.string(), ...lifecycle });
export const CommandExecutionItem = z.object({
  type: z.literal("commandExecution"),
  id: z.string(),
  pluginId: z.string().nullable(),
  scriptPath: z.string().nullable(),
  command: z.string(),
  cwd: z.string(),
  processId: z.string().nullable(),
  source: z.enum(["agent", "userShell", "unifiedExecStartup", "unifiedExecInteraction"]),
  status: ExecStatus,
  commandActions: z.array(CommandAction),
  aggregatedOutput: z.string().nullable(),
  exitCode: z.number().int().nullable(),
  durationMs: z.number().int().nullable(),
  ...lifecycle,
});
export const FileChangeItem = z.object({ type: z.literal("fileChange"), id: z.string(), changes: z.array(FileUpdateChange), status: ExecStatus, ...lifecycle });
export const McpToolCallItem = z.object({
  type: z.literal("mcpToolCall"),
  id: z.string(),
  server: z.string(),
  environmentId: z.string().nullable(),
  tool: z.string(),
  status: CallStatus,
  arguments: JsonValue,
  appContext: z.null(),
  mcpAppUi: z.null(),
  pluginId: z.string().nullable(),
  readOnlyHint: z.boolean().nullable(),
  result: JsonValue.nullable(),
  error: z.object({ message: z.string() }).nullable(),
  durationMs: z.number().int().nullable(),
  ...lifecycle,
});
export const DynamicToolCallItem = z.object({
  type: z.literal("dynamicToolCall"),
  id: z.string(),
  namespace: z.string().nullable(),
  tool: z.string(),
  arguments: JsonValue,
  status: CallStatus,
  contentItems: z.array(DynamicToolCallOutputContentItem).nullable(),
  success: z.boolean().nullable(),
  durationMs: z.number().int().nullable(),
  ...lifecycle,
});
/** Text a hook sent to the model (a stop hook's "continue"), with the hook run that wrote each fragment. */
export const HookPromptItem = z.object({
  type: z.literal("hookPrompt"),
  id: z.string(),
  fragments: z.array(z.object({ text: z.string(), hookRunId: z.string() }).meta({ id: "HookPromptFragment" })),
  ...lifecycle,
});
export const ContextCompactionItem = z.object({ type: z.literal("contextCompaction"), id: z.string(), ...lifecycle });
/** A review turn (review/start) began; `review` names what is reviewed ("current changes", …). */
export const EnteredReviewModeItem = z.object({ type: z.literal("enteredReviewMode"), id: z.string(), review: z.string(), ...lifecycle });
/** A review turn ended; `review` is the review's text (the reviewer's last answer). */
export const ExitedReviewModeItem = z.object({ type: z.literal("exitedReviewMode"), id: z.string(), review: z.string(), ...lifecycle });

export const ThreadItem = z
  .discriminatedUnion("type", [
    UserMessageItem,
    AgentMessageItem,
    ReasoningItem,
    PlanItem,
    CommandExecutionItem,
    FileChangeItem,
    McpToolCallItem,
    DynamicToolCallItem,
    HookPromptItem,
    ContextCompactionItem,
    EnteredReviewModeItem,
    ExitedReviewModeItem,
  ])
  .meta({ id: "ThreadItem" });
export type ThreadItem = z.infer<typeof ThreadItem>;
export type ThreadItemType = ThreadItem["type"];
