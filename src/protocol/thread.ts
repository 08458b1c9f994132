/** Thread and Turn objects and the thread/* methods (Codex v2 shapes). */
import { z } from "zod";
import { ThreadAccess } from "./teams.js";
import {
  ApprovalsReviewer,
  AskForApproval,
  JsonValue,
  ReasoningEffort,
  SandboxMode,
  SandboxPolicy,
  SessionSource,
  ThreadStatus,
  TurnError,
} from "./common.js";
import { ThreadItem } from "./items.js";

/** Why a turn stopped. Our extension to Codex's Turn (DESIGN.md §3.4). */
export const TurnStopReason = z.enum(["finalAnswer", "maxTokens", "maxTurns", "refused", "interrupted", "error"]).meta({ id: "TurnStopReason" });
export type TurnStopReason = z.infer<typeof TurnStopReason>;

export const TurnStatus = z.enum(["completed", "interrupted", "failed", "inProgress"]).meta({ id: "TurnStatus" });
export type TurnStatus = z.infer<typeof TurnStatus>;

export const TurnItemsView = z.enum(["notLoaded", "summary", "full"]).meta({ id: "TurnItemsView" });
export type TurnItemsView = z.infer<typeof TurnItemsView>;

export const Turn = z
  .object({
    id: z.string(),
    rootTurnId: z.string().nullable(),
    items: z.array(ThreadItem),
    itemsView: TurnItemsView,
    status: TurnStatus,
    error: TurnError.nullable(),
    /** Unix seconds. */
    startedAt: z.number().int().nullable(),
    /** Unix seconds. */
    completedAt: z.number().int().nullable(),
    durationMs: z.number().int().nullable(),
    stopReason: TurnStopReason.nullable().optional(),
  })
  .meta({ id: "Turn" });
export type Turn = z.infer<typeof Turn>;

export const Thread = z
  .object({
    id: z.string(),
    sessionId: z.string(),
    forkedFromId: z.string().nullable(),
    parentThreadId: z.string().nullable(),
    preview: z.string(),
    ephemeral: z.boolean(),
    section: z.null(),
    sectionEnteredAt: z.number().int().nullable(),
    projectId: z.string().nullable(),
    historyMode: z.enum(["legacy", "paginated"]),
    modelProvider: z.string(),
    model: z.string().nullable(),
    reasoningEffort: ReasoningEffort.nullable(),
    /** Unix seconds. */
    createdAt: z.number().int(),
    /** Unix seconds. */
    updatedAt: z.number().int(),
    recencyAt: z.number().int().nullable(),
    status: ThreadStatus,
    path: z.string().nullable(),
    cwd: z.string(),
    cliVersion: z.string(),
    originator: z.string().nullable(),
    source: SessionSource,
    threadSource: z.string().nullable(),
    agentNickname: z.string().nullable(),
    agentRole: z.string().nullable(),
    gitInfo: z.null(),
    name: z.string().nullable(),
    turns: z.array(Turn),
  })
  .meta({ id: "Thread" });
export type Thread = z.infer<typeof Thread>;

export const ThreadId = z.string().min(1, "threadId must not be empty");

/** A tool the client implements; calls come back to it as `item/tool/call` requests. */
export const DynamicToolSpec = z
  .object({
    name: z.string().regex(/^[a-zA-Z0-9_-]{1,64}$/, "tool names are 1-64 characters of [a-zA-Z0-9_-]"),
    description: z.string().default(""),
    inputSchema: z.record(z.string(), JsonValue).default({ type: "object", properties: {} }),
  })
  .meta({ id: "DynamicToolSpec" });
export type DynamicToolSpec = z.infer<typeof DynamicToolSpec>;

/**
 * Codex's experimental permission profiles (`:read-only`, `:workspace`, `:danger-full-access`),
 * mapped onto the sandbox (src/runtime/permissions.ts). Cannot be combined with `sandbox`.
 */
const permissionFields = {
  permissions: z.string().min(1).nullable().optional(),
  /** Extra writable roots for the workspace sandbox (absolute paths). */
  runtimeWorkspaceRoots: z.array(z.string().min(1)).nullable().optional(),
};

/** Settings a thread/start, thread/resume or turn/start may set (nullable = "keep"). */
const settingsOverrides = {
  model: z.string().min(1).nullable().optional(),
  modelProvider: z.string().min(1).nullable().optional(),
  cwd: z.string().min(1).nullable().optional(),
  approvalPolicy: AskForApproval.nullable().optional(),
  approvalsReviewer: ApprovalsReviewer.nullable().optional(),
};

