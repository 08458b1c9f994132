/**
 * Codex's permission profiles mapped onto this server's sandbox. A profile is one more way to say
 * what `sandbox` / `sandboxPolicy` say; threads store only the mode and policy (migration 002),
 * and the active profile is derived back from them, so every request shape stays consistent.
 *
 * Built-in profiles (Codex 0.171): `:read-only`, `:workspace`, `:danger-full-access`. User-defined
 * `[permissions.<id>]` profiles live in Codex's config.toml, which this server does not read, so
 * any other id is refused rather than silently run with a different sandbox.
 */
import type { SandboxMode, SandboxPolicy } from "../protocol/common.js";

export const PERMISSION_PROFILES: ReadonlyArray<{ id: string; mode: SandboxMode; description: string }> = [
  { id: ":read-only", mode: "read-only", description: "Read files anywhere; no writes, no network (sandbox read-only)" },
  { id: ":workspace", mode: "workspace-write", description: "Write the working directory, /tmp and the writable roots; no network (sandbox workspace-write)" },
  { id: ":danger-full-access", mode: "danger-full-access", description: "No sandbox (danger-full-access)" },
];

export class PermissionsError extends Error {}

export interface SandboxRequest {
  sandbox?: SandboxMode | null;
  sandboxPolicy?: SandboxPolicy | null;
  permissions?: string | null;
  runtimeWorkspaceRoots?: string[] | null;
}

/**
 * Turns `permissions` and `runtimeWorkspaceRoots` into the sandbox fields the runtime stores.
 * Throws PermissionsError for an unknown profile, for a profile given together with a sandbox,
 * and for relative roots.
 */
export function resolveSandbox(req: SandboxRequest, current: SandboxMode): { sandbox?: SandboxMode | null; sandboxPolicy?: SandboxPolicy | null } {
  let sandbox = req.sandbox;
  let sandboxPolicy = req.sandboxPolicy;
  if (req.permissions) {
    if (sandbox || sandboxPolicy) throw new PermissionsError(`permissions cannot be combined with ${sandbox ? "sandbox" : "sandboxPolicy"}`);
    const profile = PERMISSION_PROFILES.find((p) => p.id === req.permissions);
    if (!profile) throw new PermissionsError(`unknown permission profile ${req.permissions} (known: ${PERMISSION_PROFILES.map((p) => p.id).join(", ")})`);
    sandbox = profile.mode;
  }
  const roots = req.runtimeWorkspaceRoots ?? [];
  const relative = roots.find((r) => !r.startsWith("/"));
  if (relative) throw new PermissionsError(`runtimeWorkspaceRoots must be absolute paths: ${relative}`);
  if (roots.length) {
    // Writable roots only mean something to the workspace sandbox; elsewhere they are ignored, as in Codex.
    if (sandboxPolicy?.type === "workspaceWrite") sandboxPolicy = { ...sandboxPolicy, writableRoots: [...sandboxPolicy.writableRoots, ...roots] };
    else if (!sandboxPolicy && (sandbox ?? current) === "workspace-write")
      sandboxPolicy = { type: "workspaceWrite", writableRoots: roots, networkAccess: false, excludeTmpdirEnvVar: false, excludeSlashTmp: false };
  }
  return { sandbox, sandboxPolicy };
}

/** The profile a stored sandbox is; null when a custom policy (writable roots, network…) was set. */
export function activeProfile(r: { sandbox: SandboxMode; sandboxPolicy: SandboxPolicy | null }): { id: string; extends: null } | null {
  if (r.sandboxPolicy) return null;
  return { id: PERMISSION_PROFILES.find((p) => p.mode === r.sandbox)!.id, extends: null };
}
