/**
 * Allowed workspaces (docs/teams.md): a confined user's threads work only inside the user's roots
 * — a thread's cwd, the writable roots of its sandbox, the cwd of command/exec and the roots of a
 * file search — and only users configured for it get danger-full-access. Paths are resolved the
 * way the sandbox resolves them (SandboxView.resolve: every symbolic link followed, components
 * that do not exist yet appended), so a link inside a root that points out of it is outside.
 * Inside the roots the thread's sandbox policy applies unchanged.
 */
import path from "node:path";
import type { SandboxMode, SandboxPolicy } from "../protocol/common.js";
import { PermissionsError, resolveSandbox, type SandboxRequest } from "../runtime/permissions.js";
import { TrustBoundary } from "../sandbox/boundary.js";
import { modeOfPolicy } from "../sandbox/policy.js";
import { isWithin, SandboxView } from "../sandbox/view.js";
import type { Principal } from "./principal.js";

/** What a request would make a thread (or a command, or a search) work on. */
export interface WorkspaceUse {
  /** Absolute working directory. */
  cwd?: string | null;
  /** Writable roots besides the cwd (absolute, or relative to cwd). */
  writableRoots?: readonly string[];
  /** Directories searched (fuzzy file search). */
  searchRoots?: readonly string[];
  /** The sandbox mode asked for. */
  mode?: SandboxMode | null;
}

export class WorkspaceRefusedError extends Error {}

/** The sandbox scope of a user's command/exec calls (their private /tmp; what is hidden from them). */
export const commandExecScope = (userId: string) => `command-exec:${userId}`;

/** The user of a command/exec scope, or null for any other scope (a thread id). */
export function userOfCommandExecScope(scope: string): string | null {
  return scope.startsWith("command-exec:") ? scope.slice("command-exec:".length) : null;
}

/** The directory a user's new threads and commands run in when the client names none. */
export function workspaceBase(principal: Principal, serverDefault: string): string {
  return principal.roots?.[0] ?? serverDefault;
}

/** What a thread/start, resume, fork, turn/start or command/exec's sandbox fields ask for. */
export function sandboxUse(req: SandboxRequest, current: SandboxMode): Pick<WorkspaceUse, "mode" | "writableRoots"> {
  let resolved: { sandbox?: SandboxMode | null; sandboxPolicy?: SandboxPolicy | null };
  try {
    resolved = resolveSandbox(req, current);
  } catch (err) {
    if (err instanceof PermissionsError) return {}; // the handler refuses it with -32602
    throw err;
  }
  const policy = resolved.sandboxPolicy;
  const mode = resolved.sandbox ?? (policy ? modeOfPolicy(policy) : null);
  return { mode, writableRoots: policy?.type === "workspaceWrite" ? policy.writableRoots : [] };
}

const HOST = SandboxView.create(new TrustBoundary(), null);

/** `p` with every symbolic link resolved, as the sandbox sees it. */
async function real(p: string): Promise<string> {
  return (await HOST).resolve(path.resolve(p));
}

/**
 * Throws WorkspaceRefusedError when `use` leaves `owner`'s roots or asks for danger-full-access
 * it may not have. `what` names the thing in the message ("the thread's cwd", "command/exec's cwd").
 */
export async function checkWorkspace(owner: Principal, use: WorkspaceUse, what: string): Promise<void> {
  if (use.mode === "danger-full-access" && !owner.dangerFullAccess)
    throw new WorkspaceRefusedError(`danger-full-access is not allowed for ${owner.name} (an admin can allow it: app-server users add ${owner.name} --danger-full-access)`);
  const roots = owner.roots;
  if (roots === null) return;
  const paths: Array<[string, string]> = [];
  if (use.cwd) {
    if (!path.isAbsolute(use.cwd)) throw new WorkspaceRefusedError(`${what} must be an absolute path (got ${use.cwd})`);
    paths.push([use.cwd, what]);
  }
  for (const r of use.writableRoots ?? []) paths.push([use.cwd ? path.resolve(use.cwd, r) : r, "a writable root"]);
  for (const r of use.searchRoots ?? []) paths.push([r, "a search root"]);
  if (paths.length === 0) return;
  if (roots.length === 0) throw new WorkspaceRefusedError(`${owner.name} has no workspace roots: nothing may run (an admin adds them with app-server users add NAME --root DIR)`);
  const realRoots = await Promise.all(roots.map(real));
  for (const [p, label] of paths) {
    if (!path.isAbsolute(p)) throw new WorkspaceRefusedError(`${label} must be an absolute path (got ${p})`);
    const resolved = await real(p);
    if (realRoots.some((r) => isWithin(resolved, r))) continue;
    const via = resolved === path.resolve(p) ? "" : ` (it resolves through a symbolic link to ${resolved})`;
    throw new WorkspaceRefusedError(`${label} ${p} is outside ${owner.name}'s workspace roots (${roots.join(", ")})${via}`);
  }
}