export const ThreadStartParams = z
  .object({
    ...settingsOverrides,
    serviceTier: z.string().nullable().optional(),
    sandbox: SandboxMode.nullable().optional(),
    ...permissionFields,
    config: z.record(z.string(), JsonValue).nullable().optional(),
    serviceName: z.string().nullable().optional(),
    baseInstructions: z.string().nullable().optional(),
    developerInstructions: z.string().nullable().optional(),
    personality: z.string().nullable().optional(),
    ephemeral: z.boolean().nullable().optional(),
    sessionStartSource: z.string().nullable().optional(),
    threadSource: z.string().nullable().optional(),
    dynamicTools: z.array(DynamicToolSpec).max(128).nullable().optional(),
  })
  .meta({ id: "ThreadStartParams" });
export type ThreadStartParams = z.infer<typeof ThreadStartParams>;

/** Shared by thread/start, thread/resume and thread/fork responses. */
const threadSettingsResponse = {
  thread: Thread,
  model: z.string(),
  modelProvider: z.string(),
  serviceTier: z.string().nullable(),
  disabledPluginIds: z.array(z.string()),
  cwd: z.string(),
  instructionSources: z.array(z.string()),
  approvalPolicy: AskForApproval,
  approvalsReviewer: ApprovalsReviewer,
  sandbox: SandboxPolicy,
  /** The permission profile the thread's sandbox corresponds to. */
  activePermissionProfile: z.object({ id: z.string(), extends: z.string().nullable() }).nullable(),
  reasoningEffort: ReasoningEffort.nullable(),
};
export const ThreadStartResponse = z.object(threadSettingsResponse).meta({ id: "ThreadStartResponse" });
export type ThreadStartResponse = z.infer<typeof ThreadStartResponse>;

export const ThreadReadParams = z.object({ threadId: ThreadId, includeTurns: z.boolean().optional() }).meta({ id: "ThreadReadParams" });
/** `access` (our extension, docs/teams.md): the thread's owner, its shares and what the reader may do. */
export const ThreadReadResponse = z.object({ thread: Thread, access: ThreadAccess.optional() }).meta({ id: "ThreadReadResponse" });

/** recency_at is the last activity (updated_at here); section_position orders by section, and no thread has one, so by recency. */
export const ThreadSortKey = z.enum(["created_at", "updated_at", "recency_at", "section_position"]).meta({ id: "ThreadSortKey" });
export type ThreadSortKey = z.infer<typeof ThreadSortKey>;

export const ThreadSourceKind = z
  .enum(["cli", "vscode", "exec", "appServer", "subAgent", "subAgentReview", "subAgentCompact", "subAgentThreadSpawn", "subAgentOther", "unknown"])
  .meta({ id: "ThreadSourceKind" });
export type ThreadSourceKind = z.infer<typeof ThreadSourceKind>;

export const ThreadListParams = z
  .object({
    cursor: z.string().nullable().optional(),
    limit: z.number().int().min(1).max(100).nullable().optional(),
    sortKey: ThreadSortKey.nullable().optional(),
    sortDirection: z.enum(["asc", "desc"]).nullable().optional(),
    modelProviders: z.array(z.string()).nullable().optional(),
    archived: z.boolean().nullable().optional(),
    cwd: z.union([z.string(), z.array(z.string())]).nullable().optional(),
    searchTerm: z.string().nullable().optional(),
    /** Which clients started the threads (Thread.source); empty or absent: every source. */
    sourceKinds: z.array(ThreadSourceKind).nullable().optional(),
    /** Sub-agent and attachment filters: threads here have no parent, section or project. */
    parentThreadId: z.string().nullable().optional(),
    ancestorThreadId: z.string().nullable().optional(),
    attachedToThreadId: z.string().nullable().optional(),
    sectionId: z.string().nullable().optional(),
    projectId: z.string().nullable().optional(),
    originators: z.array(z.string()).nullable().optional(),
    includeAttachedThreads: z.boolean().optional(),
    currentAccountOnly: z.boolean().optional(),
    useStateDbOnly: z.boolean().optional(),
    includedThreadIds: z.array(z.string()).max(100).nullable().optional(),
    excludedThreadIds: z.array(z.string()).max(100).nullable().optional(),
  })
  .meta({ id: "ThreadListParams" });
export type ThreadListParams = z.infer<typeof ThreadListParams>;
export const ThreadListResponse = z
  .object({ data: z.array(Thread), nextCursor: z.string().nullable(), backwardsCursor: z.string().nullable() })
  .meta({ id: "ThreadListResponse" });

