/**
 * Line diffs: Myers' O(ND) algorithm after trimming the common prefix and suffix, printed as a
 * unified diff. When the inputs differ too much for Myers to stay cheap, the differing middle
 * is reported as one replace hunk (correct, just not minimal).
 */

export type EditOp = "=" | "-" | "+";
export interface Edit {
  op: EditOp;
  /** Index into the old lines ("=" and "-") */
  a: number;
  /** Index into the new lines ("=" and "+") */
  b: number;
}

/** Beyond this many edits, give up on a minimal diff and replace the middle wholesale. */
const MAX_EDIT_DISTANCE = 2_000;

/** The edit script turning `a` into `b`. */
export function diffLines(a: readonly string[], b: readonly string[]): Edit[] {
  let pre = 0;
  while (pre < a.length && pre < b.length && a[pre] === b[pre]) pre++;
  let suf = 0;
  while (suf < a.length - pre && suf < b.length - pre && a[a.length - 1 - suf] === b[b.length - 1 - suf]) suf++;

  const edits: Edit[] = [];
  for (let i = 0; i < pre; i++) edits.push({ op: "=", a: i, b: i });
  const midA = a.slice(pre, a.length - suf);
  const midB = b.slice(pre, b.length - suf);
  const middle = myers(midA, midB) ?? replaceAll(midA.length, midB.length);
  for (const e of middle) edits.push({ op: e.op, a: e.a + pre, b: e.b + pre });
  for (let i = 0; i < suf; i++) edits.push({ op: "=", a: a.length - suf + i, b: b.length - suf + i });
  return edits;
}

function replaceAll(n: number, m: number): Edit[] {
  const out: Edit[] = [];
  for (let i = 0; i < n; i++) out.push({ op: "-", a: i, b: 0 });
  for (let j = 0; j < m; j++) out.push({ op: "+", a: n, b: j });
  return out;
}

/** Myers' greedy algorithm with a trace for backtracking; null when the distance is too large. */
function myers(a: readonly string[], b: readonly string[]): Edit[] | null {
  const n = a.length;
  const m = b.length;
  if (n === 0 || m === 0) return replaceAll(n, m);
  // Compare integers, not strings.
  const ids = new Map<string, number>();
  const id = (s: string) => {
    let v = ids.get(s);
    if (v === undefined) ids.set(s, (v = ids.size));
    return v;
  };
  const A = Int32Array.from(a, id);
  const B = Int32Array.from(b, id);

  const max = Math.min(n + m, MAX_EDIT_DISTANCE);
  const offset = max + 1;
  const v = new Int32Array(2 * max + 3);
  const trace: Int32Array[] = [];
  let found = -1;
  outer: for (let d = 0; d <= max; d++) {
    trace.push(v.slice(offset - d - 1, offset + d + 2));
    for (let k = -d; k <= d; k += 2) {
      let x = k === -d || (k !== d && v[offset + k - 1] < v[offset + k + 1]) ? v[offset + k + 1] : v[offset + k - 1] + 1;
      let y = x - k;
      while (x < n && y < m && A[x] === B[y]) {
        x++;
        y++;
      }
      v[offset + k] = x;
      if (x >= n && y >= m) {
        found = d;
        break outer;
      }
    }
  }
  if (found < 0) return null;

  // Backtrack from (n, m) through the saved V arrays. trace[d] holds V before step d, indexed
  // from k = -d - 1.
  const edits: Edit[] = [];
  let x = n;
  let y = m;
  for (let d = found; d > 0; d--) {
    const prev = trace[d];
    const get = (k: number) => prev[k + d + 1];
    const k = x - y;
    const down = k === -d || (k !== d && get(k - 1) < get(k + 1));
    const prevK = down ? k + 1 : k - 1;
    const prevX = get(prevK);
    const prevY = prevX - prevK;
    while (x > prevX && y > prevY) {
      x--;
      y--;
      edits.push({ op: "=", a: x, b: y });
    }
    if (down) {
      y--;
      edits.push({ op: "+", a: x, b: y });
    } else {
      x--;
      edits.push({ op: "-", a: x, b: y });
    }
  }
  while (x > 0 && y > 0) {
    x--;
    y--;
    edits.push({ op: "=", a: x, b: y });
  }
  return edits.reverse();
}

/** Text split into lines; the last line remembers whether it ended with a newline. */
export function splitLines(text: string): { lines: string[]; finalNewline: boolean } {
  if (text === "") return { lines: [], finalNewline: true };
  const lines = text.split("\n");
  const finalNewline = lines[lines.length - 1] === "";
  if (finalNewline) lines.pop();
  return { lines, finalNewline };
}

const NO_NEWLINE = "\\ No newline at end of file";

function range(start: number, len: number): string {
  // Unified diff convention: an empty range names the line before it.
  const s = len === 0 ? start : start + 1;
  return len === 1 ? `${s}` : `${s},${len}`;
}

