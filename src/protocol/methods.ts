/**
 * The method tables: every client request, server notification and server request we implement,
 * with its zod schemas. Handlers, the JSON Schema generator and the docs all read these tables.
 */
import { z } from "zod";
import * as C from "./client-setup.js";
import * as K from "./credentials.js";
import * as E from "./execpolicy.js";
import * as FS from "./file-search.js";
import * as H from "./hooks.js";
import * as M from "./mcp.js";
import * as N from "./notifications.js";
import * as P from "./thread-pages.js";
import * as R from "./review.js";
import * as S from "./session.js";
import * as SH from "./shell-command.js";
import * as T from "./thread.js";
import * as TM from "./teams.js";
import * as F from "./thread-search.js";
import * as U from "./turn.js";
import * as X from "./tools.js";

export const clientRequests = {
  initialize: { params: S.InitializeParams, result: S.InitializeResponse },
  "thread/start": { params: T.ThreadStartParams, result: T.ThreadStartResponse },
  "thread/read": { params: T.ThreadReadParams, result: T.ThreadReadResponse },
  "thread/list": { params: T.ThreadListParams, result: T.ThreadListResponse },
  "thread/archive": { params: T.ThreadArchiveParams, result: T.ThreadArchiveResponse },
  "thread/unarchive": { params: T.ThreadUnarchiveParams, result: T.ThreadUnarchiveResponse },
  "thread/name/set": { params: T.ThreadSetNameParams, result: T.ThreadSetNameResponse },
  "thread/loaded/list": { params: T.ThreadLoadedListParams, result: T.ThreadLoadedListResponse },
  "thread/unsubscribe": { params: T.ThreadUnsubscribeParams, result: T.ThreadUnsubscribeResponse },
  "thread/resume": { params: T.ThreadResumeParams, result: T.ThreadResumeResponse },
  "thread/events/list": { params: T.ThreadEventsListParams, result: T.ThreadEventsListResponse },
  "thread/search": { params: F.ThreadSearchParams, result: F.ThreadSearchResponse },
  "thread/fork": { params: T.ThreadForkParams, result: T.ThreadForkResponse },
  "thread/rollback": { params: T.ThreadRollbackParams, result: T.ThreadRollbackResponse },
  "thread/compact/start": { params: T.ThreadCompactStartParams, result: T.ThreadCompactStartResponse },
  "thread/shellCommand": { params: SH.ThreadShellCommandParams, result: SH.ThreadShellCommandResponse },
  "review/start": { params: R.ReviewStartParams, result: R.ReviewStartResponse },
  "turn/start": { params: U.TurnStartParams, result: U.TurnStartResponse },
  "turn/interrupt": { params: U.TurnInterruptParams, result: U.TurnInterruptResponse },
  "turn/steer": { params: U.TurnSteerParams, result: U.TurnSteerResponse },
  "model/list": { params: S.ModelListParams, result: S.ModelListResponse },
  "command/exec": { params: X.CommandExecParams, result: X.CommandExecResponse },
  "thread/turns/list": { params: P.ThreadTurnsListParams, result: P.ThreadTurnsListResponse },
  "thread/items/list": { params: P.ThreadItemsListParams, result: P.ThreadItemsListResponse },
  "thread/goal/get": { params: C.ThreadGoalGetParams, result: C.ThreadGoalGetResponse },
  "thread/backgroundTerminals/list": { params: C.ThreadBackgroundTerminalsListParams, result: C.ThreadBackgroundTerminalsListResponse },
  "account/read": { params: K.GetAccountParams, result: K.GetAccountResponse },
  "modelProvider/list": { params: K.ModelProviderListParams, result: K.ModelProviderListResponse },
  "account/bedrock/checkGovCloudRequirements": { params: C.BedrockCheckGovCloudRequirementsParams, result: C.BedrockCheckGovCloudRequirementsResponse },
  "config/read": { params: C.ConfigReadParams, result: C.ConfigReadResponse },
  "configRequirements/read": { params: C.ConfigRequirementsReadParams, result: C.ConfigRequirementsReadResponse },
  "skills/list": { params: C.SkillsListParams, result: C.SkillsListResponse },
  "hooks/list": { params: C.HooksListParams, result: C.HooksListResponse },
  "collaborationMode/list": { params: C.CollaborationModeListParams, result: C.CollaborationModeListResponse },
  "plugin/installed": { params: C.PluginInstalledParams, result: C.PluginInstalledResponse },
  "permissionProfile/list": { params: C.PermissionProfileListParams, result: C.PermissionProfileListResponse },
  "mcpServerStatus/list": { params: M.ListMcpServerStatusParams, result: M.ListMcpServerStatusResponse },
  "config/mcpServer/reload": { params: M.McpServerRefreshParams, result: M.McpServerRefreshResponse },
  "mcpServer/tool/call": { params: M.McpServerToolCallParams, result: M.McpServerToolCallResponse },
  "mcpServer/resource/read": { params: M.McpResourceReadParams, result: M.McpResourceReadResponse },
  fuzzyFileSearch: { params: FS.FuzzyFileSearchParams, result: FS.FuzzyFileSearchResponse },
  "fuzzyFileSearch/sessionStart": { params: FS.FuzzyFileSearchSessionStartParams, result: FS.FuzzyFileSearchSessionStartResponse },
  "fuzzyFileSearch/sessionUpdate": { params: FS.FuzzyFileSearchSessionUpdateParams, result: FS.FuzzyFileSearchSessionUpdateResponse },
  "fuzzyFileSearch/sessionStop": { params: FS.FuzzyFileSearchSessionStopParams, result: FS.FuzzyFileSearchSessionStopResponse },
  "execpolicy/rule/list": { params: E.ExecPolicyRuleListParams, result: E.ExecPolicyRuleListResponse },
  "execpolicy/rule/remove": { params: E.ExecPolicyRuleRemoveParams, result: E.ExecPolicyRuleRemoveResponse },
  "thread/share": { params: TM.ThreadShareParams, result: TM.ThreadShareResponse },
  "audit/list": { params: TM.AuditListParams, result: TM.AuditListResponse },
  "account/usage/read": { params: TM.GetAccountTokenUsageParams, result: TM.GetAccountTokenUsageResponse },
} as const;
export type ClientRequestMethod = keyof typeof clientRequests;
export type ParamsOf<M extends ClientRequestMethod> = z.infer<(typeof clientRequests)[M]["params"]>;
export type ResultOf<M extends ClientRequestMethod> = z.input<(typeof clientRequests)[M]["result"]>;

