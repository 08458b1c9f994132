/**
 * A directory pinned by file descriptor, so that file operations land exactly in the directory
 * that was checked even if the tree changes meanwhile.
 *
 * Why: apply_patch checks each path (workspace.ts `checkPath`: symlinks resolved, the result
 * `real` is symlink-free and inside the allowed roots) and only then writes. Writing by path
 * re-resolves every component at each system call, so a concurrent process that swaps a
 * directory on the way for a symbolic link (`ws/sub` → `/outside`) between the check and the
 * write makes the write land outside the checked location. Since `real` is symlink-free by
 * construction, a component that is a symbolic link at write time means the tree changed: the
 * operation is refused instead of followed.
 *
 * How (Linux): the directory is opened component by component from `/` with
 * `O_RDONLY | O_DIRECTORY | O_NOFOLLOW`, each step relative to the previous one through the magic
 * path `/proc/self/fd/<dirfd>/<name>`. The kernel resolves `/proc/self/fd/<dirfd>` to the inode
 * already opened (not to a path), so this is openat(dirfd, name, O_NOFOLLOW): a component that
 * has become a symbolic link fails (ELOOP/ENOTDIR) and is reported as a `SymlinkInPathError`.
 * Then every file operation (open, create, rename, unlink, mkdir, rmdir, lstat) names
 * `/proc/self/fd/<dirfd>/<basename>`; those calls do not follow a symbolic link in the last
 * component (open gets O_NOFOLLOW), so they act on the pinned directory's own entries. A
 * directory we lack read permission for (search-only, mode 0711) is opened with O_PATH, which
 * /proc resolves the same way.
 *
 * What this does not (and cannot) prevent: a directory that is *renamed* (not replaced by a link)
 * after we opened it still holds our fd, so the write follows the directory itself — the same as
 * writing a file and having someone move it afterwards.
 *
 * Elsewhere (no /proc/self/fd: macOS, Windows, a container without /proc) the class falls back to
 * plain path-based operations, exactly the behaviour apply_patch had before: symlinks in the
 * path are followed at write time, so the check-then-write race stays open there.
 */
import { constants as C, promises as fs, type Dirent, type Stats } from "node:fs";
import type { FileHandle } from "node:fs/promises";
import path from "node:path";

const PROC_FD = "/proc/self/fd";
const O_NOFOLLOW = C.O_NOFOLLOW ?? 0;
const O_DIRECTORY = C.O_DIRECTORY ?? 0;
const O_NONBLOCK = C.O_NONBLOCK ?? 0;
/** Linux's O_PATH (not exported by Node); the same value on every architecture Node runs on. */
const O_PATH = 0o10000000;
const DIR_FLAGS = C.O_RDONLY | O_DIRECTORY | O_NOFOLLOW;

/** A component of a path that must be symlink-free is a symbolic link (the tree changed). */
export class SymlinkInPathError extends Error {
  readonly code = "ESYMLINKPATH";
  constructor(readonly path: string) {
    super(`${path} is a symbolic link`);
  }
}

let support: Promise<boolean> | null = null;
let forced: boolean | null = null;

/** Whether directories can be pinned here (Linux with /proc mounted); probed once. */
export function pinningSupported(): Promise<boolean> {
  if (forced !== null) return Promise.resolve(forced);
  support ??= probe();
  return support;
}

/** Test hook: force the fallback (false) or pinning (true); null restores the probe. */
export function forcePinningForTests(value: boolean | null): void {
  forced = value;
}

async function probe(): Promise<boolean> {
  if (process.platform !== "linux") return false;
  let root: FileHandle | null = null;
  try {
    root = await fs.open("/", DIR_FLAGS);
    const [viaProc, direct] = await Promise.all([fs.stat(`${PROC_FD}/${root.fd}`), fs.stat("/")]);
    return viaProc.isDirectory() && viaProc.ino === direct.ino && viaProc.dev === direct.dev;
  } catch {
    return false; // no usable /proc/self/fd: the path-based fallback (openByPath)
  } finally {
    await root?.close().catch(() => undefined); // a directory handle opened only to look
  }
}

const codeOf = (err: unknown) => (err as NodeJS.ErrnoException | undefined)?.code;

/** Rewrites an error about `/proc/self/fd/N/name` to name the logical path instead. */
function relabel(err: unknown, procPath: string, logical: string): unknown {
  if (!(err instanceof Error)) return err;
  const e = err as NodeJS.ErrnoException;
  if (e.message.includes(procPath)) e.message = e.message.split(procPath).join(logical);
  if (e.path === procPath) e.path = logical;
  const withDest = e as { dest?: string };
  if (withDest.dest === procPath) withDest.dest = logical;
  return e;
}

