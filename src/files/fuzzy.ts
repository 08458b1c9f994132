/**
 * Fuzzy ranking of paths, as Codex's file search ranks them (nucleo, an fzf-style matcher): the
 * query is split on whitespace into atoms, every atom must match the relative path fuzzily
 * (smart case: case-insensitive unless the atom has an upper-case letter), the scores add up,
 * and results are ordered by score (highest first), then by path. `indices` are the matched
 * character (code point) positions in the path, sorted and unique, for highlighting.
 *
 * Scoring is fzf's v2 algorithm (the `fzf` package), the one nucleo reimplements; scores are
 * therefore comparable in order, not equal in value, to Codex's.
 */
import { Fzf, type FzfResultItem } from "fzf";

interface Candidate {
  path: string;
  score: number;
  indices: Set<number>;
}

export interface FuzzyMatch {
  path: string;
  score: number;
  indices: number[];
}

export function rankPaths(paths: readonly string[], query: string, limit: number, signal?: AbortSignal): FuzzyMatch[] {
  const atoms = query.split(/\s+/).filter((a) => a !== "");
  if (atoms.length === 0) return [];
  let candidates: Candidate[] = paths.map((p) => ({ path: p, score: 0, indices: new Set() }));
  for (const atom of atoms) {
    if (signal?.aborted || candidates.length === 0) return [];
    const fzf = new Fzf(candidates, { selector: (c: Candidate) => c.path, casing: "smart-case", fuzzy: "v2", sort: false });
    candidates = fzf.find(atom).map((r: FzfResultItem<Candidate>) => {
      for (const i of r.positions) r.item.indices.add(i);
      return { path: r.item.path, score: r.item.score + r.score, indices: r.item.indices };
    });
  }
  candidates.sort((a, b) => b.score - a.score || (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  return candidates.slice(0, limit).map((c) => ({ path: c.path, score: c.score, indices: [...c.indices].sort((x, y) => x - y) }));
}
