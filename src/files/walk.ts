/**
 * A bounded, .gitignore-aware listing of the files under a root, for file-mention search.
 *
 * What it lists, as Codex's file search does: every file (hidden ones too) under the root, minus
 * what `.gitignore` / `.ignore` files in the root and its subdirectories exclude, and never `.git`.
 * Paths are relative to the root with `/` separators.
 *
 * It never leaves the root: a symlink is listed only when its target resolves inside the root
 * (a symlinked directory inside the root is not descended into — its files are listed under their
 * real path already), so a link to /etc or to `..` leaks nothing. It stops after `maxEntries`
 * entries or when `signal` aborts (the caller's time bound and cancellation), and says so.
 */
import { constants, promises as fs, type Dirent } from "node:fs";
import path from "node:path";
import ignore, { type Ignore } from "ignore";
import { isWithin } from "../tools/workspace.js";

export interface WalkOptions {
  /** Stop after this many directory entries have been looked at. */
  maxEntries: number;
  signal?: AbortSignal;
  /** Absolute paths never listed nor entered (the server's hidden paths, src/sandbox/boundary.ts). */
  skip?: (abs: string) => boolean;
}

export interface WalkResult {
  files: string[];
  /** True when the walk stopped early (entry budget or abort): `files` is a prefix of the tree. */
  truncated: boolean;
}

interface IgnoreLayer {
  /** Directory (relative to the root, "" for the root) whose ignore files these rules come from. */
  base: string;
  rules: Ignore;
}

const IGNORE_FILES = [".gitignore", ".ignore"];

/** Larger ignore files are not read (a real one is a few kB). */
export const MAX_IGNORE_FILE_BYTES = 1024 * 1024;

/**
 * The text of an ignore file, or null unless it is a regular file of at most MAX_IGNORE_FILE_BYTES.
 * The tree is the user's (or a cloned repository's): a `.gitignore` that is a FIFO would block a
 * thread of the pool forever on open, and a symlink to /dev/zero would be read until memory runs
 * out. So: opened without following a symlink (git does not follow a symlinked .gitignore either)
 * and without blocking, checked on the open descriptor, read up to its size.
 */
async function readIgnoreFile(file: string): Promise<string | null> {
  // Missing (the usual case), a symlink (ELOOP) or unreadable: no rules from this file, as for git.
  const handle = await fs.open(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK).catch(() => null);
  if (handle === null) return null;
  try {
    const st = await handle.stat();
    if (!st.isFile() || st.size > MAX_IGNORE_FILE_BYTES) return null;
    const buf = Buffer.alloc(st.size);
    const { bytesRead } = await handle.read(buf, 0, st.size, 0);
    return buf.subarray(0, bytesRead).toString("utf8");
  } catch {
    return null;
  } finally {
    await handle.close().catch(() => {}); // a read-only handle, already read: nothing to lose on close
  }
}

async function readRules(dir: string): Promise<Ignore | null> {
  let rules: Ignore | null = null;
  for (const name of IGNORE_FILES) {
    const text = await readIgnoreFile(path.join(dir, name));
    if (text === null) continue;
    rules ??= ignore();
    rules.add(text);
  }
  return rules;
}

function ignored(layers: readonly IgnoreLayer[], rel: string, isDir: boolean): boolean {
  for (const { base, rules } of layers) {
    const sub = base === "" ? rel : rel.slice(base.length + 1);
    try {
      if (rules.ignores(isDir ? `${sub}/` : sub)) return true;
    } catch {
      // `ignore` throws for paths it takes for non-relative ones; a listed name never should be one,
      // and if it were, no rule could name it: listed, rather than failing the search.
    }
  }
  return false;
}

/**
 * Lists the files under `root` (an existing directory; the caller resolved it with realpath).
 * Breadth-first, directories in name order, so a truncated walk keeps the shallow files.
 */
export async function listFiles(root: string, opts: WalkOptions): Promise<WalkResult> {
  const files: string[] = [];
  let seen = 0;
  const rootRules = await readRules(root);
  const queue: Array<{ rel: string; layers: IgnoreLayer[] }> = [{ rel: "", layers: rootRules ? [{ base: "", rules: rootRules }] : [] }];
  while (queue.length > 0) {
    const { rel, layers } = queue.shift()!;
    if (opts.signal?.aborted) return { files, truncated: true };
    const abs = rel === "" ? root : path.join(root, rel);
    let entries: Dirent[];
    try {
      entries = await fs.readdir(abs, { withFileTypes: true });
    } catch {
      continue; // unreadable or vanished: skipped, as the walk of Codex does
    }
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const entry of entries) {
      if (++seen > opts.maxEntries || opts.signal?.aborted) return { files, truncated: true };
      const childRel = rel === "" ? entry.name : `${rel}/${entry.name}`;
      if (opts.skip?.(path.join(root, childRel))) continue;
      if (entry.isDirectory()) {
        if (entry.name === ".git" || ignored(layers, childRel, true)) continue;
        const rules = await readRules(path.join(root, childRel));
        queue.push({ rel: childRel, layers: rules ? [...layers, { base: childRel, rules }] : layers });
      } else if (entry.isSymbolicLink()) {
        if (ignored(layers, childRel, false)) continue;
        // A dangling or looping link, or one whose target cannot be looked at, is simply not listed.
        const target = await fs.realpath(path.join(root, childRel)).catch(() => null);
        if (target === null || !isWithin(target, root) || opts.skip?.(target)) continue;
        const st = await fs.stat(target).catch(() => null);
        if (st?.isFile()) files.push(childRel);
      } else if (entry.isFile()) {
        if (!ignored(layers, childRel, false)) files.push(childRel);
      }
    }
  }
  return { files, truncated: false };
}