/**
 * A cleanup step whose failure loses nothing: closing directory handles, and removing directories
 * this open created, which rmdir leaves alone unless empty (one that something was written into
 * since stays, on purpose). On a failed open the original error is what is thrown.
 */
async function quietly(op: () => Promise<unknown>): Promise<void> {
  try {
    await op();
  } catch {
    /* see above */
  }
}

interface CreatedDir {
  /** Where to rmdir it: `/proc/self/fd/<parent fd>/<name>` (or the plain path in fallback). */
  at: string;
  path: string;
}

export interface OpenOptions {
  /** Create missing components (each is remembered, and `removeCreated` removes them). */
  create?: boolean;
}

export class PinnedDir {
  private closed = false;

  private constructor(
    /** The directory as named (absolute, normalised): for messages. */
    readonly path: string,
    /** What file names are joined to: `/proc/self/fd/<fd>`, or `path` when not pinned. */
    private readonly base: string,
    readonly pinned: boolean,
    /** Handles to close: the directory's own and those of parents of created components. */
    private readonly handles: FileHandle[],
    /** Components this open created, in creation order. */
    private readonly created: CreatedDir[],
  ) {}

  /**
   * Opens `dir` (absolute; expected to be symlink-free) component by component without following
   * symbolic links. Missing components fail with ENOENT unless `create` is set. A component that
   * is a symbolic link fails with SymlinkInPathError. On failure, directories this call created
   * are removed again.
   */
  static async open(dir: string, options: OpenOptions = {}): Promise<PinnedDir> {
    if (!path.isAbsolute(dir)) throw new Error(`not an absolute path: ${dir}`);
    const abs = path.resolve(dir);
    if (!(await pinningSupported())) return PinnedDir.openByPath(abs, options);

    const handles: FileHandle[] = [];
    const created: CreatedDir[] = [];
    let current = await fs.open("/", DIR_FLAGS);
    let here = "/";
    try {
      for (const name of abs.split("/").filter((n) => n !== "")) {
        if (name === "." || name === "..") throw new Error(`unexpected component ${name} in ${abs}`);
        const logical = path.join(here, name);
        const at = `${PROC_FD}/${current.fd}/${name}`;
        let next: FileHandle;
        let made = false;
        try {
          next = await openDirAt(at, logical);
        } catch (err) {
          if (codeOf(err) !== "ENOENT" || !options.create) throw err;
          try {
            await fs.mkdir(at, 0o777);
            made = true;
            created.push({ at, path: logical });
          } catch (mkErr) {
            // EEXIST: someone created it meanwhile; open whatever is there, without following.
            if (codeOf(mkErr) !== "EEXIST") throw relabel(mkErr, at, logical);
          }
          next = await openDirAt(at, logical);
        }
        // The parent of a created component stays open so that a rollback can remove it.
        if (made) handles.push(current);
        else await current.close();
        current = next;
        here = logical;
      }
      handles.push(current);
      return new PinnedDir(abs, `${PROC_FD}/${current.fd}`, true, handles, created);
    } catch (err) {
      if (!handles.includes(current)) handles.push(current);
      for (const c of [...created].reverse()) await quietly(() => fs.rmdir(c.at));
      for (const h of handles) await quietly(() => h.close());
      throw err;
    }
  }

  /** The fallback: what apply_patch did before (stat following links, mkdir missing parents). */
  private static async openByPath(abs: string, options: OpenOptions): Promise<PinnedDir> {
    const missing: string[] = [];
    let d = abs;
    for (;;) {
      try {
        const st = await fs.stat(d);
        if (!st.isDirectory()) throw Object.assign(new Error(`${d} is not a directory`), { code: "ENOTDIR", path: d });
        break;
      } catch (err) {
        if (codeOf(err) !== "ENOENT") throw err;
        if (!options.create) throw err;
        missing.push(d);
        const parent = path.dirname(d);
        if (parent === d) break;
        d = parent;
      }
    }
    const created: CreatedDir[] = [];
    try {
      for (const m of missing.reverse()) {
        await fs.mkdir(m);
        created.push({ at: m, path: m });
      }
    } catch (err) {
      for (const c of [...created].reverse()) await quietly(() => fs.rmdir(c.at));
      throw err;
    }
    return new PinnedDir(abs, abs, false, [], created);
  }

  /** Where `name` (a plain file name) is, for the system calls. */
  private at(name: string): string {
    if (this.closed) throw new Error(`${this.path}: the directory was already closed`);
    if (name === "" || name === "." || name === ".." || name.includes("/")) throw new Error(`not a plain file name: ${name}`);
    return this.pinned ? `${this.base}/${name}` : path.join(this.base, name);
  }

