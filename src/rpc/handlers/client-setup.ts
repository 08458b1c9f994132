/**
 * What Codex's clients ask a server about itself before and during a session (config,
 * requirements, skills, hooks, collaboration modes, permission profiles, goals, background
 * terminals; account/read is in credentials.ts). Every answer describes this server truthfully:
 * the config is the defaults new threads get, and features this server does not have (skills,
 * goals, background terminals) are answered empty.
 */
import path from "node:path";
import type { AppContext } from "../../app-context.js";
import { PERMISSION_PROFILES } from "../../runtime/permissions.js";
import { sandboxPolicy } from "../../runtime/thread-view.js";
import type { Connection } from "../connection.js";
import { invalidParams } from "../errors.js";
import { listHooks } from "./hooks.js";
import { withThread } from "./threads.js";

export function registerClientSetupHandlers(conn: Connection, app: AppContext): void {
  const d = app.runtime.defaults;

  conn.handle("account/bedrock/checkGovCloudRequirements", () => ({ isGovCloud: false, shouldWarn: false }));

  conn.handle("config/read", (p) => {
    const ws = sandboxPolicy({ sandbox: "workspace-write", cwd: p.cwd ? path.resolve(app.defaultCwd, p.cwd) : d.cwd, sandboxPolicy: null });
    return {
      config: {
        model: d.model,
        model_provider: d.modelProvider,
        approval_policy: d.approvalPolicy,
        approvals_reviewer: "user" as const,
        sandbox_mode: d.sandbox,
        sandbox_workspace_write:
          ws.type === "workspaceWrite"
            ? { writable_roots: ws.writableRoots, network_access: ws.networkAccess, exclude_tmpdir_env_var: ws.excludeTmpdirEnvVar, exclude_slash_tmp: ws.excludeSlashTmp }
            : null,
        instructions: null,
        developer_instructions: null,
        model_reasoning_effort: null,
      },
      // The settings come from this server's flags and environment: Codex calls that layer "sessionFlags".
      origins: Object.fromEntries(["model", "model_provider", "approval_policy", "sandbox_mode"].map((k) => [k, { name: { type: "sessionFlags" as const }, version: app.version }])),
      layers: p.includeLayers ? [{ name: { type: "sessionFlags" as const }, version: app.version, config: { model: d.model, model_provider: d.modelProvider }, disabledReason: null }] : null,
    };
  });

  conn.handle("configRequirements/read", () => ({
    supportsIndependentSpeedModes: false,
    requirements: {
      // Codex 0.171 clients cannot decode "on-failure" here (their enum lacks it), although threads accept it.
      allowedApprovalPolicies: ["untrusted", "on-request", "never"],
      allowedApprovalsReviewers: ["user"],
      allowedSandboxModes: ["read-only", "workspace-write", "danger-full-access"],
      allowedPermissionProfiles: Object.fromEntries(PERMISSION_PROFILES.map((p) => [p.id, true])),
      defaultPermissions: PERMISSION_PROFILES.find((p) => p.mode === d.sandbox)!.id,
    },
  }));

  const cwdsOf = (cwds: string[] | undefined) => (cwds && cwds.length ? cwds : [d.cwd]);
  // Skills (SKILL.md bundles) are not implemented: every cwd has none, and no errors.
  conn.handle("skills/list", (p) => ({ data: cwdsOf(p.cwds).map((cwd) => ({ cwd, skills: [], errors: [] })) }));
  conn.handle("plugin/installed", () => ({ marketplaces: [], marketplaceLoadErrors: [] }));
  conn.handle("hooks/list", async (p) => ({ data: await listHooks(cwdsOf(p.cwds), app.turns.hooks) }));

  // Codex's "default" mode is how every turn runs here; there is no plan-only mode.
  conn.handle("collaborationMode/list", () => ({ data: [{ name: "Default", mode: "default" as const, model: null, reasoning_effort: null }] }));

  conn.handle("permissionProfile/list", (p) => {
    const start = p.cursor ? Number.parseInt(p.cursor, 10) : 0;
    if (!Number.isSafeInteger(start) || start < 0 || (p.cursor && String(start) !== p.cursor)) throw invalidParams("Invalid params: bad cursor");
    const limit = p.limit ?? PERMISSION_PROFILES.length;
    const data = PERMISSION_PROFILES.slice(start, start + limit).map((x) => ({ id: x.id, description: x.description, allowed: true }));
    return { data, nextCursor: start + limit < PERMISSION_PROFILES.length ? String(start + limit) : null };
  });

  // Goals and background terminals do not exist here; the thread must, though.
  conn.handle("thread/goal/get", (p) => withThread(async () => (await app.runtime.getRecord(p.threadId), { goal: null })));
  conn.handle("thread/backgroundTerminals/list", (p) =>
    withThread(async () => (await app.runtime.getRecord(p.threadId), { data: [], nextCursor: null })),
  );
}
