/**
 * Codex's apply_patch format: parsing, checking against the files, and applying all-or-nothing.
 *
 *   *** Begin Patch
 *   *** Add File: path          followed by `+` lines
 *   *** Delete File: path
 *   *** Update File: path       optionally followed by `*** Move to: new/path`, then chunks:
 *   @@ [context line]           ` ` context, `-` removed, `+` added lines; `*** End of File` pins
 *                               the chunk to the end of the file
 *   *** End Patch
 *
 * Parsing follows codex-rs/apply-patch (lenient about whitespace around markers and about a
 * heredoc wrapper); matching tolerates trailing-whitespace (then any surrounding whitespace, then
 * typographic punctuation) differences, as Codex's seek_sequence does.
 */
import { randomBytes } from "node:crypto";
import path from "node:path";
import type { FileUpdateChange } from "../protocol/items.js";
import { MAX_DIFFED_CHARS, shownDiff, unifiedDiffHunks } from "./diff.js";
import { PinnedDir, readNoFollow, SymlinkInPathError } from "./pinned-dir.js";

export interface UpdateChunk {
  /** A line (usually a class or function header) the chunk comes after. */
  context: string | null;
  oldLines: string[];
  newLines: string[];
  /** The chunk's old lines must be at the end of the file. */
  isEndOfFile: boolean;
}

export type PatchHunk =
  | { type: "add"; path: string; contents: string }
  | { type: "delete"; path: string }
  | { type: "update"; path: string; movePath: string | null; chunks: UpdateChunk[] };

export type ParseResult = { ok: true; hunks: PatchHunk[] } | { ok: false; error: string };

const BEGIN = "*** Begin Patch";
const END = "*** End Patch";
const ADD = "*** Add File: ";
const DELETE = "*** Delete File: ";
const UPDATE = "*** Update File: ";
const MOVE = "*** Move to: ";
const EOF_MARKER = "*** End of File";

class ParseError extends Error {}
const hunkError = (line: number, message: string) => new ParseError(`Invalid patch hunk on line ${line}: ${message}`);

function boundaries(lines: string[]): string[] {
  const strict = (ls: string[]): string[] | string => {
    const first = ls[0]?.trim();
    const last = ls[ls.length - 1]?.trim();
    if (first !== BEGIN) return "The first line of the patch must be '*** Begin Patch'";
    if (ls.length < 2 || last !== END) return "The last line of the patch must be '*** End Patch'";
    return ls.slice(1, -1);
  };
  const result = strict(lines);
  if (typeof result !== "string") return result;
  // Lenient: a heredoc wrapper (<<EOF … EOF) around the patch, as some models send it.
  const first = lines[0];
  if (lines.length >= 4 && (first === "<<EOF" || first === "<<'EOF'" || first === '<<"EOF"') && lines[lines.length - 1].endsWith("EOF")) {
    const inner = strict(lines.slice(1, -1));
    if (typeof inner !== "string") return inner;
  }
  throw new ParseError(`Invalid patch: ${result}`);
}

/** Parses patch text into hunks; errors name the line and the problem. */
export function parsePatch(text: string): ParseResult {
  try {
    const lines = text.trim().split("\n").map((l) => (l.endsWith("\r") ? l.slice(0, -1) : l));
    const body = boundaries(lines);
    const hunks: PatchHunk[] = [];
    let i = 0;
    while (i < body.length) {
      const lineNo = i + 2;
      const header = body[i].trim();
      if (header.startsWith(ADD)) {
        const p = header.slice(ADD.length);
        let contents = "";
        i++;
        while (i < body.length && body[i].startsWith("+")) {
          contents += body[i].slice(1) + "\n";
          i++;
        }
        hunks.push({ type: "add", path: p, contents });
        continue;
      }
      if (header.startsWith(DELETE)) {
        hunks.push({ type: "delete", path: header.slice(DELETE.length) });
        i++;
        continue;
      }
      if (header.startsWith(UPDATE)) {
        const p = header.slice(UPDATE.length);
        i++;
        let movePath: string | null = null;
        if (i < body.length && body[i].startsWith(MOVE)) {
          movePath = body[i].slice(MOVE.length).trim();
          i++;
        }
        const chunks: UpdateChunk[] = [];
        while (i < body.length) {
          if (body[i].trim() === "") {
            i++;
            continue;
          }
          if (body[i].startsWith("*")) break;
          const [chunk, used] = parseChunk(body, i, chunks.length === 0);
          chunks.push(chunk);
          i += used;
        }
        if (chunks.length === 0) throw hunkError(lineNo, `Update file hunk for path '${p}' is empty`);
        hunks.push({ type: "update", path: p, movePath, chunks });
        continue;
      }
      throw hunkError(
        lineNo,
        `'${header}' is not a valid hunk header. Valid hunk headers: '*** Add File: {path}', '*** Delete File: {path}', '*** Update File: {path}'`,
      );
    }
    for (const h of hunks) {
      if (h.path.trim() === "") throw new ParseError("Invalid patch: a hunk has an empty path");
      if (h.type === "update" && h.movePath !== null && h.movePath === "") throw new ParseError("Invalid patch: '*** Move to:' needs a path");
    }
    return { ok: true, hunks };
  } catch (err) {
    if (err instanceof ParseError) return { ok: false, error: err.message };
    throw err;
  }
}

