/**
 * Fuzzy ranking of paths, as Codex's file search ranks them (nucleo, an fzf-style matcher): the
 * query is split on whitespace into atoms, every atom must match the relative path fuzzily
 * (smart case: case-insensitive unless the atom has an upper-case letter), the scores add up,
 * and results are ordered by score (highest first), then by path. `indices` are the matched
 * character (code point) positions in the path, sorted and unique, for highlighting.
 *
 * Scoring is fzf's v2 algorithm (the `fzf` package), the one nucleo reimplements; scores are
 * therefore comparable in order, not equal in value, to Codex's.
 *
 * It runs on the server's event loop, so it works in chunks and yields between them: ranking
 * 100 000 paths that all match took 0.34–0.54 s on a shared 2-core machine, which must not stall
 * every other connection (in chunks of 4096 the longest stall was 33 ms). A cheap subsequence
 * test drops the paths that cannot match before fzf scores them (a 3-word query over the same
 * tree: 30–74 ms).
 */
import { Fzf, type FzfResultItem } from "fzf";

export interface FuzzyMatch {
  path: string;
  score: number;
  indices: number[];
}

interface Candidate {
  path: string;
  score: number;
  indices: Set<number>;
}

/** Paths scored per slice of the event loop. */
const CHUNK = 4096;

/** Does `hay` contain the characters of `needle` in order? (Both already case-folded as needed.) */
function isSubsequence(needle: string, hay: string): boolean {
  let from = 0;
  for (const ch of needle) {
    const at = hay.indexOf(ch, from);
    if (at < 0) return false;
    from = at + ch.length;
  }
  return true;
}

/** fzf matches "e" to "é" (it strips diacritics): the prefilter must not drop such paths. */
const stripMarks = (s: string) => (/[^\x00-\x7f]/.test(s) ? s.normalize("NFD").replace(/\p{M}/gu, "") : s);

function rankChunk(paths: readonly string[], atoms: readonly string[]): Candidate[] {
  let candidates: Candidate[] = [];
  // Smart case: an atom with an upper-case letter matches case-sensitively (a lower-case one is already folded).
  const folded = atoms.map((a) => ({ atom: stripMarks(a), caseSensitive: a !== a.toLowerCase() }));
  for (const p of paths) {
    const plain = stripMarks(p);
    const lower = plain.toLowerCase();
    if (folded.every(({ atom, caseSensitive }) => isSubsequence(atom, caseSensitive ? plain : lower))) candidates.push({ path: p, score: 0, indices: new Set() });
  }
  for (const atom of atoms) {
    if (candidates.length === 0) return candidates;
    const fzf = new Fzf(candidates, { selector: (c: Candidate) => c.path, casing: "smart-case", fuzzy: "v2", sort: false });
    candidates = fzf.find(atom).map((r: FzfResultItem<Candidate>) => {
      for (const i of r.positions) r.item.indices.add(i);
      return { path: r.item.path, score: r.item.score + r.score, indices: r.item.indices };
    });
  }
  return candidates;
}

const byScoreThenPath = (a: { score: number; path: string }, b: { score: number; path: string }) => b.score - a.score || (a.path < b.path ? -1 : a.path > b.path ? 1 : 0);

/** The best `limit` matches of `query` among `paths`; [] when `signal` aborts first. */
export async function rankPaths(paths: readonly string[], query: string, limit: number, signal?: AbortSignal): Promise<FuzzyMatch[]> {
  const atoms = query.split(/\s+/).filter((a) => a !== "");
  if (atoms.length === 0) return [];
  let best: Candidate[] = [];
  for (let start = 0; start < paths.length; start += CHUNK) {
    if (start > 0) await new Promise<void>((resolve) => setImmediate(resolve));
    if (signal?.aborted) return [];
    best = best.concat(rankChunk(paths.slice(start, start + CHUNK), atoms)).sort(byScoreThenPath).slice(0, limit);
  }
  return best.map((c) => ({ path: c.path, score: c.score, indices: [...c.indices].sort((x, y) => x - y) }));
}
