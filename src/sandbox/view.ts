/**
 * What one confinement looks like from inside: the single answer to "may this path be read or
 * written, and where is it really?", given to the OS sandbox (as bubblewrap mounts) and to every
 * file tool (as path checks), so that a tool can never reach what a command cannot.
 *
 * The view, in the order bubblewrap builds it (deeper mounts cover shallower ones):
 *   /                      read-only (read-only and workspace-write alike)
 *   hidden paths           masked: an empty read-only directory or /dev/null (boundary.ts)
 *   /tmp                   under workspace-write, the thread's private /tmp (a host directory of
 *                          the server's), unless /tmp is shared or excluded
 *   the installation       where the server's own files lie under /tmp, bound back read-only from
 *                          the host (boundary.ts: a clone in /tmp still runs its MCP servers)
 *   writable roots         writable; a root equal to a hidden path stays hidden, a root inside one
 *                          is visible (the user chose that directory)
 *   pins                   every directory between a writable root and a protected or hidden path
 *                          is bound onto itself: a mount point cannot be renamed, so a command
 *                          cannot move `a/` aside and plant a new `a/conf/mcp.json` (or home)
 *   protected paths        read-only again: `.git`, `.codex`, `.agent-app-server` of each root and
 *                          the server's configuration files
 *
 * Paths given to the methods are as seen inside the sandbox ("virtual"); `toHost` says where a
 * tool must do the I/O (only the private /tmp differs).
 */
import { promises as fs } from "node:fs";
import path from "node:path";
import type { SandboxMode } from "../protocol/common.js";
import { TrustBoundary } from "./boundary.js";
import { PROTECTED_NAMES, type Confinement } from "./policy.js";

export interface MaskedPath {
  path: string;
  kind: "file" | "dir";
}

/** True when `child` is `parent` or lies below it (both absolute and normalised). */
export function isWithin(child: string, parent: string): boolean {
  if (parent === "/") return child.startsWith("/");
  return child === parent || child.startsWith(`${parent}/`);
}

const strictlyWithin = (child: string, parent: string) => child !== parent && isWithin(child, parent);
const depth = (p: string) => (p === "/" ? 0 : p.split("/").length - 1);

export type Protection = { kind: "config" | "name"; path: string };

export interface SandboxViewData {
  hidden: string[];
  configFiles: string[];
  confinement: Confinement | null;
  tmpHost: string | null;
  binds: string[];
  installation: string[];
}

const MAX_LINKS = 40;

async function existingMasks(paths: readonly string[]): Promise<MaskedPath[]> {
  const out: MaskedPath[] = [];
  for (const p of paths) {
    const st = await fs.lstat(p).catch(() => null); // absent (or not reachable by us): nothing to mask
    if (st === null || st.isSymbolicLink()) continue; // a link's target is listed by its real path
    if (!out.some((m) => m.path === p)) out.push({ path: p, kind: st.isDirectory() ? "dir" : "file" });
  }
  return out;
}

export class SandboxView {
  private constructor(
    readonly boundary: TrustBoundary,
    /** What is hidden in this view: the boundary's paths, plus those hidden from its scope (boundary.hiddenFor). */
    readonly hidden: readonly string[],
    /** null: danger-full-access (no sandbox; tools still keep off hidden paths and configs). */
    readonly confinement: Confinement | null,
    /** The host directory seen as /tmp, or null when /tmp is the host's. */
    readonly tmpHost: string | null,
    /** Writable roots bound at their own path (the private /tmp is not one of them). */
    private readonly binds: readonly string[],
  ) {
    this.installationInTmp =
      tmpHost === null ? [] : boundary.installation.filter((d) => strictlyWithin(d, "/tmp") && !binds.some((b) => isWithin(d, b)));
  }

  /** The server's own directories that lie under a private /tmp: seen from the host, read-only. */
  private readonly installationInTmp: readonly string[];