function parseChunk(lines: string[], start: number, allowMissingContext: boolean): [UpdateChunk, number] {
  const lineNo = start + 2;
  let context: string | null = null;
  let i = start;
  if (lines[i] === "@@" || lines[i].trimEnd() === "@@") {
    i++;
  } else if (lines[i].startsWith("@@ ")) {
    context = lines[i].slice(3);
    i++;
  } else if (!allowMissingContext) {
    throw hunkError(lineNo, `Expected update hunk to start with a @@ context marker, got: '${lines[i]}'`);
  }
  if (i >= lines.length) throw hunkError(lineNo + 1, "Update hunk does not contain any lines");
  const chunk: UpdateChunk = { context, oldLines: [], newLines: [], isEndOfFile: false };
  let parsed = 0;
  for (; i < lines.length; i++) {
    const line = lines[i];
    if (line === EOF_MARKER || line.trim() === EOF_MARKER) {
      if (parsed === 0) throw hunkError(lineNo + 1, "Update hunk does not contain any lines");
      chunk.isEndOfFile = true;
      parsed++;
      i++;
      break;
    }
    const c = line[0];
    if (line === "") {
      chunk.oldLines.push("");
      chunk.newLines.push("");
    } else if (c === " ") {
      chunk.oldLines.push(line.slice(1));
      chunk.newLines.push(line.slice(1));
    } else if (c === "+") {
      chunk.newLines.push(line.slice(1));
    } else if (c === "-") {
      chunk.oldLines.push(line.slice(1));
    } else {
      if (parsed === 0) {
        throw hunkError(
          lineNo + 1,
          `Unexpected line found in update hunk: '${line}'. Every line should start with ' ' (context line), '+' (added line), or '-' (removed line)`,
        );
      }
      break; // the start of the next chunk or hunk
    }
    parsed++;
  }
  return [chunk, i - start];
}

// ---------------------------------------------------------------------------------------------
// Matching chunks against a file

const PUNCTUATION: Record<string, string> = {
  "\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-", "\u2014": "-", "\u2015": "-", "\u2212": "-",
  "\u2018": "'", "\u2019": "'", "\u201A": "'", "\u201B": "'",
  "\u201C": '"', "\u201D": '"', "\u201E": '"', "\u201F": '"',
  "\u00A0": " ", "\u2002": " ", "\u2003": " ", "\u2004": " ", "\u2005": " ", "\u2006": " ", "\u2007": " ",
  "\u2008": " ", "\u2009": " ", "\u200A": " ", "\u202F": " ", "\u205F": " ", "\u3000": " ",
};
const normalise = (s: string) => s.trim().replace(/[\u2010-\u2015\u2212\u2018-\u201F\u00A0\u2002-\u200A\u202F\u205F\u3000]/g, (c) => PUNCTUATION[c] ?? c);

const COMPARATORS: Array<(a: string, b: string) => boolean> = [
  (a, b) => a === b,
  (a, b) => a.trimEnd() === b.trimEnd(),
  (a, b) => a.trim() === b.trim(),
  (a, b) => normalise(a) === normalise(b),
];