/**
 * The hunks (`@@ … @@` blocks) of a unified diff between two texts, without file headers;
 * empty when the texts are equal.
 */
export function unifiedDiffHunks(oldText: string, newText: string, context = 3): string {
  if (oldText === newText) return "";
  const o = splitLines(oldText);
  const n = splitLines(newText);
  // A last line without a newline differs from the same line with one.
  const EOL_MARK = "\u0000<no-eol>";
  const oKeys = o.lines.map((l, i) => (i === o.lines.length - 1 && !o.finalNewline ? l + EOL_MARK : l));
  const nKeys = n.lines.map((l, i) => (i === n.lines.length - 1 && !n.finalNewline ? l + EOL_MARK : l));
  const edits = diffLines(oKeys, nKeys);

  const out: string[] = [];
  const line = (prefix: string, key: string) => {
    if (key.endsWith(EOL_MARK)) out.push(prefix + key.slice(0, -EOL_MARK.length), NO_NEWLINE);
    else out.push(prefix + key);
  };
  let i = 0;
  while (i < edits.length) {
    // Find the next change.
    while (i < edits.length && edits[i].op === "=") i++;
    if (i >= edits.length) break;
    const start = Math.max(0, i - context);
    // Extend the hunk while changes are within 2*context of each other.
    let end = i;
    let lastChange = i;
    while (end < edits.length) {
      if (edits[end].op !== "=") lastChange = end;
      else if (end - lastChange > 2 * context) break;
      end++;
    }
    end = Math.min(edits.length, lastChange + context + 1);
    const hunk = edits.slice(start, end);
    const first = hunk[0];
    const oldLen = hunk.filter((e) => e.op !== "+").length;
    const newLen = hunk.filter((e) => e.op !== "-").length;
    out.push(`@@ -${range(first.a, oldLen)} +${range(first.b, newLen)} @@`);
    for (const e of hunk) {
      if (e.op === "=") line(" ", oKeys[e.a]);
      else if (e.op === "-") line("-", oKeys[e.a]);
      else line("+", nKeys[e.b]);
    }
    i = end;
  }
  return out.length ? out.join("\n") + "\n" : "";
}

/**
 * The most of one file's diff that items and `turn/diff/updated` carry: a patch of tens of MiB
 * would otherwise be copied into every notification, stored row and client (issue 24: a 30 MiB
 * patch took the server from 290 to 943 MB). Beyond it the diff is cut at a line, with a note.
 */
export const MAX_SHOWN_DIFF_CHARS = 1024 * 1024;
/** Files larger than this (both sides together) are not diffed line by line at all. */
export const MAX_DIFFED_CHARS = 4 * 1024 * 1024;

/** `text` cut to MAX_SHOWN_DIFF_CHARS at a line end, saying how much was left out. */
export function shownDiff(text: string, limit = MAX_SHOWN_DIFF_CHARS): string {
  if (text.length <= limit) return text;
  const cut = text.lastIndexOf("\n", limit);
  const kept = text.slice(0, cut > 0 ? cut + 1 : limit);
  const rest = text.length - kept.length;
  return `${kept}[… ${rest} more characters of this diff not shown; the change itself is complete]\n`;
}

/** A git-style diff of one file; `null` content means the file does not exist on that side. */
export function fileDiff(displayPath: string, before: string | null, after: string | null, context = 3): string {
  if (before === after) return "";
  const a = `a/${displayPath.replace(/^\/+/, "")}`;
  const b = `b/${displayPath.replace(/^\/+/, "")}`;
  const header = [`diff --git ${a} ${b}`];
  if (before === null) header.push("new file mode 100644");
  if (after === null) header.push("deleted file mode 100644");
  header.push(`--- ${before === null ? "/dev/null" : a}`, `+++ ${after === null ? "/dev/null" : b}`);
  if ((before?.length ?? 0) + (after?.length ?? 0) > MAX_DIFFED_CHARS) {
    const size = (t: string | null) => (t === null ? "absent" : `${t.length} characters`);
    return `${header.join("\n")}\n@@ large file: ${size(before)} before, ${size(after)} after; not shown line by line @@\n`;
  }
  const hunks = unifiedDiffHunks(before ?? "", after ?? "", context);
  return shownDiff(header.join("\n") + "\n" + hunks);
}

/** The "binary files differ" form for content that is not text. */
export function binaryFileDiff(displayPath: string, beforeExists: boolean, afterExists: boolean): string {
  const p = displayPath.replace(/^\/+/, "");
  const lines = [`diff --git a/${p} b/${p}`];
  if (!beforeExists) lines.push("new file mode 100644");
  if (!afterExists) lines.push("deleted file mode 100644");
  lines.push(`Binary files ${beforeExists ? `a/${p}` : "/dev/null"} and ${afterExists ? `b/${p}` : "/dev/null"} differ`);
  return lines.join("\n") + "\n";
}
