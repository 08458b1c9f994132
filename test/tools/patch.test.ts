/** The apply_patch format: parser, chunk matching, planning, atomic commit, and the diff printer. */
import { existsSync, readFileSync, readdirSync, rmSync, statSync, chmodSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { diffLines, fileDiff, unifiedDiffHunks } from "../../src/tools/diff.js";
import { applyChunks, commitFileWrites, parsePatch, planPatch, seekSequence, type PatchHunk, type ResolvedTarget } from "../../src/tools/patch.js";
import { makeDirs, type Dirs } from "./helpers.js";

const wrap = (body: string) => `*** Begin Patch\n${body}\n*** End Patch`;

describe("parsePatch", () => {
  it("parses add, delete and update with a move and several chunks", () => {
    const r = parsePatch(
      wrap(`*** Add File: path/add.py
+abc
+def
*** Delete File: path/delete.py
*** Update File: path/update.py
*** Move to: path/update2.py
@@ def f():
-    pass
+    return 123
@@
 x
-y
+z
*** End of File`),
    );
    expect(r).toEqual({
      ok: true,
      hunks: [
        { type: "add", path: "path/add.py", contents: "abc\ndef\n" },
        { type: "delete", path: "path/delete.py" },
        {
          type: "update",
          path: "path/update.py",
          movePath: "path/update2.py",
          chunks: [
            { context: "def f():", oldLines: ["    pass"], newLines: ["    return 123"], isEndOfFile: false },
            { context: null, oldLines: ["x", "y"], newLines: ["x", "z"], isEndOfFile: true },
          ],
        },
      ],
    });
  });

  it("accepts a first chunk without @@, blank lines as empty context, CRLF, padding and a heredoc wrapper", () => {
    const r = parsePatch("*** Begin Patch  \r\n*** Update File: f.py\r\n import foo\r\n\r\n+bar\r\n  *** End Patch\r\n");
    expect(r.ok && r.hunks[0]).toEqual({
      type: "update",
      path: "f.py",
      movePath: null,
      chunks: [{ context: null, oldLines: ["import foo", ""], newLines: ["import foo", "", "bar"], isEndOfFile: false }],
    });
    const heredoc = parsePatch(`<<'EOF'\n${wrap("*** Add File: a\n+x")}\nEOF\n`);
    expect(heredoc.ok).toBe(true);
  });

  it("an empty patch has no hunks", () => {
    expect(parsePatch("*** Begin Patch\n*** End Patch")).toEqual({ ok: true, hunks: [] });
  });

  it.each([
    ["no begin marker", "bad", /first line of the patch must be '\*\*\* Begin Patch'/],
    ["no end marker", "*** Begin Patch\n*** Add File: a\n+x", /last line of the patch must be '\*\*\* End Patch'/],
    ["unknown header", wrap("*** Frobnicate File: a"), /line 2: '\*\*\* Frobnicate File: a' is not a valid hunk header/],
    ["empty update", wrap("*** Update File: a.py"), /line 2: Update file hunk for path 'a.py' is empty/],
    ["bad chunk line", wrap("*** Update File: a.py\n@@\nnot a diff line"), /line 4: Unexpected line found in update hunk/],
    ["second chunk without @@", wrap("*** Update File: a.py\n@@\n-a\n+b\n*** End of File\nxyz"), /Expected update hunk to start with a @@ context marker/],
    ["end of file with no lines", wrap("*** Update File: a.py\n@@\n*** End of File"), /does not contain any lines/],
  ])("rejects a malformed patch: %s", (_name, text, message) => {
    const r = parsePatch(text);
    expect(r.ok).toBe(false);
    expect(!r.ok && r.error).toMatch(message);
  });
});

describe("seekSequence and applyChunks", () => {
  it("matches exactly, then ignoring trailing whitespace, then trimmed, then with ASCII punctuation", () => {
    expect(seekSequence(["foo", "bar", "baz"], ["bar", "baz"], 0, false)).toBe(1);
    expect(seekSequence(["foo   ", "bar\t"], ["foo", "bar"], 0, false)).toBe(0);
    expect(seekSequence(["    foo   ", "   bar\t"], ["foo", "bar"], 0, false)).toBe(0);
    expect(seekSequence(["say \u201Chi\u201D \u2014 ok"], ['say "hi" - ok'], 0, false)).toBe(0);
    expect(seekSequence(["one"], ["too", "many"], 0, false)).toBeNull();
  });

  it("applies several chunks, keeps CRLF, adds the final newline", () => {
    const r = applyChunks(
      "a\nb\nc\nd\ne\nf",
      [
        { context: null, oldLines: ["a", "b"], newLines: ["a", "B"], isEndOfFile: false },
        { context: null, oldLines: ["d", "e"], newLines: ["d", "E"], isEndOfFile: false },
        { context: null, oldLines: ["f"], newLines: ["f", "g"], isEndOfFile: true },
      ],
      "x",
    );
    expect(r).toEqual({ ok: true, content: "a\nB\nc\nd\nE\nf\ng\n" });
    const crlf = applyChunks("one\r\ntwo\r\n", [{ context: null, oldLines: ["two"], newLines: ["2"], isEndOfFile: false }], "x");
    expect(crlf).toEqual({ ok: true, content: "one\r\n2\r\n" });
  });

  it("uses the @@ context line to find the right occurrence, and inserts after it", () => {
    const src = "def a():\n    pass\ndef b():\n    pass\n";
    const r = applyChunks(src, [{ context: "def b():", oldLines: ["    pass"], newLines: ["    return 1"], isEndOfFile: false }], "x");
    expect(r).toEqual({ ok: true, content: "def a():\n    pass\ndef b():\n    return 1\n" });
    const ins = applyChunks(src, [{ context: "def a():", oldLines: [], newLines: ["    # note"], isEndOfFile: false }], "x");
    expect(ins).toEqual({ ok: true, content: "def a():\n    # note\n    pass\ndef b():\n    pass\n" });
  });

  it("tolerates trailing-whitespace differences in the file", () => {
    const r = applyChunks("keep  \nold   \n", [{ context: null, oldLines: ["keep", "old"], newLines: ["keep", "new"], isEndOfFile: false }], "x");
    expect(r).toEqual({ ok: true, content: "keep\nnew\n" });
  });

  it("reports lines it cannot find, and missing context", () => {
    const r = applyChunks("a\nb\n", [{ context: null, oldLines: ["zzz"], newLines: ["y"], isEndOfFile: false }], "f.txt");
    expect(!r.ok && r.error).toMatch(/Failed to find expected lines in f.txt:\nzzz/);
    const c = applyChunks("a\nb\n", [{ context: "class Nope", oldLines: ["a"], newLines: ["y"], isEndOfFile: false }], "f.txt");
    expect(!c.ok && c.error).toMatch(/Failed to find context 'class Nope' in f.txt/);
  });
});

describe("planPatch and commitFileWrites", () => {
  let d: Dirs;
  beforeEach(() => {
    d = makeDirs();
  });
  afterEach(() => d.cleanup());
  const resolve = (p: string): ResolvedTarget => ({ display: path.resolve(d.ws, p), real: path.resolve(d.ws, p) });
  const plan = async (text: string) => {
    const parsed = parsePatch(text);
    if (!parsed.ok) throw new Error(parsed.error);
    return planPatch(parsed.hunks, resolve);
  };

  it("plans add, update+move and delete, with Codex-shaped changes", async () => {
    writeFileSync(path.join(d.ws, "old.txt"), "line1\nline2\n");
    writeFileSync(path.join(d.ws, "gone.txt"), "bye\n");
    const r = await plan(wrap("*** Add File: dir/new.txt\n+hello\n*** Update File: old.txt\n*** Move to: moved.txt\n@@\n line1\n-line2\n+LINE2\n*** Delete File: gone.txt"));
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.plan.summary).toEqual(["A dir/new.txt", "M moved.txt", "D gone.txt"]);
    expect(r.plan.changes).toEqual([
      { path: path.join(d.ws, "dir/new.txt"), kind: { type: "add" }, diff: "hello\n" },
      { path: path.join(d.ws, "gone.txt"), kind: { type: "delete" }, diff: "bye\n" },
      {
        path: path.join(d.ws, "old.txt"),
        kind: { type: "update", move_path: path.join(d.ws, "moved.txt") },
        diff: `@@ -1,2 +1,2 @@\n line1\n-line2\n+LINE2\n\n\nMoved to: ${path.join(d.ws, "moved.txt")}`,
      },
    ]);
    await commitFileWrites(r.plan.writes);
    expect(readFileSync(path.join(d.ws, "dir/new.txt"), "utf8")).toBe("hello\n");
    expect(readFileSync(path.join(d.ws, "moved.txt"), "utf8")).toBe("line1\nLINE2\n");
    expect(existsSync(path.join(d.ws, "old.txt"))).toBe(false);
    expect(existsSync(path.join(d.ws, "gone.txt"))).toBe(false);
    expect(readdirSync(d.ws).filter((n) => n.startsWith("."))).toEqual([]); // no temp or backup files left
  });

  it("a patch whose second file does not apply plans nothing (and nothing is written)", async () => {
    writeFileSync(path.join(d.ws, "a.txt"), "alpha\n");
    writeFileSync(path.join(d.ws, "b.txt"), "beta\n");
    const r = await plan(wrap("*** Update File: a.txt\n@@\n-alpha\n+ALPHA\n*** Update File: b.txt\n@@\n-gamma\n+GAMMA"));
    expect(r.ok).toBe(false);
    expect(!r.ok && r.error).toMatch(/Failed to find expected lines in b.txt/);
    expect(readFileSync(path.join(d.ws, "a.txt"), "utf8")).toBe("alpha\n");
    expect(readFileSync(path.join(d.ws, "b.txt"), "utf8")).toBe("beta\n");
  });

  it("refuses to update or delete missing files and to edit binary files", async () => {
    expect(await plan(wrap("*** Delete File: nope.txt"))).toMatchObject({ ok: false, error: expect.stringMatching(/does not exist/) });
    expect(await plan(wrap("*** Update File: nope.txt\n@@\n-a\n+b"))).toMatchObject({ ok: false, error: expect.stringMatching(/does not exist/) });
    writeFileSync(path.join(d.ws, "bin.dat"), Buffer.from([1, 0, 2, 3]));
    expect(await plan(wrap("*** Update File: bin.dat\n@@\n-a\n+b"))).toMatchObject({ ok: false, error: expect.stringMatching(/not a text file/) });
  });

  it("later hunks see earlier ones (update then delete of the same file)", async () => {
    writeFileSync(path.join(d.ws, "a.txt"), "x\n");
    const r = await plan(wrap("*** Update File: a.txt\n@@\n-x\n+y\n*** Delete File: a.txt"));
    expect(r.ok && r.plan.writes.map((w) => [w.before?.toString(), w.after])).toEqual([["x\n", null]]);
  });

  it("a failure while committing restores every file and removes created directories", async () => {
    writeFileSync(path.join(d.ws, "a.txt"), "alpha\n");
    writeFileSync(path.join(d.ws, "b.txt"), "beta\n");
    chmodSync(path.join(d.ws, "a.txt"), 0o640);
    const r = await plan(wrap("*** Update File: a.txt\n@@\n-alpha\n+ALPHA\n*** Add File: sub/dir/c.txt\n+c\n*** Delete File: b.txt"));
    if (!r.ok) throw new Error(r.error);
    await expect(
      commitFileWrites(r.plan.writes, {
        beforeRename: (i) => {
          if (i === 2) throw new Error("disk on fire");
        },
      }),
    ).rejects.toThrow(/disk on fire.*restored/);
    expect(readFileSync(path.join(d.ws, "a.txt"), "utf8")).toBe("alpha\n");
    expect(statSync(path.join(d.ws, "a.txt")).mode & 0o777).toBe(0o640);
    expect(readFileSync(path.join(d.ws, "b.txt"), "utf8")).toBe("beta\n");
    expect(existsSync(path.join(d.ws, "sub"))).toBe(false);
    expect(readdirSync(d.ws).sort()).toEqual(["a.txt", "b.txt"]);

    // And without the fault it applies, keeping the file mode.
    await commitFileWrites(r.plan.writes);
    expect(readFileSync(path.join(d.ws, "a.txt"), "utf8")).toBe("ALPHA\n");
    expect(statSync(path.join(d.ws, "a.txt")).mode & 0o777).toBe(0o640);
  });

  it("a rollback that cannot put an original back says so, and where the original is, instead of 'every file was restored'", async () => {
    writeFileSync(path.join(d.ws, "a.txt"), "alpha\n");
    writeFileSync(path.join(d.ws, "b.txt"), "beta\n");
    const r = await plan(wrap("*** Update File: a.txt\n@@\n-alpha\n+ALPHA\n*** Delete File: b.txt"));
    if (!r.ok) throw new Error(r.error);
    let backup = "";
    const err = await commitFileWrites(r.plan.writes, {
      beforeRename: (i) => {
        if (i !== 1) return;
        // a.txt is in place and its original moved aside: lose the original, then fail.
        backup = readdirSync(d.ws).find((n) => n.startsWith(".a.txt.") && n.endsWith(".orig"))!;
        rmSync(path.join(d.ws, backup));
        throw new Error("disk on fire");
      },
    }).then(
      () => new Error("the commit succeeded"),
      (e: unknown) => e as Error,
    );
    expect(err.message).toMatch(/disk on fire/);
    expect(err.message).not.toMatch(/every file was restored/);
    expect(err.message).toContain(`a.txt could not be restored (`);
    expect(err.message).toContain(`its original content is in ${backup} beside it`);
    expect(readFileSync(path.join(d.ws, "b.txt"), "utf8")).toBe("beta\n"); // never touched
  });

  it("refuses to commit when a file changed after planning", async () => {
    writeFileSync(path.join(d.ws, "a.txt"), "alpha\n");
    const r = await plan(wrap("*** Update File: a.txt\n@@\n-alpha\n+ALPHA"));
    if (!r.ok) throw new Error(r.error);
    writeFileSync(path.join(d.ws, "a.txt"), "someone else\n");
    await expect(commitFileWrites(r.plan.writes)).rejects.toThrow(/changed after the patch was checked/);
    expect(readFileSync(path.join(d.ws, "a.txt"), "utf8")).toBe("someone else\n");
  });

  it("a failure while writing temp files changes nothing", async () => {
    writeFileSync(path.join(d.ws, "a.txt"), "alpha\n");
    writeFileSync(path.join(d.ws, "blocker"), "a file where a directory should be\n");
    const hunks: PatchHunk[] = [
      { type: "update", path: "a.txt", movePath: null, chunks: [{ context: null, oldLines: ["alpha"], newLines: ["ALPHA"], isEndOfFile: false }] },
      { type: "add", path: "blocker/x.txt", contents: "x\n" },
    ];
    const r = await planPatch(hunks, resolve);
    if (!r.ok) throw new Error(r.error);
    await expect(commitFileWrites(r.plan.writes)).rejects.toThrow(/nothing was changed/);
    expect(readFileSync(path.join(d.ws, "a.txt"), "utf8")).toBe("alpha\n");
    expect(readdirSync(d.ws).sort()).toEqual(["a.txt", "blocker"]);
  });
});