/** Where `pattern` occurs in `lines` at or after `start`, with decreasing strictness. */
export function seekSequence(lines: readonly string[], pattern: readonly string[], start: number, eof: boolean): number | null {
  if (pattern.length === 0) return start;
  if (pattern.length > lines.length) return null;
  const last = lines.length - pattern.length;
  const tryFrom = (from: number): number | null => {
    for (const eq of COMPARATORS) {
      for (let i = from; i <= last; i++) {
        let ok = true;
        for (let j = 0; j < pattern.length && ok; j++) ok = eq(lines[i + j], pattern[j]);
        if (ok) return i;
      }
    }
    return null;
  };
  if (eof) {
    const atEnd = tryFrom(last);
    if (atEnd !== null) return atEnd;
  }
  return tryFrom(start);
}

export type ApplyResult = { ok: true; content: string } | { ok: false; error: string };

/** Applies update chunks to file text. Line endings (LF or CRLF) are kept; the result ends with a newline. */
export function applyChunks(original: string, chunks: readonly UpdateChunk[], displayPath: string): ApplyResult {
  const eol = original.includes("\r\n") ? "\r\n" : "\n";
  let lines = original.split("\n");
  if (eol === "\r\n") lines = lines.map((l) => (l.endsWith("\r") ? l.slice(0, -1) : l));
  if (lines.length > 0 && lines[lines.length - 1] === "") lines.pop();

  const replacements: Array<[number, number, string[]]> = [];
  let lineIndex = 0;
  for (const chunk of chunks) {
    if (chunk.context !== null) {
      const at = seekSequence(lines, [chunk.context], lineIndex, false);
      if (at === null) return { ok: false, error: `Failed to find context '${chunk.context}' in ${displayPath}` };
      lineIndex = at + 1;
    }
    if (chunk.oldLines.length === 0) {
      // Pure addition: after the context line when there is one, else at the end of the file.
      const at = chunk.context !== null && !chunk.isEndOfFile ? lineIndex : lines.length;
      replacements.push([at, 0, chunk.newLines]);
      continue;
    }
    let pattern = chunk.oldLines;
    let replacement = chunk.newLines;
    let found = seekSequence(lines, pattern, lineIndex, chunk.isEndOfFile);
    if (found === null && pattern[pattern.length - 1] === "") {
      // A trailing empty line often stands for the file's final newline.
      pattern = pattern.slice(0, -1);
      if (replacement[replacement.length - 1] === "") replacement = replacement.slice(0, -1);
      found = seekSequence(lines, pattern, lineIndex, chunk.isEndOfFile);
    }
    if (found === null) return { ok: false, error: `Failed to find expected lines in ${displayPath}:\n${chunk.oldLines.join("\n")}` };
    replacements.push([found, pattern.length, replacement]);
    lineIndex = found + pattern.length;
  }
  replacements.sort((a, b) => a[0] - b[0]);
  for (let r = replacements.length - 1; r >= 0; r--) {
    const [at, len, repl] = replacements[r];
    lines.splice(at, len, ...repl);
  }
  if (lines.length === 0 || lines[lines.length - 1] !== "") lines.push("");
  return { ok: true, content: lines.join(eol) };
}

// ---------------------------------------------------------------------------------------------
// Planning: the whole patch against the current files, in memory

export interface ResolvedTarget {
  /** Absolute path as named (items, messages). */
  display: string;
  /** Symlink-free path to operate on. */
  real: string;
}

/** One file's before and after; `null` means absent. */
export interface FileWrite {
  real: string;
  display: string;
  before: Buffer | null;
  after: Buffer | null;
}

export interface PatchPlan {
  writes: FileWrite[];
  /** The fileChange item's changes (Codex: add/delete carry the content, update a unified diff). */
  changes: FileUpdateChange[];
  /** `A path` / `M path` / `D path` lines, in patch order. */
  summary: string[];
}

export type PlanResult = { ok: true; plan: PatchPlan } | { ok: false; error: string };

const utf8 = new TextDecoder("utf-8", { fatal: true });

function asText(buf: Buffer, display: string): string | Error {
  if (buf.includes(0)) return new Error(`${display} is not a text file; apply_patch only edits UTF-8 text`);
  try {
    return utf8.decode(buf);
  } catch {
    return new Error(`${display} is not valid UTF-8; apply_patch only edits UTF-8 text`);
  }
}

