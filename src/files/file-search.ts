/**
 * File search over roots, as `fuzzyFileSearch` answers it: each root is resolved (it must be an
 * absolute path to an existing directory), listed within its bounds (walk.ts) and the files
 * ranked against the query (fuzzy.ts); the best `FILE_SEARCH_MATCH_LIMIT` across all roots are
 * returned, each relative to the root the client named.
 */
import { promises as fs } from "node:fs";
import path from "node:path";
import { rankPaths } from "./fuzzy.js";
import { isWithin } from "../sandbox/view.js";
import { listFiles } from "./walk.js";
import { withDeadline } from "../abortable.js";

/** As many results as Codex returns. */
export const FILE_SEARCH_MATCH_LIMIT = 50;
/** Directory entries looked at per root before the listing stops (a home directory, a monorepo). */
export const FILE_SEARCH_MAX_ENTRIES = 200_000;
/** A listing that takes longer than this stops with what it found (a slow or network file system). */
export const FILE_SEARCH_TIME_BUDGET_MS = 5_000;

export class FileSearchRootError extends Error {}

export interface SearchRoot {
  /** As the client sent it (echoed in every result). */
  given: string;
  /** Its real path. */
  real: string;
}

export interface FileMatch {
  root: string;
  path: string;
  match_type: "file";
  file_name: string;
  score: number;
  indices: number[];
}

/** Checks and resolves the client's roots; throws FileSearchRootError saying which one is bad. */
export async function resolveRoots(roots: readonly string[], hidden: readonly string[] = []): Promise<SearchRoot[]> {
  const out: SearchRoot[] = [];
  for (const given of roots) {
    if (!path.isAbsolute(given)) throw new FileSearchRootError(`root ${JSON.stringify(given)} is not an absolute path`);
    // Any failure to resolve or look at it is this root's error below (not an existing directory).
    const real = await fs.realpath(given).catch(() => null);
    const st = real === null ? null : await fs.stat(real).catch(() => null);
    if (real === null || !st?.isDirectory()) throw new FileSearchRootError(`root ${given} is not an existing directory`);
    if (hidden.includes(real))
      throw new FileSearchRootError(`root ${given} is hidden by the server (its home, token or secret files)`);
    out.push({ given, real });
  }
  return out;
}

/**
 * What a root's listing leaves out: the hidden paths, except that a root chosen inside one is
 * listed (as a workspace inside the server's home is visible to its thread).
 */
export function hiddenWithin(root: string, hidden: readonly string[]): (abs: string) => boolean {
  const applicable = hidden.filter((h) => !(isWithin(root, h) && root !== h));
  return (abs) => applicable.some((h) => isWithin(abs, h));
}

export interface IndexedRoot {
  root: SearchRoot;
  files: string[];
  truncated: boolean;
}

/** Lists each root's files within the entry and time budgets (or until `signal` aborts), never a hidden path. */
export async function indexRoots(roots: readonly SearchRoot[], signal?: AbortSignal, hidden: readonly string[] = []): Promise<IndexedRoot[]> {
  const budget = withDeadline(signal, FILE_SEARCH_TIME_BUDGET_MS);
  const out: IndexedRoot[] = [];
  try {
    for (const root of roots) {
      const listed = await listFiles(root.real, { maxEntries: FILE_SEARCH_MAX_ENTRIES, signal: budget.signal, skip: hiddenWithin(root.real, hidden) });
      out.push({ root, ...listed });
    }
  } finally {
    budget.clear();
  }
  return out;
}

/** The best matches of `query` across the indexed roots, score descending then path ascending. */
export async function matchIndexed(indexed: readonly IndexedRoot[], query: string, signal?: AbortSignal): Promise<FileMatch[]> {
  const all: FileMatch[] = [];
  for (const { root, files } of indexed) {
    for (const m of await rankPaths(files, query, FILE_SEARCH_MATCH_LIMIT, signal)) {
      all.push({ root: root.given, path: m.path, match_type: "file", file_name: path.posix.basename(m.path), score: m.score, indices: m.indices });
    }
  }
  all.sort((a, b) => b.score - a.score || (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  return all.slice(0, FILE_SEARCH_MATCH_LIMIT);
}