describe("diff", () => {
  it("finds a minimal edit script", () => {
    const edits = diffLines(["a", "b", "c", "a", "b", "b", "a"], ["c", "b", "a", "b", "a", "c"]);
    expect(edits.filter((e) => e.op !== "=").length).toBe(5); // the classic Myers example: D = 5
  });

  it("prints unified hunks with context and merges nearby changes", () => {
    const old = Array.from({ length: 20 }, (_, i) => `line ${i + 1}`).join("\n") + "\n";
    const neu = old.replace("line 2\n", "line two\n").replace("line 5\n", "line five\n").replace("line 18\n", "");
    expect(unifiedDiffHunks(old, neu)).toBe(
      [
        "@@ -1,8 +1,8 @@",
        " line 1",
        "-line 2",
        "+line two",
        " line 3",
        " line 4",
        "-line 5",
        "+line five",
        " line 6",
        " line 7",
        " line 8",
        "@@ -15,6 +15,5 @@",
        " line 15",
        " line 16",
        " line 17",
        "-line 18",
        " line 19",
        " line 20",
        "",
      ].join("\n"),
    );
  });

  it("handles empty sides, missing final newlines, and equal inputs", () => {
    expect(unifiedDiffHunks("", "a\nb\n")).toBe("@@ -0,0 +1,2 @@\n+a\n+b\n");
    expect(unifiedDiffHunks("a\n", "")).toBe("@@ -1 +0,0 @@\n-a\n");
    expect(unifiedDiffHunks("a\nb", "a\nb\n")).toBe("@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n");
    expect(unifiedDiffHunks("same\n", "same\n")).toBe("");
  });

  it("prints git-style file diffs for new and deleted files", () => {
    expect(fileDiff("src/x.ts", null, "hi\n")).toBe("diff --git a/src/x.ts b/src/x.ts\nnew file mode 100644\n--- /dev/null\n+++ b/src/x.ts\n@@ -0,0 +1 @@\n+hi\n");
    expect(fileDiff("x", "bye\n", null)).toBe("diff --git a/x b/x\ndeleted file mode 100644\n--- a/x\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n");
  });

  it("stays correct (if not minimal) on large, very different inputs", () => {
    const a = Array.from({ length: 6000 }, (_, i) => `a${i}`);
    const b = Array.from({ length: 6000 }, (_, i) => `b${i}`);
    const edits = diffLines(a, b);
    expect(edits.filter((e) => e.op === "-").length).toBe(6000);
    expect(edits.filter((e) => e.op === "+").length).toBe(6000);
    // Reconstruct b from the script.
    const rebuilt = edits.filter((e) => e.op !== "-").map((e) => (e.op === "=" ? a[e.a] : b[e.b]));
    expect(rebuilt).toEqual(b);
  });

  it("edit scripts always rebuild the new text", () => {
    let seed = 7;
    const rand = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    for (let round = 0; round < 50; round++) {
      const a = Array.from({ length: Math.floor(rand() * 30) }, () => "xyz"[Math.floor(rand() * 3)]);
      const b = Array.from({ length: Math.floor(rand() * 30) }, () => "xyz"[Math.floor(rand() * 3)]);
      const edits = diffLines(a, b);
      expect(edits.filter((e) => e.op !== "+").map((e) => a[e.a])).toEqual(a);
      expect(edits.filter((e) => e.op !== "-").map((e) => (e.op === "=" ? a[e.a] : b[e.b]))).toEqual(b);
    }
  });
});