/**
 * Reads a file's bytes; null when it does not exist. `real` is the checked, symlink-free path: it
 * is read without following symbolic links (pinned-dir.ts), so a directory swapped for a link
 * after the check cannot make us read (and show in a diff) a file outside the checked location.
 */
export async function readExisting(real: string): Promise<Buffer | null> {
  try {
    return (await readNoFollow(real))?.content ?? null;
  } catch (err) {
    if (err instanceof SymlinkInPathError) {
      throw new Error(`${real} was not read: ${err.path} is a symbolic link (the directory tree changed after the path was checked)`);
    }
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") return null;
    if (code === "EISDIR") throw new Error(`${real} is a directory`);
    throw err;
  }
}

/**
 * Applies the hunks, in order, to an in-memory view of the files they touch: every hunk must
 * apply, or nothing is planned. Later hunks see earlier ones' results.
 */
export async function planPatch(hunks: readonly PatchHunk[], resolve: (p: string) => ResolvedTarget, read: (real: string) => Promise<Buffer | null> = readExisting): Promise<PlanResult> {
  const current = new Map<string, Buffer | null>();
  const original = new Map<string, Buffer | null>();
  const displays = new Map<string, string>();
  const changes = new Map<string, FileUpdateChange>();
  const summary: string[] = [];

  const load = async (t: ResolvedTarget): Promise<Buffer | null> => {
    displays.set(t.real, t.display);
    if (!current.has(t.real)) {
      const content = await read(t.real);
      original.set(t.real, content);
      current.set(t.real, content);
    }
    return current.get(t.real) ?? null;
  };

  try {
    for (const h of hunks) {
      const t = resolve(h.path);
      if (h.type === "add") {
        await load(t);
        current.set(t.real, Buffer.from(h.contents, "utf8"));
        changes.set(t.display, { path: t.display, kind: { type: "add" }, diff: shownDiff(h.contents) });
        summary.push(`A ${h.path}`);
      } else if (h.type === "delete") {
        const before = await load(t);
        if (before === null) return { ok: false, error: `Failed to delete ${h.path}: the file does not exist` };
        current.set(t.real, null);
        const text = asText(before, h.path);
        changes.set(t.display, { path: t.display, kind: { type: "delete" }, diff: text instanceof Error ? "" : shownDiff(text) });
        summary.push(`D ${h.path}`);
      } else {
        const before = await load(t);
        if (before === null) return { ok: false, error: `Failed to update ${h.path}: the file does not exist` };
        const text = asText(before, h.path);
        if (text instanceof Error) return { ok: false, error: text.message };
        const applied = applyChunks(text, h.chunks, h.path);
        if (!applied.ok) return { ok: false, error: applied.error };
        let diff =
          text.length + applied.content.length > MAX_DIFFED_CHARS
            ? `@@ large file: ${text.length} characters before, ${applied.content.length} after; not shown line by line @@\n`
            : shownDiff(unifiedDiffHunks(text, applied.content));
        let movedTo: ResolvedTarget | null = null;
        if (h.movePath !== null) {
          movedTo = resolve(h.movePath);
          await load(movedTo);
          if (movedTo.real !== t.real) current.set(t.real, null);
          current.set(movedTo.real, Buffer.from(applied.content, "utf8"));
          diff = `${diff}\n\nMoved to: ${movedTo.display}`;
        } else {
          current.set(t.real, Buffer.from(applied.content, "utf8"));
        }
        changes.set(t.display, { path: t.display, kind: { type: "update", move_path: movedTo?.display ?? null }, diff });
        summary.push(`M ${h.movePath ?? h.path}`);
      }
    }
  } catch (err) {
    return { ok: false, error: (err as Error).message };
  }

  const writes: FileWrite[] = [];
  for (const [real, after] of current) {
    const before = original.get(real) ?? null;
    if (before === null && after === null) continue;
    if (before !== null && after !== null && before.equals(after)) continue;
    writes.push({ real, display: displays.get(real) ?? real, before, after });
  }
  const sorted = [...changes.values()].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  return { ok: true, plan: { writes, changes: sorted, summary } };
}

// ---------------------------------------------------------------------------------------------
// Committing: all files or none

export class CommitError extends Error {}

export interface CommitHooks {
  /** Test hook: called before each rename of the commit phase (throw to simulate a failure). */
  beforeRename?: (index: number, target: string) => void | Promise<void>;
}

