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
  | { ok: true; lines: string[]; capped: "matches" | "files" | null; skippedLarge: number; unreadable: number; timedOut: boolean; files: number }
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

/** Runs one search job: the pattern compiled by RE2, then the walk of its target. */
export async function search(job: GrepJob): Promise<GrepOutcome> {
  let regex: RE2JS;
  try {
    regex = RE2JS.compile(job.pattern);
  } catch (err) {
    return { ok: false, error: explainPatternError(job.pattern, (err as Error).message) };
  }
  return new GrepWalk(job, regex).run();
}

/** One search's walk and what it found so far, with the caps and the deadline that stop it. */
class GrepWalk {
  private readonly view: SandboxView;
  private readonly glob: RegExp | null;
  private readonly lines: string[] = [];
  private files = 0;
  private skippedLarge = 0;
  /** Files and directories that could not be opened or listed (gone since listed, a link by now, unreadable). */
  private unreadable = 0;
  private capped: "matches" | "files" | null = null;
  private timedOut = false;

  constructor(
    private readonly job: GrepJob,
    private readonly regex: RE2JS,
  ) {
    this.view = SandboxView.fromData(job.view);
    this.glob = job.glob === null ? null : new RegExp(job.glob.source);
  }

  async run(): Promise<GrepOutcome> {
    const { job } = this;
    const host = this.view.toHost(job.target);
    try {
      const dir = await PinnedDir.open(host);
      try {
        await this.walk(dir, job.target, host, "");
      } finally {
        await dir.close();
      }
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === "ENOENT") return { ok: false, error: `Cannot search ${job.shownTarget}: it does not exist.` };
      if (code !== "ENOTDIR") return { ok: false, error: `Cannot search ${job.shownTarget}: ${(err as Error).message}` };
      const failed = await this.searchOneFile(host);
      if (failed !== null) return { ok: false, error: failed };
    }
    return { ok: true, lines: this.lines, capped: this.capped, skippedLarge: this.skippedLarge, unreadable: this.unreadable, timedOut: this.timedOut, files: this.files };
  }

  /** The target is a file: searches it through its pinned parent; why it cannot, or null. */
  private async searchOneFile(host: string): Promise<string | null> {
    const shown = this.job.shownTarget;
    if (path.dirname(host) === host) return `Cannot search ${shown}.`;
    const parent = await PinnedDir.open(path.dirname(host)).catch((e: Error) => e);
    if (parent instanceof Error) return `Cannot search ${shown}: ${parent.message}`;
    try {
      await this.searchFile(parent, path.basename(host), this.job.target);
    } finally {
      await parent.close();
    }
    return null;
  }

  private stop(): boolean {
    if (this.capped !== null || this.timedOut) return true;
    if (Date.now() > this.job.deadline) this.timedOut = true;
    return this.timedOut;
  }

  private async walk(dir: PinnedDir, virtual: string, host: string, rel: string): Promise<void> {
    const entries = await dir.list().catch(() => {
      this.unreadable++;
      return [];
    });
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const e of entries) {
      if (this.stop()) return;
      const childVirtual = path.join(virtual, e.name);
      if (this.view.hiddenAt(childVirtual) !== null) continue;
      const childRel = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDirectory()) {
        if (SKIP_DIRS.has(e.name)) continue;
        await this.walkChild(dir, e.name, childVirtual, host, childRel);
      } else if (e.isFile()) {
        if (this.glob !== null && !this.glob.test(this.job.glob!.onPath ? childRel : e.name)) continue;
        if (this.files >= this.job.maxFiles) {
          this.capped = "files";
          return;
        }
        await this.searchFile(dir, e.name, childVirtual);
      }
      // Symbolic links and special files are skipped: following links could leave the roots.
    }
  }

  private async walkChild(dir: PinnedDir, name: string, childVirtual: string, host: string, childRel: string): Promise<void> {
    // A mount boundary (a root bound into the private /tmp) is somewhere else on the host.
    const childHost = this.view.toHost(childVirtual);
    const child = await (childHost === path.join(host, name) ? dir.openChild(name) : PinnedDir.open(childHost)).catch(() => null);
    if (child === null) {
      this.unreadable++;
      return;
    }
    try {
      await this.walk(child, childVirtual, childHost, childRel);
    } finally {
      await child.close();
    }
  }

  private async searchFile(dir: PinnedDir, name: string, shown: string): Promise<void> {
    this.files++;
    const fh = await dir.openRead(name).catch(() => null);
    if (fh === null) {
      this.unreadable++;
      return;
    }
    try {
      const st = await fh.stat();
      if (!st.isFile() || st.size === 0) return;
      if (st.size > this.job.maxFileBytes) {
        this.skippedLarge++;
        return;
      }
      const buf = await fh.readFile();
      if (buf.subarray(0, 8192).includes(0)) return;
      this.matchLines(buf.toString("utf8").split("\n"), displayPath(shown, this.job.cwd));
    } finally {
      // A read-only handle: closing it cannot lose anything, whatever it says.
      await fh.close().catch(() => undefined);
    }
  }

  private matchLines(text: readonly string[], display: string): void {
    const { maxMatches, maxLineChars } = this.job;
    for (let i = 0; i < text.length; i++) {
      let line = text[i]!;
      if (line.endsWith("\r")) line = line.slice(0, -1);
      if (!this.regex.test(line)) continue;
      if (this.lines.length >= maxMatches) {
        this.capped = "matches";
        return;
      }
      this.lines.push(`${display}:${i + 1}: ${line.length > maxLineChars ? `${line.slice(0, maxLineChars)}…` : line}`);
    }
  }
}

parentPort?.on("message", (job: GrepJob) => {
  search(job).then(
    (outcome) => parentPort!.postMessage(outcome),
    (err: unknown) => parentPort!.postMessage({ ok: false, error: `grep failed: ${err instanceof Error ? err.message : String(err)}` } satisfies GrepOutcome),
  );
});
