/**
 * Workspace path safety: every path the model gives is resolved against the thread's cwd and
 * checked against the thread's SandboxView (src/sandbox/view.ts) — the same view the OS sandbox
 * mounts for its commands — after resolving symbolic links as the sandbox would (at any
 * component, including the last one and for files that do not exist yet). Results are values,
 * never exceptions: a refused path becomes a tool result that says why.
 *
 * What a tool may do (docs/security.md):
 *   read     everything a command could read: all but the hidden paths (the server's home, token
 *            and secret files), whatever the mode and the roots
 *   write    `read-only` → nothing; `workspace-write` → the writable roots (the thread cwd,
 *            writableRoots, /tmp — the thread's private one — and $TMPDIR) minus their protected
 *            entries (`.git`, `.codex`, `.agent-app-server`); `danger-full-access` → anything
 *            but the hidden paths. The server's configuration files are never written.
 *   workdir  where a command may start without asking: the thread cwd (and, under
 *            workspace-write, the writable roots); anything under danger-full-access, hidden
 *            paths included (an unconfined command is not held to them)
 */
import { promises as fs } from "node:fs";
import path from "node:path";
import type { SandboxMode, SandboxPolicy } from "../protocol/common.js";
import { TrustBoundary } from "../sandbox/boundary.js";
import { policyOfMode, resolveSandbox } from "../sandbox/policy.js";
import { isWithin, SandboxView } from "../sandbox/view.js";

export { isWithin };

export type Access = "read" | "write" | "workdir";

/** What a path is checked against; a ToolContext is one (its cwd, sandbox, policy, runner and thread). */
export interface WorkspaceScope {
  /** The thread's working directory (absolute). */
  readonly cwd: string;
  readonly sandbox: SandboxMode;
  /** The full policy (writableRoots, /tmp exclusions); the mode's defaults when absent. */
  readonly sandboxPolicy?: SandboxPolicy;
  /** The server's trust boundary, carried by the command runner; absent: nothing is hidden. */
  readonly commands?: { readonly boundary: TrustBoundary };
  /** Whose private /tmp the paths refer to. */
  readonly threadId?: string;
}

/** A path that resolved and is allowed. */
export interface AllowedPath {
  ok: true;
  /** Absolute, normalised, as the model named it (for display and items). */
  path: string;
  /** The same location with every symbolic link resolved, as seen inside the sandbox. */
  real: string;
  /** Where that is on the host: what to operate on (differs from `real` in a private /tmp). */
  host: string;
}

/**
 * A refused path. `outside` is true when the path itself is well-formed and only lies outside
 * what the sandbox allows: a user may still grant it at an approval prompt. Otherwise (empty
 * path, NUL byte, symlink loop, a hidden path, the server's configuration …) it is refused outright.
 */
export interface RefusedPath {
  ok: false;
  reason: string;
  outside: boolean;
  path?: string;
  real?: string;
  host?: string;
}

export type PathCheck = AllowedPath | RefusedPath;

const NO_BOUNDARY = new TrustBoundary();

/** The view a scope's tools see: its policy resolved and joined with the server's boundary. */
export async function viewOf(scope: WorkspaceScope): Promise<SandboxView> {
  const policy = scope.sandboxPolicy ?? policyOfMode(scope.sandbox);
  const confinement = await resolveSandbox(policy, scope.cwd, { tmpScope: scope.threadId });
  return SandboxView.create(scope.commands?.boundary ?? NO_BOUNDARY, confinement);
}

const MAX_LINK_DEPTH = 40;

/**
 * realpath that also works for paths that do not exist (yet): the nearest existing ancestor is
 * resolved and the missing components are appended. A dangling symlink is followed to where it
 * points, so writing through it cannot land outside the checked location.
 */
