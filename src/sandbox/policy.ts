/**
 * What a sandbox policy means for one command, in concrete paths (DESIGN.md §10, Codex's
 * semantics):
 *   readOnly          the whole filesystem readable, nothing writable, no network
 *   workspaceWrite    writable: the thread cwd, `writableRoots`, /tmp (unless excludeSlashTmp) and
 *                     $TMPDIR (unless excludeTmpdirEnvVar); a `.git` inside a writable root stays
 *                     read-only; network only with `networkAccess`
 *   dangerFullAccess  no sandbox: the command runs as the server's user
 *
 * The same resolution serves the OS sandbox (bubblewrap binds) and the file tools' path checks
 * (apply_patch writes), so the two can never disagree about what is writable.
 */
import { promises as fs } from "node:fs";
import path from "node:path";
import type { SandboxMode, SandboxPolicy } from "../protocol/common.js";

export interface Confinement {
  mode: Exclude<SandboxMode, "danger-full-access">;
  /** Symlink-free absolute directories the command may write (empty for read-only). */
  writableRoots: string[];
  /** Paths inside writable roots that stay read-only (each root's `.git`). */
  readOnlyPaths: string[];
  network: boolean;
}

/** null = no confinement (danger-full-access). */
export type ResolvedSandbox = Confinement | null;

/** The policy a bare mode stands for (thread/start gives a mode; turn/start may give a policy). */
export function policyOfMode(mode: SandboxMode): SandboxPolicy {
  switch (mode) {
    case "danger-full-access":
      return { type: "dangerFullAccess" };
    case "read-only":
      return { type: "readOnly", networkAccess: false };
    default:
      return { type: "workspaceWrite", writableRoots: [], networkAccess: false, excludeTmpdirEnvVar: false, excludeSlashTmp: false };
  }
}

export function modeOfPolicy(policy: SandboxPolicy): SandboxMode {
  return policy.type === "dangerFullAccess" ? "danger-full-access" : policy.type === "readOnly" ? "read-only" : "workspace-write";
}

async function realDir(p: string): Promise<string | null> {
  try {
    const real = await fs.realpath(p);
    return (await fs.stat(real)).isDirectory() ? real : null;
  } catch {
    return null;
  }
}

/** The directories a workspace-write policy makes writable, symlinks resolved, missing ones dropped. */
export async function writableRootsOf(policy: SandboxPolicy, cwd: string, env: NodeJS.ProcessEnv = process.env): Promise<string[]> {
  if (policy.type !== "workspaceWrite") return [];
  const candidates = [cwd, ...policy.writableRoots.map((r) => path.resolve(cwd, r))];
  if (!policy.excludeSlashTmp) candidates.push("/tmp");
  if (!policy.excludeTmpdirEnvVar && env.TMPDIR) candidates.push(path.resolve(env.TMPDIR));
  const out: string[] = [];
  for (const c of candidates) {
    const real = await realDir(c);
    if (real !== null && !out.includes(real)) out.push(real);
  }
  return out;
}

/** Each writable root's `.git` (directory or gitdir file), which stays read-only. */
async function protectedPathsOf(roots: readonly string[]): Promise<string[]> {
  const out: string[] = [];
  for (const root of roots) {
    const git = path.join(root, ".git");
    const st = await fs.lstat(git).catch(() => null);
    if (st !== null && (st.isDirectory() || st.isFile())) out.push(git);
  }
  return out;
}

export async function resolveSandbox(policy: SandboxPolicy, cwd: string, env: NodeJS.ProcessEnv = process.env): Promise<ResolvedSandbox> {
  if (policy.type === "dangerFullAccess") return null;
  if (policy.type === "readOnly") return { mode: "read-only", writableRoots: [], readOnlyPaths: [], network: policy.networkAccess };
  const writableRoots = await writableRootsOf(policy, cwd, env);
  return { mode: "workspace-write", writableRoots, readOnlyPaths: await protectedPathsOf(writableRoots), network: policy.networkAccess };
}
