/**
 * The grep tool's search, run in a worker thread (grep-pool.ts) so that no pattern and no tree can
 * stall the server's event loop. Matching is RE2's (re2js: linear in the input, no backtracking),
 * so even `^(a+)+$` over a long line costs one pass. The walk opens every directory and file
 * without following symbolic links (pinned-dir.ts), skips what the thread's view hides, .git,
 * node_modules and binary files, and stops at the deadline or a cap, saying which.
 */
import path from "node:path";
import { parentPort } from "node:worker_threads";
import { RE2JS } from "re2js";
import { SandboxView, type SandboxViewData } from "../sandbox/view.js";
import { PinnedDir } from "./pinned-dir.js";
import { displayPath } from "./workspace.js";

export interface GrepJob {
  pattern: string;
  /** Anchored glob regexp source (globToRegExp), and whether it is matched against the whole relative path. */
  glob: { source: string; onPath: boolean } | null;
  /** Where to search, as seen inside the sandbox (resolved), and the thread's cwd (for display). */
  target: string;
  shownTarget: string;
  cwd: string;
  view: SandboxViewData;
  maxMatches: number;
  maxFiles: number;
  maxFileBytes: number;
  maxLineChars: number;
  /** Epoch ms after which the search stops with what it found. */
  deadline: number;
}

export type GrepOutcome =
  | { ok: true; lines: string[]; capped: "matches" | "files" | null; skippedLarge: number; timedOut: boolean; files: number }
  | { ok: false; error: string };

const SKIP_DIRS = new Set([".git", "node_modules"]);

/** A clear message for what RE2 rejects, naming the JavaScript feature and a way around it. */
export function explainPatternError(pattern: string, message: string): string {
  const detail = message.replace(/^error parsing regexp:\s*/, "");
  const feature =
    /\(\?<?[=!]/.test(pattern) ? "lookahead and lookbehind ((?=…), (?!…), (?<=…), (?<!…))"
      : /\\[1-9]|\\k</.test(pattern) ? "backreferences (\\1, \\k<name>)"
        : /\\u[0-9a-fA-F{]/.test(pattern) ? "\\u escapes (write \\x{263A} instead)"
          : null;
  const engine = "grep matches with a linear-time engine (RE2 syntax), which has no backtracking";
  return feature
    ? `Unsupported pattern: ${engine}, so ${feature} cannot be used (${detail}). Rewrite the pattern without it, or run \`grep -P\` through the shell tool.`
    : `Invalid pattern: ${detail} (${engine}; see RE2 syntax).`;
}

async function search(job: GrepJob): Promise<GrepOutcome> {
  let regex: RE2JS;
  try {
    regex = RE2JS.compile(job.pattern);
  } catch (err) {
    return { ok: false, error: explainPatternError(job.pattern, (err as Error).message) };
  }
  const view = SandboxView.fromData(job.view);
  const glob = job.glob === null ? null : new RegExp(job.glob.source);
  const lines: string[] = [];
  let files = 0;
  let skippedLarge = 0;
  let capped: "matches" | "files" | null = null;
  let timedOut = false;
  const stop = () => {
    if (capped !== null || timedOut) return true;
    if (Date.now() > job.deadline) timedOut = true;
    return timedOut;
  };

  const searchFile = async (dir: PinnedDir, name: string, shown: string) => {
    files++;
    const fh = await dir.openRead(name).catch(() => null);
    if (fh === null) return;
    try {
      const st = await fh.stat();
      if (!st.isFile() || st.size === 0) return;
      if (st.size > job.maxFileBytes) {
        skippedLarge++;
        return;
      }
      const buf = await fh.readFile();
      if (buf.subarray(0, 8192).includes(0)) return;
      const text = buf.toString("utf8").split("\n");
      const display = displayPath(shown, job.cwd);
      for (let i = 0; i < text.length; i++) {
        let line = text[i]!;
        if (line.endsWith("\r")) line = line.slice(0, -1);
        if (!regex.test(line)) continue;
        if (lines.length >= job.maxMatches) {
          capped = "matches";
          return;
        }
        lines.push(`${display}:${i + 1}: ${line.length > job.maxLineChars ? `${line.slice(0, job.maxLineChars)}…` : line}`);
      }
    } finally {
      await fh.close().catch(() => undefined);
    }
  };

  const walk = async (dir: PinnedDir, virtual: string, host: string, rel: string): Promise<void> => {
    const entries = await dir.list().catch(() => []);
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const e of entries) {
      if (stop()) return;
      const childVirtual = path.join(virtual, e.name);
      if (view.hiddenAt(childVirtual) !== null) continue;
      const childRel = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDirectory()) {
        if (SKIP_DIRS.has(e.name)) continue;
        // A mount boundary (a root bound into the private /tmp) is somewhere else on the host.
        const childHost = view.toHost(childVirtual);
        const child = await (childHost === path.join(host, e.name) ? dir.openChild(e.name) : PinnedDir.open(childHost)).catch(() => null);
        if (child === null) continue;
        try {
          await walk(child, childVirtual, childHost, childRel);
        } finally {
          await child.close();
        }
      } else if (e.isFile()) {
        if (glob !== null && !glob.test(job.glob!.onPath ? childRel : e.name)) continue;
        if (files >= job.maxFiles) {
          capped = "files";
          return;
        }
        await searchFile(dir, e.name, childVirtual);
      }
      // Symbolic links and special files are skipped: following links could leave the roots.
    }
  };

  const host = view.toHost(job.target);
  try {
    const dir = await PinnedDir.open(host);
    try {
      await walk(dir, job.target, host, "");
    } finally {
      await dir.close();
    }
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return { ok: false, error: `Cannot search ${job.shownTarget}: it does not exist.` };
    if (code !== "ENOTDIR") return { ok: false, error: `Cannot search ${job.shownTarget}: ${(err as Error).message}` };
    if (path.dirname(host) === host) return { ok: false, error: `Cannot search ${job.shownTarget}.` };
    const parent = await PinnedDir.open(path.dirname(host)).catch((e: Error) => e);
    if (parent instanceof Error) return { ok: false, error: `Cannot search ${job.shownTarget}: ${parent.message}` };
    try {
      await searchFile(parent, path.basename(host), job.target);
    } finally {
      await parent.close();
    }
  }
  return { ok: true, lines, capped, skippedLarge, timedOut, files };
}

parentPort?.on("message", (job: GrepJob) => {
  search(job).then(
    (outcome) => parentPort!.postMessage(outcome),
    (err: unknown) => parentPort!.postMessage({ ok: false, error: `grep failed: ${err instanceof Error ? err.message : String(err)}` } satisfies GrepOutcome),
  );
});
