/**
 * Methods Codex's own clients (the TUI, `codex exec`, the IDE extension) call at start-up and
 * during a session to learn about the server: config, requirements, skills, hooks,
 * collaboration modes, permission profiles, goals, background terminals. Shapes follow Codex
 * 0.171's v2 schema; the content is this server's truth (no OpenAI account, no skills…).
 */
import { z } from "zod";
import { ApprovalsReviewer, AskForApproval, JsonValue, SandboxMode } from "./common.js";

const Empty = z.object({}).passthrough();
const ThreadId = z.string().min(1, "threadId must not be empty");

// ---- account/bedrock/checkGovCloudRequirements (account/read: credentials.ts) ----------------

export const BedrockCheckGovCloudRequirementsParams = Empty.meta({ id: "BedrockCheckGovCloudRequirementsParams" });
export const BedrockCheckGovCloudRequirementsResponse = z
  .object({ isGovCloud: z.boolean(), shouldWarn: z.boolean() })
  .meta({ id: "BedrockCheckGovCloudRequirementsResponse" });

// ---- config/read, configRequirements/read ---------------------------------------------------

export const ConfigReadParams = z
  .object({ includeLayers: z.boolean().optional(), cwd: z.string().nullable().optional() })
  .meta({ id: "ConfigReadParams" });

const SandboxWorkspaceWrite = z.object({
  writable_roots: z.array(z.string()),
  network_access: z.boolean(),
  exclude_tmpdir_env_var: z.boolean(),
  exclude_slash_tmp: z.boolean(),
});

/** The effective settings new threads get (Codex's config.toml keys, snake_case as Codex has them). */
export const EffectiveConfig = z
  .object({
    model: z.string().nullable(),
    model_provider: z.string().nullable(),
    approval_policy: AskForApproval.nullable(),
    approvals_reviewer: ApprovalsReviewer.nullable(),
    sandbox_mode: SandboxMode.nullable(),
    sandbox_workspace_write: SandboxWorkspaceWrite.nullable(),
    instructions: z.string().nullable(),
    developer_instructions: z.string().nullable(),
    model_reasoning_effort: z.string().nullable(),
  })
  .meta({ id: "EffectiveConfig" });
export type EffectiveConfig = z.infer<typeof EffectiveConfig>;

const ConfigLayerMetadata = z.object({ name: z.object({ type: z.literal("sessionFlags") }), version: z.string() });
export const ConfigReadResponse = z
  .object({
    config: EffectiveConfig,
    origins: z.record(z.string(), ConfigLayerMetadata),
    layers: z.array(z.object({ name: z.object({ type: z.literal("sessionFlags") }), version: z.string(), config: JsonValue, disabledReason: z.string().nullable() })).nullable(),
  })
  .meta({ id: "ConfigReadResponse" });

export const ConfigRequirementsReadParams = Empty.meta({ id: "ConfigRequirementsReadParams" });
export const ConfigRequirements = z
  .object({
    allowedApprovalPolicies: z.array(AskForApproval).nullable(),
    allowedApprovalsReviewers: z.array(ApprovalsReviewer).nullable(),
    allowedSandboxModes: z.array(SandboxMode).nullable(),
    allowedPermissionProfiles: z.record(z.string(), z.boolean()).nullable(),
    defaultPermissions: z.string().nullable(),
  })
  .meta({ id: "ConfigRequirements" });
export const ConfigRequirementsReadResponse = z
  .object({ supportsIndependentSpeedModes: z.boolean().nullable(), requirements: ConfigRequirements.nullable() })
  .meta({ id: "ConfigRequirementsReadResponse" });

// ---- skills/list, hooks/list ----------------------------------------------------------------

export const SkillsListParams = z
  .object({ cwds: z.array(z.string()).optional(), forceReload: z.boolean().optional() })
  .meta({ id: "SkillsListParams" });
export const SkillsListResponse = z
  .object({ data: z.array(z.object({ cwd: z.string(), skills: z.array(JsonValue), errors: z.array(JsonValue) })) })
  .meta({ id: "SkillsListResponse" });

export const HooksListParams = z
  .object({ cwds: z.array(z.string()).optional(), threadId: z.string().nullable().optional() })
  .meta({ id: "HooksListParams" });
export const HooksListResponse = z
  .object({ data: z.array(z.object({ cwd: z.string(), hooks: z.array(JsonValue), warnings: z.array(z.string()), errors: z.array(JsonValue) })) })
  .meta({ id: "HooksListResponse" });

// ---- collaborationMode/list, permissionProfile/list ------------------------------------------

export const CollaborationModeListParams = Empty.meta({ id: "CollaborationModeListParams" });
export const CollaborationModeListResponse = z
  .object({
    data: z.array(
      z.object({ name: z.string(), mode: z.enum(["plan", "default"]).nullable(), model: z.string().nullable(), reasoning_effort: z.string().nullable() }),
    ),
  })
  .meta({ id: "CollaborationModeListResponse" });

export const PermissionProfileListParams = z
  .object({ cursor: z.string().nullable().optional(), limit: z.number().int().min(1).nullable().optional(), cwd: z.string().nullable().optional() })
  .passthrough()
  .meta({ id: "PermissionProfileListParams" });
export const PermissionProfileListResponse = z
  .object({ data: z.array(z.object({ id: z.string(), description: z.string().nullable(), allowed: z.boolean() })), nextCursor: z.string().nullable() })
  .meta({ id: "PermissionProfileListResponse" });

// ---- thread/goal/get, thread/backgroundTerminals/list -----------------------------------------

export const ThreadGoalGetParams = z.object({ threadId: ThreadId }).meta({ id: "ThreadGoalGetParams" });
/** Goals are not implemented: every thread has none. */
export const ThreadGoalGetResponse = z.object({ goal: z.null() }).meta({ id: "ThreadGoalGetResponse" });

export const ThreadBackgroundTerminalsListParams = z
  .object({ threadId: ThreadId, cursor: z.string().nullable().optional(), limit: z.number().int().min(1).nullable().optional() })
  .meta({ id: "ThreadBackgroundTerminalsListParams" });
/** Commands run to completion inside their turn here, so no terminal outlives it. */
export const ThreadBackgroundTerminalsListResponse = z
  .object({ data: z.array(JsonValue), nextCursor: z.string().nullable() })
  .meta({ id: "ThreadBackgroundTerminalsListResponse" });

// ---- plugin/installed -------------------------------------------------------------------------

export const PluginInstalledParams = z
  .object({ cwds: z.array(z.string()).nullable().optional(), installSuggestionPluginNames: z.array(z.string()).nullable().optional() })
  .meta({ id: "PluginInstalledParams" });
/** Plugins (marketplaces of skills/MCP bundles) are not implemented: none is installed. */
export const PluginInstalledResponse = z
  .object({ marketplaces: z.array(JsonValue), marketplaceLoadErrors: z.array(JsonValue) })
  .meta({ id: "PluginInstalledResponse" });