  private logical(name: string): string {
    return path.join(this.path, name);
  }

  private async op<T>(name: string, run: (at: string) => Promise<T>): Promise<T> {
    const at = this.at(name);
    try {
      return await run(at);
    } catch (err) {
      throw this.pinned ? relabel(err, at, this.logical(name)) : err;
    }
  }

  /**
   * A file's content and permission bits; null when it does not exist. Reads the entry itself:
   * a symbolic link there is refused (SymlinkInPathError), a directory is an error.
   */
  async read(name: string): Promise<{ content: Buffer; mode: number } | null> {
    if (!this.pinned) {
      const p = this.at(name);
      try {
        const content = await fs.readFile(p);
        return { content, mode: (await fs.stat(p)).mode & 0o7777 };
      } catch (err) {
        const code = codeOf(err);
        if (code === "ENOENT" || code === "ENOTDIR") return null;
        if (code === "EISDIR") throw Object.assign(new Error(`${p} is a directory`), { code: "EISDIR" });
        throw err;
      }
    }
    let h: FileHandle;
    try {
      // O_NONBLOCK: a FIFO planted here must not hang the read.
      h = await this.op(name, (at) => fs.open(at, C.O_RDONLY | O_NOFOLLOW | O_NONBLOCK));
    } catch (err) {
      const code = codeOf(err);
      if (code === "ENOENT") return null;
      if (code === "ELOOP") throw new SymlinkInPathError(this.logical(name));
      throw err;
    }
    try {
      const st = await h.stat();
      if (st.isDirectory()) throw Object.assign(new Error(`${this.logical(name)} is a directory`), { code: "EISDIR" });
      return { content: await h.readFile(), mode: st.mode & 0o7777 };
    } finally {
      await quietly(() => h.close());
    }
  }

  /**
   * Opens the entry `name` for reading, without following a symbolic link there (a link is a
   * SymlinkInPathError) and without blocking on a FIFO. The caller checks the type (fstat) and
   * closes the handle.
   */
  async openRead(name: string): Promise<FileHandle> {
    try {
      return await this.op(name, (at) => fs.open(at, C.O_RDONLY | (this.pinned ? O_NOFOLLOW : 0) | O_NONBLOCK));
    } catch (err) {
      if (codeOf(err) === "ELOOP" && this.pinned) throw new SymlinkInPathError(this.logical(name));
      throw err;
    }
  }

  /** The directory's entries (of the pinned directory itself, whatever its path names now). */
  async list(): Promise<Dirent[]> {
    if (this.closed) throw new Error(`${this.path}: the directory was already closed`);
    try {
      return await fs.readdir(this.base, { withFileTypes: true });
    } catch (err) {
      throw this.pinned ? relabel(err, this.base, this.path) : err;
    }
  }

  /** Opens the existing subdirectory `name` without following a symbolic link there. */
  async openChild(name: string): Promise<PinnedDir> {
    this.at(name);
    const logical = this.logical(name);
    if (!this.pinned) return PinnedDir.openByPath(logical, {});
    const h = await openDirAt(`${this.base}/${name}`, logical);
    return new PinnedDir(logical, `${PROC_FD}/${h.fd}`, true, [h], []);
  }

  /** lstat of an entry (not following a symbolic link there); null when absent. */
  async stat(name: string): Promise<Stats | null> {
    try {
      return await this.op(name, (at) => (this.pinned ? fs.lstat(at) : fs.stat(at)));
    } catch (err) {
      if (codeOf(err) === "ENOENT") return null;
      throw err;
    }
  }

  /** Creates `name`, which must not exist (not even as a symlink), with `data` and `mode`. */
  async writeExclusive(name: string, data: Uint8Array, mode?: number): Promise<void> {
    await this.op(name, async (at) => {
      const h = await fs.open(at, C.O_WRONLY | C.O_CREAT | C.O_EXCL | (this.pinned ? O_NOFOLLOW : 0), mode ?? 0o666);
      try {
        await h.writeFile(data);
        if (mode !== undefined) await h.chmod(mode); // the umask applied at creation
      } finally {
        await h.close();
      }
    });
  }

  /** Renames an entry of this directory to another name in it (neither side is followed). */
  async rename(from: string, to: string): Promise<void> {
    const src = this.at(from);
    const dst = this.at(to);
    try {
      await fs.rename(src, dst);
    } catch (err) {
      if (!this.pinned) throw err;
      throw relabel(relabel(err, src, this.logical(from)), dst, this.logical(to));
    }
  }