  static async create(boundary: TrustBoundary, c: Confinement | null): Promise<SandboxView> {
    const hidden = boundary.hiddenFor(c?.tmpScope);
    if (c === null || c.mode !== "workspace-write" || !c.writableRoots.includes("/tmp")) return new SandboxView(boundary, hidden, c, null, c?.writableRoots ?? []);
    const tmp = boundary.privateTmp(c.tmpScope ?? "server");
    if (tmp === null) return new SandboxView(boundary, hidden, c, null, c.writableRoots);
    return new SandboxView(boundary, hidden, c, await tmp, c.writableRoots.filter((r) => r !== "/tmp"));
  }

  /** Plain data to rebuild the same view in a worker thread (fromData). */
  toData(): SandboxViewData {
    return {
      hidden: [...this.hidden],
      configFiles: this.boundary.configFiles,
      confinement: this.confinement,
      tmpHost: this.tmpHost,
      binds: [...this.binds],
      installation: [...this.boundary.installation],
    };
  }

  static fromData(data: SandboxViewData): SandboxView {
    return new SandboxView(new TrustBoundary({ hidden: data.hidden, configFiles: data.configFiles, installation: data.installation }), data.hidden, data.confinement, data.tmpHost, data.binds);
  }

  get mode(): SandboxMode {
    return this.confinement?.mode ?? "danger-full-access";
  }

  /** The writable roots as seen inside (the private /tmp included). */
  get writableRoots(): string[] {
    return this.tmpHost === null ? [...this.binds] : ["/tmp", ...this.binds];
  }

  /** Whether `p` lies in the private /tmp (so it is elsewhere on the host). */
  private remapped(p: string): boolean {
    return this.tmpHost !== null && isWithin(p, "/tmp") && !this.binds.some((b) => isWithin(p, b)) && !this.installationInTmp.some((d) => isWithin(p, d));
  }

  /** Where a path seen inside the sandbox is on the host. */
  toHost(p: string): string {
    if (!this.remapped(p)) return p;
    return path.join(this.tmpHost!, path.relative("/tmp", p));
  }

  /** Directories visible although inside a hidden one: writable roots and the thread's cwd. */
  private get exposed(): string[] {
    const cwd = this.confinement?.cwd;
    return cwd && !this.binds.includes(cwd) ? [...this.binds, cwd] : [...this.binds];
  }

  /** The hidden path that covers `p`, or null when `p` is visible. */
  hiddenAt(p: string): string | null {
    if (this.remapped(p)) return null;
    for (const h of this.hidden) {
      if (!isWithin(p, h)) continue;
      // A directory the user chose inside a hidden one is visible, the hidden one itself is not.
      if (this.exposed.some((e) => strictlyWithin(e, h) && isWithin(p, e))) continue;
      return h;
    }
    return null;
  }

  /** Why `p` stays read-only although it may lie in a writable root; null when it does not. */
  protection(p: string): Protection | null {
    const config = this.boundary.configFiles.find((f) => isWithin(p, f));
    if (config !== undefined) return { kind: "config", path: config };
    if (this.confinement === null) return null;
    for (const root of this.writableRoots) {
      if (!strictlyWithin(p, root)) continue;
      const first = path.relative(root, p).split("/")[0]!;
      if ((PROTECTED_NAMES as readonly string[]).includes(first)) return { kind: "name", path: path.join(root, first) };
    }
    return null;
  }

  /** Whether `p` lies in a writable root (protection and hidden paths are checked apart). */
  inWritableRoot(p: string): boolean {
    if (this.confinement === null) return true;
    if (this.installationInTmp.some((d) => isWithin(p, d)) && !this.binds.some((b) => isWithin(p, b))) return false;
    return this.writableRoots.some((r) => isWithin(p, r));
  }