export const clientNotifications = {
  initialized: z.object({}).optional(),
} as const;

export const serverNotifications = {
  "thread/started": N.ThreadStartedNotification,
  "thread/status/changed": N.ThreadStatusChangedNotification,
  "thread/archived": N.ThreadArchivedNotification,
  "thread/unarchived": N.ThreadUnarchivedNotification,
  "thread/name/updated": N.ThreadNameUpdatedNotification,
  "thread/tokenUsage/updated": N.ThreadTokenUsageUpdatedNotification,
  "turn/started": N.TurnStartedNotification,
  "turn/completed": N.TurnCompletedNotification,
  "item/started": N.ItemStartedNotification,
  "item/completed": N.ItemCompletedNotification,
  "item/agentMessage/delta": N.AgentMessageDeltaNotification,
  "item/reasoning/summaryTextDelta": N.ReasoningSummaryTextDeltaNotification,
  "item/reasoning/textDelta": N.ReasoningTextDeltaNotification,
  "item/commandExecution/outputDelta": X.CommandExecutionOutputDeltaNotification,
  "item/mcpToolCall/progress": M.McpToolCallProgressNotification,
  "mcpServer/startupStatus/updated": M.McpServerStatusUpdatedNotification,
  "turn/diff/updated": X.TurnDiffUpdatedNotification,
  "turn/plan/updated": X.TurnPlanUpdatedNotification,
  "hook/started": H.HookStartedNotification,
  "hook/completed": H.HookCompletedNotification,
  "serverRequest/resolved": X.ServerRequestResolvedNotification,
  error: N.ErrorNotification,
  "fuzzyFileSearch/sessionUpdated": FS.FuzzyFileSearchSessionUpdatedNotification,
  "fuzzyFileSearch/sessionCompleted": FS.FuzzyFileSearchSessionCompletedNotification,
} as const;
export type ServerNotificationMethod = keyof typeof serverNotifications;
/** Notification params without `seq`: the runtime assigns it when the event is recorded. */
export type NotificationBody<M extends ServerNotificationMethod> = Omit<z.input<(typeof serverNotifications)[M]>, "seq">;

/** Server → client requests. */
export const serverRequests = {
  "item/commandExecution/requestApproval": { params: X.CommandExecutionRequestApprovalParams, result: X.CommandExecutionRequestApprovalResponse },
  "item/fileChange/requestApproval": { params: X.FileChangeRequestApprovalParams, result: X.FileChangeRequestApprovalResponse },
  "item/tool/call": { params: X.DynamicToolCallParams, result: X.DynamicToolCallResponse },
  "mcpServer/elicitation/request": { params: M.McpServerElicitationRequestParams, result: M.McpServerElicitationRequestResponse },
} as const;