  /** Removes an entry (a symbolic link there is removed itself, not followed). */
  async unlink(name: string): Promise<void> {
    await this.op(name, (at) => fs.unlink(at));
  }

  /**
   * Opens the subdirectory `name` (creating it when missing) relative to this directory, without
   * following a symbolic link there. A created directory is removed by the child's
   * `removeCreated`; the child stays usable after this directory is closed.
   */
  async mkdirChild(name: string): Promise<PinnedDir> {
    this.at(name);
    const logical = this.logical(name);
    if (!this.pinned) return PinnedDir.openByPath(logical, { create: true });
    // The child holds its own handle on this directory (reopened through the magic link, which
    // names the inode), so that its rollback does not depend on this one staying open.
    const parent = await reopen(this.base);
    const parentAt = `${PROC_FD}/${parent.fd}/${name}`;
    const created: CreatedDir[] = [];
    try {
      try {
        await fs.mkdir(parentAt, 0o777);
        created.push({ at: parentAt, path: logical });
      } catch (err) {
        if (codeOf(err) !== "EEXIST") throw relabel(err, parentAt, logical);
      }
      const h = await openDirAt(parentAt, logical);
      return new PinnedDir(logical, `${PROC_FD}/${h.fd}`, true, [parent, h], created);
    } catch (err) {
      for (const c of created) await quietly(() => fs.rmdir(c.at));
      await quietly(() => parent.close());
      throw err;
    }
  }

  /** Removes, deepest first, the directories this open created (best effort: only empty ones go). */
  async removeCreated(): Promise<void> {
    // After close the fd numbers in `created` may name other files: never use them then.
    if (this.closed) throw new Error(`${this.path}: the directory was already closed`);
    for (const c of [...this.created].reverse()) await quietly(() => fs.rmdir(c.at));
    this.created.length = 0;
  }

  /** The directories this open created, outermost first. */
  get createdDirs(): string[] {
    return this.created.map((c) => c.path);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const h of this.handles) await quietly(() => h.close());
  }
}

/** A second handle on an open directory (`/proc/self/fd/<fd>`: the magic link is followed). */
async function reopen(base: string): Promise<FileHandle> {
  try {
    return await fs.open(base, C.O_RDONLY | O_DIRECTORY);
  } catch (err) {
    if (codeOf(err) !== "EACCES") throw err;
    return fs.open(base, O_PATH | O_DIRECTORY);
  }
}

/**
 * Opens `<parent>/<name>` as a directory without following a symbolic link there. ELOOP (or
 * ENOTDIR for an entry that turns out to be a link: Linux reports either) becomes a
 * SymlinkInPathError; a search-only directory is retried with O_PATH.
 */
async function openDirAt(at: string, logical: string): Promise<FileHandle> {
  try {
    try {
      return await fs.open(at, DIR_FLAGS);
    } catch (err) {
      if (codeOf(err) !== "EACCES") throw err;
      return await fs.open(at, O_PATH | O_DIRECTORY | O_NOFOLLOW);
    }
  } catch (err) {
    const code = codeOf(err);
    if (code === "ELOOP") throw new SymlinkInPathError(logical);
    if (code === "ENOTDIR") {
      const st = await fs.lstat(at).catch(() => null); // unknown: the original ENOTDIR is thrown below
      if (st?.isSymbolicLink()) throw new SymlinkInPathError(logical);
    }
    throw relabel(err, at, logical);
  }
}

/**
 * A file's content without following a symbolic link anywhere in `real` (which should be
 * symlink-free); null when it or a parent directory does not exist (or a parent is a file).
 * A symbolic link on the way throws SymlinkInPathError: the file is not read.
 */
export async function readNoFollow(real: string): Promise<{ content: Buffer; mode: number } | null> {
  let dir: PinnedDir;
  try {
    dir = await PinnedDir.open(path.dirname(real));
  } catch (err) {
    const code = codeOf(err);
    if (code === "ENOENT" || code === "ENOTDIR") return null;
    throw err;
  }
  try {
    return await dir.read(path.basename(real));
  } finally {
    await dir.close();
  }
}

/**
 * Opens the file `real` (symlink-free, as checked) for reading without following a symbolic link
 * at any component: a directory swapped for a link after the check makes this fail with
 * SymlinkInPathError instead of reading outside the checked location.
 */
export async function openReadNoFollow(real: string): Promise<FileHandle> {
  const dir = await PinnedDir.open(path.dirname(real));
  try {
    return await dir.openRead(path.basename(real));
  } finally {
    await dir.close();
  }
}
