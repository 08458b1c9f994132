/**
 * Workspace path safety: every path the model gives is resolved against the thread's cwd and
 * checked against the roots the sandbox allows, after resolving symbolic links (at any
 * component, including the last one and for files that do not exist yet: the nearest existing
 * ancestor is resolved with realpath). Results are values, never exceptions: a refused path
 * becomes a tool result that says why.
 *
 * Roots (DESIGN.md §10):
 *   read:  the thread cwd (plus the writable roots under `workspace-write`);
 *          anything under `danger-full-access`.
 *   write: `read-only` → nothing; `workspace-write` → the thread cwd, the policy's writableRoots,
 *          /tmp and $TMPDIR unless excluded, with each root's `.git` kept read-only (the same
 *          roots the OS sandbox binds writable: src/sandbox/policy.ts); `danger-full-access` → anything.
 */
import { promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { SandboxMode, SandboxPolicy } from "../protocol/common.js";

export type Access = "read" | "write";

/** What a path is checked against; a ToolContext is one (its cwd, sandbox and sandboxPolicy). */
export interface WorkspaceScope {
  /** The thread's working directory (absolute). */
  readonly cwd: string;
  readonly sandbox: SandboxMode;
  /** The full policy (writableRoots, /tmp exclusions); the mode's defaults when absent. */
  readonly sandboxPolicy?: SandboxPolicy;
}

/** A path that resolved and lies inside the allowed roots. */
export interface AllowedPath {
  ok: true;
  /** Absolute, normalised, as the model named it (for display and items). */
  path: string;
  /** The same location with every symbolic link resolved: what to operate on. */
  real: string;
}

/**
 * A refused path. `outside` is true when the path itself is well-formed and only lies outside
 * the allowed roots: a user may still grant it at an approval prompt. Otherwise (empty path,
 * NUL byte, symlink loop …) it is refused outright.
 */
export interface RefusedPath {
  ok: false;
  reason: string;
  outside: boolean;
  path?: string;
  real?: string;
}

export type PathCheck = AllowedPath | RefusedPath;

/** True when `child` is `parent` or lies below it (both absolute and normalised). */
export function isWithin(child: string, parent: string): boolean {
  const rel = path.relative(parent, child);
  return rel === "" || (rel !== ".." && !rel.startsWith(`..${path.sep}`) && !path.isAbsolute(rel));
}

/** The roots an access may touch; null means "anything" (danger-full-access). */
export function allowedRoots(scope: WorkspaceScope, access: Access): string[] | null {
  if (scope.sandbox === "danger-full-access") return null;
  if (scope.sandbox === "read-only") return access === "read" ? [path.resolve(scope.cwd)] : [];
  const p = scope.sandboxPolicy?.type === "workspaceWrite" ? scope.sandboxPolicy : null;
  const roots = [path.resolve(scope.cwd), ...(p?.writableRoots ?? []).map((r) => path.resolve(scope.cwd, r))];
  if (!p?.excludeSlashTmp) roots.push("/tmp");
  if (!p?.excludeTmpdirEnvVar) roots.push(path.resolve(os.tmpdir()));
  return [...new Set(roots)];
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
    isLink = false;
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

/**
 * Resolves `input` (relative to scope.cwd, or absolute) for `access` and checks it against the
 * sandbox's roots, symlinks included.
 */
export async function checkPath(scope: WorkspaceScope, input: string, access: Access): Promise<PathCheck> {
  if (typeof input !== "string" || input.trim() === "") return { ok: false, reason: "the path is empty", outside: false };
  if (input.includes("\0")) return { ok: false, reason: "the path contains a NUL byte", outside: false };
  const lexical = path.resolve(scope.cwd, input);
  let real: string;
  try {
    real = await realpathLoose(lexical);
  } catch (err) {
    return { ok: false, reason: `cannot resolve ${input}: ${(err as Error).message}`, outside: false, path: lexical };
  }
  const roots = allowedRoots(scope, access);
  if (roots === null) return { ok: true, path: lexical, real };

  const what = access === "write" ? "writable" : "readable";
  if (roots.length === 0) {
    return { ok: false, reason: `the sandbox is read-only: nothing may be written (${input})`, outside: true, path: lexical, real };
  }
  const realRoots: string[] = [];
  for (const root of roots) {
    try {
      realRoots.push(await realpathLoose(root));
    } catch {
      realRoots.push(root);
    }
  }
  const lexicallyInside = roots.some((r) => isWithin(lexical, r)) || realRoots.some((r) => isWithin(lexical, r));
  if (!lexicallyInside) {
    const escapes = !path.isAbsolute(input) && input.split(/[\\/]/).includes("..");
    const reason = escapes
      ? `${input} escapes the workspace (${scope.cwd}) via ".."`
      : `${lexical} is outside the ${what} roots (${describeRoots(roots)})`;
    return { ok: false, reason, outside: true, path: lexical, real };
  }
  if (!realRoots.some((r) => isWithin(real, r))) {
    return {
      ok: false,
      reason: `${input} resolves through a symbolic link to ${real}, which is outside the ${what} roots (${describeRoots(roots)})`,
      outside: true,
      path: lexical,
      real,
    };
  }
  const gitDir = access === "write" ? realRoots.map((r) => path.join(r, ".git")).find((g) => isWithin(real, g)) : undefined;
  if (gitDir !== undefined) return { ok: false, reason: `${input} is inside ${gitDir}, which stays read-only in the ${scope.sandbox} sandbox`, outside: true, path: lexical, real };
  return { ok: true, path: lexical, real };
}

/** How a path is shown to the model and in diffs: relative to cwd when inside it. */
export function displayPath(abs: string, cwd: string): string {
  const base = path.resolve(cwd);
  if (isWithin(abs, base)) return path.relative(base, abs) || ".";
  return abs;
}
