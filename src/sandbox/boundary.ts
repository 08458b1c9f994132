/**
 * The server-wide half of the trust boundary: facts that hold for every thread, command and tool.
 *
 *   hidden         the server's home (database, tokens, its own configs), --auth-token-file and
 *                  every *_FILE secret, /etc/shadow …: no command sees them (masked in the
 *                  sandbox) and no tool reads or writes them, whatever the thread's roots
 *   config files   every configuration file the server loads (MCP servers, hooks): read-only for
 *                  commands even inside a writable root, and never written by a tool — a planted
 *                  configuration would run at the next start (or `config/mcpServer/reload`) with
 *                  the server's own rights
 *   private /tmp   where each thread's /tmp lives (`<home>/tmp/<instance>/<scope>`), or null to share
 *                  the host's /tmp
 *   installation   the server's own files (its package directory, the Node binary running it):
 *                  readable in every sandbox, even where a private /tmp covers them — a clone or an
 *                  unpacked release under /tmp runs its MCP servers and hooks from there
 *   limits         resource limits of every sandboxed process (limits.ts), and the largest patch
 *                  apply_patch takes
 *
 * The per-thread half (its roots, network, cwd) is a Confinement (policy.ts); SandboxView joins
 * the two, and both the command sandbox and the file tools ask that one view.
 */
import { realpathSync } from "node:fs";
import { mkdir, readdir, rm } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { DEFAULT_COMMAND_LIMITS, type CommandLimits } from "./limits.js";

/** Always hidden where they exist: readable by root-owned sandboxes, useful to nobody's build. */
export const SYSTEM_SECRETS = ["/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-"];

export interface TrustBoundaryOptions {
  /** Paths no command or tool may read or write (the server's home, token and secret files). */
  hidden?: readonly string[];
  /** Configuration files the server loads: read-only for commands, never written by tools. */
  configFiles?: readonly string[];
  /** The directory private /tmp directories are made under; null or absent: /tmp is shared. */
  tmpBase?: string | null;
  /** The server's own files, readable in every sandbox (default: serverInstallation()). */
  installation?: readonly string[];
  limits?: Partial<CommandLimits>;
  /** The largest patch apply_patch takes, in bytes (default DEFAULT_MAX_PATCH_BYTES). */
  maxPatchBytes?: number;
}

/** 25 MiB: far above any hand-written change; a 20 MiB patch stays within 10× its size in RSS. */
export const DEFAULT_MAX_PATCH_BYTES = 25 * 1024 * 1024;

/** This package's directory and the directory of the Node binary running it (real paths). */
export function serverInstallation(): string[] {
  const dirs = [fileURLToPath(new URL("../../", import.meta.url)), path.dirname(process.execPath)];
  return [...new Set(dirs.map((d) => withRealPath(d).at(-1)!))];
}

/** `p` and, when it differs, its real path (a hidden path reached through a symlink is hidden too). */
function withRealPath(p: string): string[] {
  const abs = path.resolve(p);
  try {
    const real = realpathSync(abs);
    return real === abs ? [abs] : [abs, real];
  } catch {
    return [abs];
  }
}

export class TrustBoundary {
  readonly hidden: string[];
  readonly limits: CommandLimits;
  readonly tmpBase: string | null;
  readonly installation: readonly string[];
  readonly maxPatchBytes: number;
  private readonly configs = new Set<string>();
  private readonly tmpDirs = new Map<string, Promise<string>>();
  private tmpRemoved = false;
  /** Paths hidden from one scope only (a thread: other users' workspaces, docs/teams.md). */
  private scopeHidden: ((scope: string) => readonly string[]) | null = null;

  constructor(opts: TrustBoundaryOptions = {}) {
    this.hidden = [...new Set([...(opts.hidden ?? []), ...SYSTEM_SECRETS].flatMap(withRealPath))];
    this.limits = { ...DEFAULT_COMMAND_LIMITS, ...opts.limits };
    this.tmpBase = opts.tmpBase ? path.resolve(opts.tmpBase) : null;
    this.installation = opts.installation ?? serverInstallation();
    this.maxPatchBytes = opts.maxPatchBytes ?? DEFAULT_MAX_PATCH_BYTES;
    for (const f of opts.configFiles ?? []) this.protectConfig(f);
  }

  /**
   * Where the paths hidden from one scope come from (a thread id, `command-exec:<user>`): on a
   * server a team shares, the other users' workspaces are hidden from a confined user's commands and
   * tools as the server's own secrets are from everyone's.
   */
  setScopeHidden(fn: (scope: string) => readonly string[]): void {
    this.scopeHidden = fn;
  }

  /** The hidden paths of a confinement of `scope` (the server-wide ones, plus the scope's own). */
  hiddenFor(scope: string | undefined): string[] {
    const extra = scope === undefined || this.scopeHidden === null ? [] : this.scopeHidden(scope);
    return extra.length === 0 ? this.hidden : [...new Set([...this.hidden, ...extra.flatMap(withRealPath)])];
  }

  /** Registers a configuration file the server loads (config loading calls this). */
  protectConfig(file: string): void {
    for (const p of withRealPath(file)) this.configs.add(p);
  }

  get configFiles(): string[] {
    return [...this.configs];
  }

  /**
   * The host directory seen as /tmp by `scope` (a thread id, "command-exec", "server"), made on
   * first use with mode 0700; null when /tmp is shared.
   */
  privateTmp(scope: string): Promise<string> | null {
    if (this.tmpBase === null) return null;
    // After shutdown removed them, nothing may make one again (a late spawn would leave it behind).
    if (this.tmpRemoved) return Promise.reject(new Error("the server is shutting down: no private /tmp"));
    const safe = scope.replace(/[^A-Za-z0-9_.-]/g, "_").slice(0, 100) || "server";
    let dir = this.tmpDirs.get(safe);
    if (!dir) {
      const made = path.join(this.tmpBase, safe);
      dir = mkdir(made, { recursive: true, mode: 0o700 }).then(() => made);
      this.tmpDirs.set(safe, dir);
      dir.catch(() => this.tmpDirs.delete(safe));
    }
    return dir;
  }

  /** Removes every private /tmp this process made (at shutdown). */
  async removePrivateTmp(): Promise<void> {
    if (this.tmpBase === null) return;
    this.tmpRemoved = true;
    this.tmpDirs.clear();
    await rm(this.tmpBase, { recursive: true, force: true });
  }
}

/**
 * The base of this process's private /tmp directories under `home`: `<home>/tmp/<pid>-<random>`.
 * Bases of processes that no longer run (a crash, kill -9) are removed first; those of live
 * processes (other --workers on the same home) are left alone.
 */
export async function privateTmpBase(home: string, suffix: string): Promise<string> {
  const parent = path.join(home, "tmp");
  await mkdir(parent, { recursive: true, mode: 0o700 });
  // Tidying up after dead processes is best effort: what cannot be listed or removed now is tried again at the next start.
  for (const name of await readdir(parent).catch(() => [] as string[])) {
    const pid = Number(/^(\d+)-/.exec(name)?.[1]);
    if (!Number.isSafeInteger(pid) || pid === process.pid || processAlive(pid)) continue;
    await rm(path.join(parent, name), { recursive: true, force: true }).catch(() => undefined);
  }
  return path.join(parent, `${process.pid}-${suffix}`);
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}