/**
 * Runs a cleanup step whose failure changes nothing for the caller: removing a temp file, a placed
 * file about to be replaced by its restored original, or a backup once the patch is in place. A
 * step that fails leaves at most a stray `.name.<tag>.tmp`/`.orig` file behind; the outcome
 * reported (applied, or failed with every file restored) is still true.
 */
async function quietly(op: () => Promise<unknown>): Promise<void> {
  try {
    await op();
  } catch {
    /* see above: a stray file at most */
  }
}

const changedUnderUs = (w: FileWrite) =>
  `${w.display} changed while the patch was being applied (a path component became a symbolic link); nothing was written`;

/**
 * Writes every file's new content or deletes it, atomically as a set: new contents go to temp
 * files beside their targets first; then each target is moved aside and replaced by rename. Any
 * failure puts every file back as it was (and removes directories this call created). Before
 * touching anything, each file must still hold the content the patch was checked against.
 *
 * Every operation (the verification read, mkdir of missing parents, temp files, renames, unlinks,
 * rollback) goes through the target directory pinned by file descriptor (pinned-dir.ts), opened
 * from `/` without following symbolic links: the write lands exactly at the checked `real` path,
 * or, when a component has meanwhile become a symbolic link, the commit fails and nothing is
 * written. (Without /proc/self/fd, PinnedDir falls back to path-based operations.)
 */
export async function commitFileWrites(writes: readonly FileWrite[], hooks: CommitHooks = {}): Promise<void> {
  const commit = new FileCommit(writes);
  try {
    const modes = await commit.verifyUnchanged();
    const temps = await commit.writeTemps(modes);
    const placed = await commit.placeAll(temps, hooks);
    await commit.dropOriginals(placed);
  } finally {
    await commit.close();
  }
}

/** A file of phase 2: moved aside (`backup`) and/or replaced by its new content (`placed`). */
interface PlacedFile {
  write: FileWrite;
  dir: PinnedDir;
  backup: string | null;
  placed: boolean;
}

/** The state of one commitFileWrites call: its file tag and the directories it pinned. */
class FileCommit {
  private readonly tag = `${process.pid}.${randomBytes(4).toString("hex")}`;
  /** Pinned directories by path, in the order opened (which is the order they were created in). */
  private readonly dirs = new Map<string, PinnedDir>();

  constructor(private readonly writes: readonly FileWrite[]) {}

  /** Each file must still hold what the patch was checked against (read through the pinned dir); the modes of those that exist. */
  async verifyUnchanged(): Promise<Map<string, number>> {
    const modes = new Map<string, number>();
    for (const w of this.writes) {
      const now = await this.readNow(w);
      const same = now === undefined ? false : now === null ? w.before === null : w.before !== null && now.content.equals(w.before);
      if (!same) throw new CommitError(`${w.display} changed after the patch was checked; nothing was written`);
      if (now) modes.set(w.real, now.mode);
    }
    return modes;
  }