  /**
   * `abs` with every symbolic link resolved as the sandbox would resolve it (links in the private
   * /tmp point into the sandbox's view, not the host's). Missing components are appended as
   * named; a dangling link is followed to where it points.
   */
  async resolve(abs: string): Promise<string> {
    const pending = abs.split("/").filter(Boolean);
    let out = "/";
    let links = 0;
    while (pending.length > 0) {
      const name = pending.shift()!;
      if (name === ".") continue;
      if (name === "..") {
        out = path.dirname(out);
        continue;
      }
      const next = path.join(out, name);
      let st;
      try {
        st = await fs.lstat(this.toHost(next));
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code !== "ENOENT" && code !== "ENOTDIR") throw err;
        return path.join(next, ...pending);
      }
      if (!st.isSymbolicLink()) {
        out = next;
        continue;
      }
      if (++links > MAX_LINKS) throw Object.assign(new Error(`too many levels of symbolic links: ${abs}`), { code: "ELOOP" });
      const target = await fs.readlink(this.toHost(next));
      pending.unshift(...target.split("/").filter(Boolean));
      if (target.startsWith("/")) out = "/";
    }
    return out;
  }

  /** The masks this sandbox needs: hidden paths that exist and are visible, and /run without the network. */
  async masks(): Promise<MaskedPath[]> {
    const hidden = this.hidden.filter((h) => !this.remapped(h));
    const run = this.confinement?.network ? [] : ["/run", "/var/run"];
    return existingMasks([...hidden, ...run]);
  }

  /**
   * bubblewrap's mount arguments (after `--ro-bind / / --dev /dev --proc /proc`) and the masks
   * to remount read-only at the end. `cwd` is the command's working directory.
   */
  async mountArgs(cwd: string): Promise<{ mounts: string[]; readOnlyMasks: string[] }> {
    const c = this.confinement;
    if (c === null) throw new Error("danger-full-access has no sandbox to mount");
    const masks = await this.masks();
    const ops: Array<{ path: string; rank: number; args: string[] }> = [];
    const add = (p: string, rank: number, args: string[]) => {
      if (!ops.some((o) => o.path === p && o.rank <= rank)) ops.push({ path: p, rank, args });
    };
    const maskPaths = new Set(masks.map((m) => m.path));
    for (const m of masks) add(m.path, 0, m.kind === "dir" ? ["--tmpfs", m.path] : ["--ro-bind", "/dev/null", m.path]);
    if (this.tmpHost !== null) add("/tmp", 1, ["--bind", this.tmpHost, "/tmp"]);
    for (const d of this.installationInTmp) add(d, 1, ["--ro-bind", d, d]);
    for (const root of this.binds) if (!maskPaths.has(root)) add(root, 1, ["--bind", root, root]);
    // The thread's cwd inside a hidden directory stays visible (read-only unless a root made it writable).
    if (c.cwd && !this.binds.some((r) => isWithin(c.cwd!, r)) && masks.some((m) => strictlyWithin(c.cwd!, m.path))) add(c.cwd, 1, ["--ro-bind", c.cwd, c.cwd]);
    // The fresh /dev hides the host's /dev/shm: a working directory there (a RAM-disk checkout) is
    // bound back read-only, or a read-only command could not even start in it.
    if (isWithin(cwd, "/dev") && !this.binds.some((r) => isWithin(cwd, r))) add(cwd, 1, ["--ro-bind", cwd, cwd]);

    const configs = await existingMasks(this.boundary.configFiles);
    const readOnly = [...c.readOnlyPaths, ...configs.map((f) => f.path)].filter((p) => this.hiddenAt(p) === null && this.binds.some((r) => strictlyWithin(p, r)));
    const guarded = [...readOnly, ...masks.map((m) => m.path)];
    for (const g of guarded) {
      for (const root of this.binds) {
        if (!strictlyWithin(g, root)) continue;
        for (let a = path.dirname(g); strictlyWithin(a, root); a = path.dirname(a)) {
          if (maskPaths.has(a) || readOnly.some((r) => isWithin(a, r))) continue;
          add(a, 2, ["--bind", a, a]);
        }
      }
    }
    for (const p of readOnly) add(p, 3, ["--ro-bind", p, p]);

    ops.sort((a, b) => depth(a.path) - depth(b.path) || a.rank - b.rank);
    const applied = new Set(ops.filter((o) => o.rank === 0).map((o) => o.path));
    return { mounts: ops.flatMap((o) => o.args), readOnlyMasks: masks.filter((m) => m.kind === "dir" && applied.has(m.path)).map((m) => m.path) };
  }
}
