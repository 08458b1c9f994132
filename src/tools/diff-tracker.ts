/**
 * The turn's aggregated diff (`turn/diff/updated`): each file's content from before the turn
 * first touched it, diffed against what is on disk now. One tracker per turn.
 */
import { binaryFileDiff, fileDiff } from "./diff.js";
import { readExisting } from "./patch.js";
import { displayPath } from "./workspace.js";

const utf8 = new TextDecoder("utf-8", { fatal: true });

function text(buf: Buffer | null): string | null | Error {
  if (buf === null) return null;
  if (buf.includes(0)) return new Error("binary");
  try {
    return utf8.decode(buf);
  } catch {
    return new Error("binary"); // not UTF-8: shown as a binary change
  }
}

export class TurnDiffTracker {
  private readonly baselines = new Map<string, { display: string; before: Buffer | null }>();

  constructor(private readonly cwd: string) {}

  /** Remembers a file's content before its first change in this turn (later calls are ignored). */
  recordBaseline(real: string, display: string, before: Buffer | null): void {
    if (!this.baselines.has(real)) this.baselines.set(real, { display, before });
  }

  get size(): number {
    return this.baselines.size;
  }

  /** The unified diff of every touched file, sorted by path; empty when nothing differs. */
  async render(): Promise<string> {
    const entries = [...this.baselines.entries()]
      .map(([real, b]) => ({ real, shown: displayPath(b.display, this.cwd), before: b.before }))
      .sort((x, y) => (x.shown < y.shown ? -1 : x.shown > y.shown ? 1 : 0));
    const parts: string[] = [];
    for (const e of entries) {
      let now: Buffer | null;
      try {
        now = await readExisting(e.real);
      } catch {
        // No longer readable without following a link (or now a directory): left out of this
        // aggregate view; each fileChange item still carries its own diff.
        continue;
      }
      if (e.before === null && now === null) continue;
      if (e.before !== null && now !== null && e.before.equals(now)) continue;
      const a = text(e.before);
      const b = text(now);
      if (a instanceof Error || b instanceof Error) parts.push(binaryFileDiff(e.shown, e.before !== null, now !== null));
      else parts.push(fileDiff(e.shown, a, b));
    }
    return parts.join("");
  }
}