export async function realpathLoose(abs: string, depth = 0): Promise<string> {
  if (depth > MAX_LINK_DEPTH) throw Object.assign(new Error(`too many levels of symbolic links: ${abs}`), { code: "ELOOP" });
  try {
    return await fs.realpath(abs);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== "ENOENT" && code !== "ENOTDIR") throw err;
  }
  const parent = path.dirname(abs);
  if (parent === abs) return abs;
  let isLink = false;
  try {
    isLink = (await fs.lstat(abs)).isSymbolicLink();
  } catch {
    isLink = false; // absent: resolved as a path that does not exist yet, below
  }
  const realParent = await realpathLoose(parent, depth + 1);
  if (isLink) {
    const target = await fs.readlink(abs);
    return realpathLoose(path.resolve(realParent, target), depth + 1);
  }
  return path.join(realParent, path.basename(abs));
}

function describeRoots(roots: string[]): string {
  return roots.length === 1 ? roots[0] : roots.join(", ");
}

/** Where commands may start without asking (the workspace), or null for anywhere. */
function workdirRoots(view: SandboxView, cwd: string): string[] | null {
  if (view.mode === "danger-full-access") return null;
  return view.mode === "read-only" ? [view.confinement?.cwd ?? cwd] : view.writableRoots;
}

/**
 * Resolves `input` (relative to scope.cwd, or absolute) for `access` and checks it against the
 * thread's view, symlinks included.
 */
export async function checkPath(scope: WorkspaceScope, input: string, access: Access): Promise<PathCheck> {
  if (typeof input !== "string" || input.trim() === "") return { ok: false, reason: "the path is empty", outside: false };
  if (input.includes("\0")) return { ok: false, reason: "the path contains a NUL byte", outside: false };
  const lexical = path.resolve(scope.cwd, input);
  const view = await viewOf(scope);
  let real: string;
  try {
    real = await view.resolve(lexical);
  } catch (err) {
    return { ok: false, reason: `cannot resolve ${input}: ${(err as Error).message}`, outside: false, path: lexical };
  }
  const at = { path: lexical, real, host: view.toHost(real) };
  // An unconfined command (danger-full-access) is not held to the hidden paths: it can read them anyway.
  if (access === "workdir" && view.mode === "danger-full-access") return { ok: true, ...at };
  const hidden = view.hiddenAt(real) ?? view.hiddenAt(lexical);
  if (hidden !== null) {
    const via = real === lexical || view.hiddenAt(lexical) !== null ? "" : ` (it resolves through a symbolic link to ${real})`;
    return { ok: false, reason: `${input} is inside ${hidden}, which the server keeps hidden from every tool and command${via}`, outside: false, ...at };
  }
  if (access === "read") return { ok: true, ...at };

  const escapes = !path.isAbsolute(input) && input.split(/[\\/]/).includes("..");
  const outsideOf = (roots: string[], what: string): RefusedPath => {
    const lexicallyInside = roots.some((r) => isWithin(lexical, r));
    const reason = lexicallyInside
      ? `${input} resolves through a symbolic link to ${real}, which is outside the ${what} roots (${describeRoots(roots)})`
      : escapes
        ? `${input} escapes the workspace (${scope.cwd}) via ".."`
        : `${lexical} is outside the ${what} roots (${describeRoots(roots)})`;
    return { ok: false, reason, outside: true, ...at };
  };
  if (access === "workdir") {
    const roots = workdirRoots(view, scope.cwd);
    return roots === null || roots.some((r) => isWithin(real, r)) ? { ok: true, ...at } : outsideOf(roots, "workspace");
  }

  const protection = view.protection(real) ?? view.protection(lexical);
  if (protection?.kind === "config")
    return { ok: false, reason: `${input} is the server's configuration file ${protection.path}, which no tool may write`, outside: false, ...at };
  if (view.mode === "read-only") return { ok: false, reason: `the sandbox is read-only: nothing may be written (${input})`, outside: true, ...at };
  if (!view.inWritableRoot(real)) return outsideOf(view.writableRoots, "writable");
  if (protection !== null)
    return { ok: false, reason: `${input} is inside ${protection.path}, which stays read-only in the ${scope.sandbox} sandbox`, outside: true, ...at };
  return { ok: true, ...at };
}

/** How a path is shown to the model and in diffs: relative to cwd when inside it. */
export function displayPath(abs: string, cwd: string): string {
  const base = path.resolve(cwd);
  if (isWithin(abs, base)) return path.relative(base, abs) || ".";
  return abs;
}
