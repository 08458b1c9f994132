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
 * (apply_patch writes), so the two can never disagree about what is writable: a Confinement joined
 * with the server's TrustBoundary is a SandboxView (view.ts), which both consult.
 */
import { promises as fs } from "node:fs";
import path from "node:path";
import type { SandboxMode, SandboxPolicy } from "../protocol/common.js";

export interface Confinement {
  mode: Exclude<SandboxMode, "danger-full-access">;
  /** Symlink-free absolute directories the command may write (empty for read-only). */
  writableRoots: string[];
  /** Paths inside writable roots that stay read-only (each root's `.git`, `.codex`, `.agent-app-server`). */
  readOnlyPaths: string[];
  network: boolean;
  /** The thread's working directory (real path); visible even inside a hidden directory. */
  cwd?: string;
  /** Whose private /tmp the process sees (a thread id …); absent: the server's own. */
  tmpScope?: string;
}

/** Entries of a writable root that stay read-only (Codex keeps `.git` and `.codex` so). */
export const PROTECTED_NAMES = [".git", ".codex", ".agent-app-server"] as const;

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

/** Each writable root's protected entries (`.git` directory or gitdir file …) that exist. */
async function protectedPathsOf(roots: readonly string[]): Promise<string[]> {
  const out: string[] = [];
  for (const root of roots) {
    for (const name of PROTECTED_NAMES) {
      const p = path.join(root, name);
      const st = await fs.lstat(p).catch(() => null); // absent (or not reachable by us): nothing to protect
      if (st !== null && (st.isDirectory() || st.isFile()) && !out.includes(p)) out.push(p);
    }
  }
  return out;
}

export interface ResolveOptions {
  env?: NodeJS.ProcessEnv;
  /** Whose private /tmp (see Confinement.tmpScope). */
  tmpScope?: string;
}

export async function resolveSandbox(policy: SandboxPolicy, cwd: string, opts: ResolveOptions = {}): Promise<ResolvedSandbox> {
  if (policy.type === "dangerFullAccess") return null;
  const realCwd = (await realDir(cwd)) ?? path.resolve(cwd);
  const scope = opts.tmpScope === undefined ? {} : { tmpScope: opts.tmpScope };
  if (policy.type === "readOnly") return { mode: "read-only", writableRoots: [], readOnlyPaths: [], network: policy.networkAccess, cwd: realCwd, ...scope };
  const writableRoots = await writableRootsOf(policy, cwd, opts.env ?? process.env);
  return { mode: "workspace-write", writableRoots, readOnlyPaths: await protectedPathsOf(writableRoots), network: policy.networkAccess, cwd: realCwd, ...scope };
}