  /** A file's content now: null when it (or its directory) does not exist, undefined when it cannot be read. */
  private async readNow(w: FileWrite): Promise<{ content: Buffer; mode: number } | null | undefined> {
    try {
      let dir: PinnedDir | null = null;
      try {
        dir = await this.dirOf(w.real, false);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code !== "ENOENT" && code !== "ENOTDIR") throw err;
      }
      return dir === null ? null : await dir.read(nameOf(w.real));
    } catch (err) {
      if (err instanceof SymlinkInPathError) throw new CommitError(changedUnderUs(w));
      // Unreadable is not "unchanged": the caller refuses the commit, naming the file.
      return undefined;
    }
  }

  /** Phase 1: new contents into temp files beside their targets; on failure, nothing was changed. */
  async writeTemps(modes: ReadonlyMap<string, number>): Promise<Map<string, string>> {
    const temps = new Map<string, string>();
    let writing: FileWrite | null = null;
    try {
      for (const w of this.writes) {
        if (w.after === null) continue;
        writing = w;
        const dir = await this.dirOf(w.real, true);
        const tmp = `.${nameOf(w.real)}.${this.tag}.tmp`;
        const mode = w.before !== null ? modes.get(w.real) : undefined;
        await dir.writeExclusive(tmp, w.after, mode);
        temps.set(w.real, tmp);
      }
    } catch (err) {
      await this.removeTemps(temps);
      await this.removeCreatedDirs();
      if (err instanceof SymlinkInPathError && writing !== null) throw new CommitError(changedUnderUs(writing));
      throw new CommitError(`could not write ${describeTarget(err)}: ${(err as Error).message}; nothing was changed`);
    }
    return temps;
  }

  /** Phase 2: move originals aside, renames into place; on failure, every file is put back. */
  async placeAll(temps: Map<string, string>, hooks: CommitHooks): Promise<PlacedFile[]> {
    const done: PlacedFile[] = [];
    try {
      let index = 0;
      for (const w of this.writes) {
        await hooks.beforeRename?.(index++, w.real);
        if (w.before === null && !temps.has(w.real)) continue; // absent before and after
        const step: PlacedFile = { write: w, dir: await this.dirOf(w.real, false), backup: null, placed: false };
        done.push(step);
        if (w.before !== null) {
          const backup = `.${nameOf(w.real)}.${this.tag}.orig`;
          await step.dir.rename(nameOf(w.real), backup);
          step.backup = backup;
        }
        const tmp = temps.get(w.real);
        if (tmp !== undefined) {
          await step.dir.rename(tmp, nameOf(w.real));
          temps.delete(w.real);
          step.placed = true;
        }
      }
    } catch (err) {
      const unrestored = await this.putBack(done);
      await this.removeTemps(temps);
      await this.removeCreatedDirs();
      if (unrestored.length > 0) throw new CommitError(`applying the patch failed (${(err as Error).message}); ${unrestored.join("; ")}`);
      if (err instanceof SymlinkInPathError) throw new CommitError(`${err.message}: the directory tree changed while the patch was being applied; every file was restored`);
      throw new CommitError(`applying the patch failed (${(err as Error).message}); every file was restored`);
    }
    return done;
  }

  /** Undoes phase 2, last file first; says which originals could not be put back, and where they are. */
  private async putBack(done: readonly PlacedFile[]): Promise<string[]> {
    const unrestored: string[] = [];
    for (const step of [...done].reverse()) {
      const name = nameOf(step.write.real);
      if (step.backup === null) {
        // A file the patch added: it must go again.
        if (step.placed) {
          try {
            await step.dir.unlink(name);
          } catch (err) {
            unrestored.push(`${step.write.display} could not be removed again (${(err as Error).message})`);
          }
        }
        continue;
      }
      // The rename below replaces the placed file anyway: this unlink failing loses nothing.
      if (step.placed) await quietly(() => step.dir.unlink(name));
      try {
        await step.dir.rename(step.backup, name);
      } catch (err) {
        unrestored.push(`${step.write.display} could not be restored (${(err as Error).message}): its original content is in ${step.backup} beside it`);
      }
    }
    return unrestored;
  }

  /** Phase 3: drop the originals. */
  async dropOriginals(placed: readonly PlacedFile[]): Promise<void> {
    for (const step of placed) {
      const backup = step.backup;
      // A backup left behind is a stray copy of the old content; the patch itself is applied.
      if (backup !== null) await quietly(() => step.dir.unlink(backup));
    }
  }

  async close(): Promise<void> {
    for (const dir of this.dirs.values()) await dir.close();
  }

  private async dirOf(real: string, create: boolean): Promise<PinnedDir> {
    const key = path.dirname(real);
    let dir = this.dirs.get(key);
    if (dir === undefined) {
      dir = await PinnedDir.open(key, { create });
      this.dirs.set(key, dir);
    }
    return dir;
  }

  /** Removes temp files not (or no longer) placed: leftovers of a commit that is failing anyway. */
  private async removeTemps(temps: ReadonlyMap<string, string>): Promise<void> {
    for (const [real, tmp] of temps) {
      const dir = this.dirs.get(path.dirname(real));
      if (dir) await quietly(() => dir.unlink(tmp));
    }
  }

  private async removeCreatedDirs(): Promise<void> {
    for (const dir of [...this.dirs.values()].reverse()) await dir.removeCreated();
  }
}

const nameOf = (real: string) => path.basename(real);

function describeTarget(err: unknown): string {
  const p = (err as NodeJS.ErrnoException).path;
  return p ? p : "a file";
}