export const ThreadIdParams = z.object({ threadId: ThreadId });
export const ThreadArchiveParams = ThreadIdParams.meta({ id: "ThreadArchiveParams" });
export const ThreadArchiveResponse = z.object({}).meta({ id: "ThreadArchiveResponse" });
export const ThreadUnarchiveParams = ThreadIdParams.meta({ id: "ThreadUnarchiveParams" });
export const ThreadUnarchiveResponse = z.object({ thread: Thread }).meta({ id: "ThreadUnarchiveResponse" });
export const ThreadSetNameParams = z
  .object({ threadId: ThreadId, name: z.string().max(1000, "thread names are at most 1000 characters") })
  .meta({ id: "ThreadSetNameParams" });
export const ThreadSetNameResponse = z.object({}).meta({ id: "ThreadSetNameResponse" });
export const ThreadLoadedListParams = z
  .object({ cursor: z.string().nullable().optional(), limit: z.number().int().min(1).nullable().optional() })
  .meta({ id: "ThreadLoadedListParams" });
export const ThreadLoadedListResponse = z
  .object({ data: z.array(z.string()), nextCursor: z.string().nullable() })
  .meta({ id: "ThreadLoadedListResponse" });
export const ThreadUnsubscribeParams = ThreadIdParams.meta({ id: "ThreadUnsubscribeParams" });
export const ThreadUnsubscribeResponse = z
  .object({ status: z.enum(["notLoaded", "notSubscribed", "unsubscribed"]) })
  .meta({ id: "ThreadUnsubscribeResponse" });

/** Settings a resume or fork may change (a settings message is appended when they do). */
const resumeOverrides = {
  ...settingsOverrides,
  serviceTier: z.string().nullable().optional(),
  sandbox: SandboxMode.nullable().optional(),
  ...permissionFields,
  config: z.record(z.string(), JsonValue).nullable().optional(),
  baseInstructions: z.string().nullable().optional(),
  developerInstructions: z.string().nullable().optional(),
  personality: z.string().nullable().optional(),
  excludeTurns: z.boolean().optional(),
};

export const ThreadResumeParams = z
  .object({
    threadId: ThreadId,
    ...resumeOverrides,
    /** Our extension: replay stored notifications with seq > afterSeq to this connection first. */
    afterSeq: z.number().int().nonnegative().nullable().optional(),
    /** A first page of turns (thread/turns/list) in the response, instead of every turn. */
    initialTurnsPage: z
      .object({
        limit: z.number().int().min(1).max(1000).nullable().optional(),
        sortDirection: z.enum(["asc", "desc"]).nullable().optional(),
        itemsView: TurnItemsView.nullable().optional(),
      })
      .nullable()
      .optional(),
  })
  .meta({ id: "ThreadResumeParams" });
export type ThreadResumeParams = z.infer<typeof ThreadResumeParams>;
export const ThreadResumeResponse = z
  .object({
    ...threadSettingsResponse,
    collaborationMode: z.null(),
    turnsBackwardsCursor: z.string().nullable(),
    itemsBackwardsCursor: z.string().nullable(),
    initialTurnsPage: z.object({ data: z.array(Turn), nextCursor: z.string().nullable(), backwardsCursor: z.string().nullable() }).nullable(),
  })
  .meta({ id: "ThreadResumeResponse" });

export const ThreadForkParams = z
  .object({ threadId: ThreadId, lastTurnId: z.string().nullable().optional(), ephemeral: z.boolean().optional(), ...resumeOverrides })
  .meta({ id: "ThreadForkParams" });
export type ThreadForkParams = z.infer<typeof ThreadForkParams>;
export const ThreadForkResponse = z.object(threadSettingsResponse).meta({ id: "ThreadForkResponse" });

export const ThreadRollbackParams = z
  .object({ threadId: ThreadId, numTurns: z.number().int().min(1, "numTurns must be at least 1") })
  .meta({ id: "ThreadRollbackParams" });
export const ThreadRollbackResponse = z.object({ thread: Thread }).meta({ id: "ThreadRollbackResponse" });

export const ThreadCompactStartParams = ThreadIdParams.meta({ id: "ThreadCompactStartParams" });
export const ThreadCompactStartResponse = z.object({}).meta({ id: "ThreadCompactStartResponse" });

/** Our extension: pages through a thread's stored event log. */
export const StoredThreadEvent = z
  .object({ seq: z.number().int(), method: z.string(), params: z.record(z.string(), JsonValue), emittedAtMs: z.number().int() })
  .meta({ id: "StoredThreadEvent" });
export const ThreadEventsListParams = z
  .object({ threadId: ThreadId, afterSeq: z.number().int().nonnegative().default(0), limit: z.number().int().min(1).max(1000).default(200) })
  .meta({ id: "ThreadEventsListParams" });
export const ThreadEventsListResponse = z
  .object({ data: z.array(StoredThreadEvent), nextAfterSeq: z.number().int().nullable() })
  .meta({ id: "ThreadEventsListResponse" });
