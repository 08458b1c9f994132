/** Directories pinned by file descriptor (no symbolic link followed), and the commit built on them. */
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, statSync, symlinkSync, unlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { CommitError, commitFileWrites, planPatch, readExisting, type FileWrite, type ResolvedTarget } from "../../src/tools/patch.js";
import { forcePinningForTests, PinnedDir, pinningSupported, readNoFollow, SymlinkInPathError } from "../../src/tools/pinned-dir.js";
import { makeDirs, type Dirs } from "./helpers.js";

let d: Dirs;
beforeEach(() => {
  d = makeDirs();
});
afterEach(() => {
  forcePinningForTests(null);
  d.cleanup();
});

const add = (real: string, text: string): FileWrite => ({ real, display: real, before: null, after: Buffer.from(text) });
/** Everything under `dir`, relative, directories with a trailing slash. */
const tree = (dir: string): string[] =>
  readdirSync(dir, { recursive: true, withFileTypes: true })
    .map((e) => path.relative(dir, path.join(e.parentPath, e.name)) + (e.isDirectory() ? "/" : ""))
    .sort();

const linux = process.platform === "linux";

describe.runIf(linux)("PinnedDir (Linux, /proc/self/fd)", () => {
  it("is supported here", async () => {
    expect(await pinningSupported()).toBe(true);
  });

  it("refuses a symbolic link at any component, and never touches what it points to", async () => {
    // ws/a/b/c, with a mirror of it outside; each component in turn is swapped for a link.
    mkdirSync(path.join(d.ws, "a/b/c"), { recursive: true });
    writeFileSync(path.join(d.ws, "a/b/c/f.txt"), "inside\n");
    mkdirSync(path.join(d.outside, "a/b/c"), { recursive: true });
    writeFileSync(path.join(d.outside, "a/b/c/f.txt"), "secret\n");
    const outsideBefore = tree(d.outside);

    for (const component of ["a", "a/b", "a/b/c"]) {
      const at = path.join(d.ws, component);
      renameSync(at, `${at}.real`);
      symlinkSync(path.join(d.outside, component), at);
      try {
        const target = path.join(d.ws, "a/b/c");
        await expect(PinnedDir.open(target)).rejects.toThrow(SymlinkInPathError);
        await expect(PinnedDir.open(target)).rejects.toMatchObject({ path: at });
        await expect(PinnedDir.open(path.join(target, "new/dir"), { create: true })).rejects.toThrow(SymlinkInPathError);
        await expect(readNoFollow(path.join(target, "f.txt"))).rejects.toThrow(SymlinkInPathError);
        await expect(readExisting(path.join(target, "f.txt"))).rejects.toThrow(/was not read: .* is a symbolic link/);
        const failed = await commitFileWrites([add(path.join(target, "g.txt"), "g\n"), add(path.join(target, "n/h.txt"), "h\n")]).catch((e: unknown) => e);
        expect(failed).toBeInstanceOf(CommitError);
        expect((failed as Error).message).toMatch(/changed while the patch was being applied \(a path component became a symbolic link\); nothing was written/);
      } finally {
        unlinkSync(at);
        renameSync(`${at}.real`, at);
      }
    }
    expect(tree(d.outside)).toEqual(outsideBefore);
    expect(readFileSync(path.join(d.outside, "a/b/c/f.txt"), "utf8")).toBe("secret\n");
    expect(tree(d.ws)).toEqual(["a/", "a/b/", "a/b/c/", "a/b/c/f.txt"]);
  });

  it("refuses a symbolic link as the file itself: read refuses, rename and unlink act on the link", async () => {
    writeFileSync(path.join(d.outside, "secret.txt"), "secret\n");
    symlinkSync(path.join(d.outside, "secret.txt"), path.join(d.ws, "link.txt"));
    const dir = await PinnedDir.open(d.ws);
    try {
      await expect(dir.read("link.txt")).rejects.toThrow(SymlinkInPathError);
      expect((await dir.stat("link.txt"))?.isSymbolicLink()).toBe(true);
      await expect(dir.writeExclusive("link.txt", Buffer.from("x"))).rejects.toMatchObject({ code: "EEXIST" });
      await dir.rename("link.txt", "moved.txt");
      await dir.unlink("moved.txt");
    } finally {
      await dir.close();
    }
    expect(readFileSync(path.join(d.outside, "secret.txt"), "utf8")).toBe("secret\n");
    expect(readdirSync(d.ws)).toEqual([]);
  });

  it("planning does not read a file through a swapped directory", async () => {
    writeFileSync(path.join(d.outside, "secret.txt"), "secret\n");
    symlinkSync(d.outside, path.join(d.ws, "sub"));
    // As if `sub` had been checked while it was a real directory.
    const resolve = (p: string): ResolvedTarget => ({ display: path.join(d.ws, p), real: path.join(d.ws, p) });
    const r = await planPatch([{ type: "delete", path: "sub/secret.txt" }], resolve);
    expect(r.ok).toBe(false);
    expect(!r.ok && r.error).toMatch(/sub is a symbolic link/);
    expect(!r.ok && r.error).not.toMatch(/secret\n/);
  });

  it("reads, writes exclusively, renames and reports errors by the logical path", async () => {
    writeFileSync(path.join(d.ws, "f.txt"), "hello\n");
    chmodSync(path.join(d.ws, "f.txt"), 0o640);
    const dir = await PinnedDir.open(d.ws);
    try {
      expect(await dir.read("f.txt")).toEqual({ content: Buffer.from("hello\n"), mode: 0o640 });
      expect(await dir.read("nope.txt")).toBeNull();
      await dir.writeExclusive("g.txt", Buffer.from("g\n"), 0o600);
      expect(statSync(path.join(d.ws, "g.txt")).mode & 0o777).toBe(0o600);
      const dup = await dir.writeExclusive("g.txt", Buffer.from("again")).catch((e: NodeJS.ErrnoException) => e);
      expect(dup).toMatchObject({ code: "EEXIST", path: path.join(d.ws, "g.txt") });
      expect((dup as Error).message).not.toMatch(/\/proc\//);
      await dir.rename("g.txt", "h.txt");
      expect(readFileSync(path.join(d.ws, "h.txt"), "utf8")).toBe("g\n");
      await expect(dir.read("..")).rejects.toThrow(/not a plain file name/);
      await expect(dir.read("a/b")).rejects.toThrow(/not a plain file name/);
    } finally {
      await dir.close();
    }
    await expect(dir.read("f.txt")).rejects.toThrow(/closed/);
  });

  it("creates missing directories, and removes exactly those on request", async () => {
    mkdirSync(path.join(d.ws, "keep"));
    const dir = await PinnedDir.open(path.join(d.ws, "keep/x/y/z"), { create: true });
    try {
      expect(dir.createdDirs).toEqual(["x", "x/y", "x/y/z"].map((p) => path.join(d.ws, "keep", p)));
      await dir.writeExclusive("f.txt", Buffer.from("f\n"));
      expect(readFileSync(path.join(d.ws, "keep/x/y/z/f.txt"), "utf8")).toBe("f\n");
      await dir.unlink("f.txt");
      const child = await dir.mkdirChild("w");
      expect(child.createdDirs).toEqual([path.join(d.ws, "keep/x/y/z/w")]);
      await child.removeCreated();
      await child.close();
      await dir.removeCreated();
    } finally {
      await dir.close();
    }
    expect(tree(d.ws)).toEqual(["keep/"]);
    await expect(dir.removeCreated()).rejects.toThrow(/closed/);

    // A child made by mkdirChild can roll back after its parent was closed.
    const parent = await PinnedDir.open(path.join(d.ws, "keep"));
    const child = await parent.mkdirChild("c");
    await parent.close();
    await child.writeExclusive("f", Buffer.from("f"));
    await child.unlink("f");
    await child.removeCreated();
    await child.close();
    expect(tree(d.ws)).toEqual(["keep/"]);
  });

  it("a file where a directory should be is an ordinary error, not a symlink refusal", async () => {
    writeFileSync(path.join(d.ws, "blocker"), "file\n");
    const err = await PinnedDir.open(path.join(d.ws, "blocker/x"), { create: true }).catch((e: unknown) => e);
    expect(err).not.toBeInstanceOf(SymlinkInPathError);
    expect(err).toMatchObject({ code: "ENOTDIR", path: path.join(d.ws, "blocker") });
    expect(await readExisting(path.join(d.ws, "blocker/x"))).toBeNull();
  });
});

describe.each([
  { mode: "pinned", force: null },
  { mode: "path-based fallback", force: false },
])("commitFileWrites ($mode)", ({ mode, force }) => {
  beforeEach(() => {
    forcePinningForTests(force);
  });

  it.runIf(linux || mode !== "pinned")("adds nested files creating their directories, updates keeping the mode, deletes", async () => {
    writeFileSync(path.join(d.ws, "u.txt"), "old\n");
    chmodSync(path.join(d.ws, "u.txt"), 0o751);
    writeFileSync(path.join(d.ws, "gone.txt"), "bye\n");
    await commitFileWrites([
      add(path.join(d.ws, "n1/n2/n3/f.txt"), "f\n"),
      add(path.join(d.ws, "n1/other/g.txt"), "g\n"),
      { real: path.join(d.ws, "u.txt"), display: "u.txt", before: Buffer.from("old\n"), after: Buffer.from("new\n") },
      { real: path.join(d.ws, "gone.txt"), display: "gone.txt", before: Buffer.from("bye\n"), after: null },
    ]);
    expect(tree(d.ws)).toEqual(["n1/", "n1/n2/", "n1/n2/n3/", "n1/n2/n3/f.txt", "n1/other/", "n1/other/g.txt", "u.txt"]);
    expect(readFileSync(path.join(d.ws, "n1/n2/n3/f.txt"), "utf8")).toBe("f\n");
    expect(readFileSync(path.join(d.ws, "u.txt"), "utf8")).toBe("new\n");
    expect(statSync(path.join(d.ws, "u.txt")).mode & 0o7777).toBe(0o751);
  });

  it.runIf(linux || mode !== "pinned")("a failed commit restores the files and removes every directory it created", async () => {
    writeFileSync(path.join(d.ws, "u.txt"), "old\n");
    mkdirSync(path.join(d.ws, "existing"));
    const writes = [
      add(path.join(d.ws, "new/a/x.txt"), "x\n"),
      add(path.join(d.ws, "new/b/y.txt"), "y\n"),
      add(path.join(d.ws, "existing/deep/z.txt"), "z\n"),
      { real: path.join(d.ws, "u.txt"), display: "u.txt", before: Buffer.from("old\n"), after: Buffer.from("new\n") },
    ];
    await expect(
      commitFileWrites(writes, {
        beforeRename: (i) => {
          if (i === 3) throw new Error("disk on fire");
        },
      }),
    ).rejects.toThrow(/disk on fire.*every file was restored/);
    expect(tree(d.ws)).toEqual(["existing/", "u.txt"]);
    expect(readFileSync(path.join(d.ws, "u.txt"), "utf8")).toBe("old\n");

    // A failure while writing the temp files (a file where a directory must go) also cleans up.
    writeFileSync(path.join(d.ws, "blocker"), "file\n");
    await expect(commitFileWrites([add(path.join(d.ws, "fresh/q.txt"), "q\n"), add(path.join(d.ws, "blocker/r.txt"), "r\n")])).rejects.toThrow(
      /could not write .*blocker.*nothing was changed/,
    );
    expect(tree(d.ws)).toEqual(["blocker", "existing/", "u.txt"]);
    expect(existsSync(path.join(d.ws, "fresh"))).toBe(false);
  });
});
