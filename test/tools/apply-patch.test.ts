/** The apply_patch tool: items, the turn diff, atomicity, path checks, approvals and policies. */
import { existsSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { AskForApproval, SandboxMode } from "../../src/protocol/common.js";
import { TrustBoundary } from "../../src/sandbox/boundary.js";
import { CommandRunner } from "../../src/sandbox/runner.js";
import { builtinTools } from "../../src/tools/builtin.js";
import { fileDiff, MAX_DIFFED_CHARS, MAX_SHOWN_DIFF_CHARS } from "../../src/tools/diff.js";
import { makeDirs, RecordingContext, run, textOf, toolNamed, type Dirs } from "./helpers.js";

let d: Dirs;
beforeEach(() => {
  d = makeDirs();
  writeFileSync(path.join(d.ws, "a.txt"), "one\ntwo\nthree\n");
  writeFileSync(path.join(d.ws, "b.txt"), "alpha\nbeta\n");
  writeFileSync(path.join(d.outside, "secret.txt"), "secret\n");
});
afterEach(() => d.cleanup());

const wrap = (body: string) => `*** Begin Patch\n${body}\n*** End Patch`;
const setup = (sandbox: SandboxMode = "workspace-write", policy: AskForApproval = "on-request") => {
  const ctx = new RecordingContext(d.ws, sandbox, policy);
  const tools = builtinTools(ctx);
  return { ctx, tools, patch: toolNamed(tools, "apply_patch") };
};
const read = (p: string) => readFileSync(path.join(d.ws, p), "utf8");

describe("apply_patch", () => {
  it("applies a patch as a fileChange item and announces the turn diff", async () => {
    const { ctx, patch } = setup();
    const out = await run(patch, { patch: wrap("*** Update File: a.txt\n@@\n one\n-two\n+TWO\n*** Add File: new/c.txt\n+see\n*** Delete File: b.txt") });
    expect(out.isError).toBe(false);
    expect(textOf(out)).toBe("Success. Updated the following files:\nM a.txt\nA new/c.txt\nD b.txt");
    expect(read("a.txt")).toBe("one\nTWO\nthree\n");
    expect(read("new/c.txt")).toBe("see\n");
    expect(existsSync(path.join(d.ws, "b.txt"))).toBe(false);

    expect(ctx.events.map((e) => e.type)).toEqual(["started", "completed", "diff"]);
    const started = ctx.started[0];
    expect(started).toMatchObject({ type: "fileChange", status: "inProgress" });
    expect(started.type === "fileChange" && started.changes).toEqual([
      { path: path.join(d.ws, "a.txt"), kind: { type: "update", move_path: null }, diff: "@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n" },
      { path: path.join(d.ws, "b.txt"), kind: { type: "delete" }, diff: "alpha\nbeta\n" },
      { path: path.join(d.ws, "new/c.txt"), kind: { type: "add" }, diff: "see\n" },
    ]);
    expect(ctx.completed[0]).toMatchObject({ id: started.id, status: "completed" });
    expect(ctx.diffs[0]).toBe(
      [
        "diff --git a/a.txt b/a.txt",
        "--- a/a.txt",
        "+++ b/a.txt",
        "@@ -1,3 +1,3 @@",
        " one",
        "-two",
        "+TWO",
        " three",
        "diff --git a/b.txt b/b.txt",
        "deleted file mode 100644",
        "--- a/b.txt",
        "+++ /dev/null",
        "@@ -1,2 +0,0 @@",
        "-alpha",
        "-beta",
        "diff --git a/new/c.txt b/new/c.txt",
        "new file mode 100644",
        "--- /dev/null",
        "+++ b/new/c.txt",
        "@@ -0,0 +1 @@",
        "+see",
        "",
      ].join("\n"),
    );
  });

  it("the turn diff aggregates patches against each file's content before the turn", async () => {
    const { ctx, patch } = setup();
    await run(patch, { patch: wrap("*** Update File: a.txt\n@@\n-one\n+ONE") });
    await run(patch, { patch: wrap("*** Update File: a.txt\n@@\n-three\n+THREE") });
    expect(ctx.diffs).toHaveLength(2);
    expect(ctx.diffs[1]).toBe("diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n-one\n+ONE\n two\n-three\n+THREE\n");
    // Reverting the file removes it from the diff.
    await run(patch, { patch: wrap("*** Update File: a.txt\n@@\n-ONE\n+one\n@@\n-THREE\n+three") });
    expect(ctx.diffs[2]).toBe("");
  });

  it("moves a file", async () => {
    const { ctx, patch } = setup();
    const out = await run(patch, { patch: wrap("*** Update File: a.txt\n*** Move to: moved/a.txt\n@@\n-one\n+uno") });
    expect(out.isError).toBe(false);
    expect(existsSync(path.join(d.ws, "a.txt"))).toBe(false);
    expect(read("moved/a.txt")).toBe("uno\ntwo\nthree\n");
    const change = ctx.started[0].type === "fileChange" ? ctx.started[0].changes[0] : null;
    expect(change?.kind).toEqual({ type: "update", move_path: path.join(d.ws, "moved/a.txt") });
  });

  it("a patch that does not apply changes nothing and creates no item", async () => {
    const { ctx, patch } = setup();
    const out = await run(patch, { patch: wrap("*** Update File: a.txt\n@@\n-one\n+ONE\n*** Update File: b.txt\n@@\n-nope\n+NOPE") });
    expect(out.isError).toBe(true);
    expect(textOf(out)).toMatch(/Failed to find expected lines in b.txt:\nnope\nNo files were changed\./);
    expect(read("a.txt")).toBe("one\ntwo\nthree\n");
    expect(read("b.txt")).toBe("alpha\nbeta\n");
    expect(ctx.events).toEqual([]);
  });

  it("a malformed patch is a clear error", async () => {
    const { patch } = setup();
    const out = await run(patch, { patch: "*** Update File: a.txt\n-one" });
    expect(out.isError).toBe(true);
    expect(textOf(out)).toMatch(/Invalid patch: The first line of the patch must be '\*\*\* Begin Patch'/);
    const empty = await run(patch, { patch: "*** Begin Patch\n*** End Patch" });
    expect(textOf(empty)).toMatch(/no file operations/);
  });

  it("a commit failure rolls every file back and fails the item", async () => {
    const ctx = new RecordingContext(d.ws);
    const tool = toolNamed(
      builtinTools(ctx, {
        commitHooks: {
          beforeRename: (i) => {
            if (i === 1) throw new Error("simulated crash");
          },
        },
      }),
      "apply_patch",
    );
    const out = await run(tool, { patch: wrap("*** Update File: a.txt\n@@\n-one\n+ONE\n*** Update File: b.txt\n@@\n-alpha\n+ALPHA") });
    expect(out.isError).toBe(true);
    expect(textOf(out)).toMatch(/simulated crash.*restored/);
    expect(read("a.txt")).toBe("one\ntwo\nthree\n");
    expect(read("b.txt")).toBe("alpha\nbeta\n");
    expect(ctx.completed[0]).toMatchObject({ status: "failed" });
  });

  it("paths are checked: escapes need approval under on-request and are refused under never", async () => {
    symlinkSync(d.outside, path.join(d.ws, "link"));
    const attempts = [
      "*** Add File: ../outside/evil.txt\n+x",
      `*** Add File: ${path.join(d.outside, "evil.txt")}\n+x`,
      "*** Add File: link/evil.txt\n+x",
      "*** Update File: link/secret.txt\n@@\n-secret\n+pwned",
    ];
    for (const body of attempts) {
      const never = setup("workspace-write", "never");
      const out = await run(never.patch, { patch: wrap(body) });
      expect(out.isError, body).toBe(true);
      expect(textOf(out)).toMatch(/Refused to apply the patch: .*"never"/);
      expect(never.ctx.events).toEqual([]);

      const onRequest = setup("workspace-write", "on-request");
      onRequest.ctx.defaultAnswer = "decline";
      const asked = await run(onRequest.patch, { patch: wrap(body) });
      expect(asked.isError).toBe(true);
      expect(onRequest.ctx.approvals).toHaveLength(1);
      expect(onRequest.ctx.approvals[0]).toMatchObject({ kind: "fileChange", params: { reason: expect.stringMatching(/outside|escapes|symbolic link/) } });
      expect(onRequest.ctx.completed[0]).toMatchObject({ status: "declined" });
    }
    expect(existsSync(path.join(d.outside, "evil.txt"))).toBe(false);
    expect(readFileSync(path.join(d.outside, "secret.txt"), "utf8")).toBe("secret\n");
  });

  it("an approved write outside the workspace goes through", async () => {
    const { ctx, patch } = setup("workspace-write", "on-request");
    const out = await run(patch, { patch: wrap(`*** Add File: ${path.join(d.outside, "granted.txt")}\n+ok`) });
    expect(out.isError).toBe(false);
    expect(ctx.approvals).toHaveLength(1);
    expect(readFileSync(path.join(d.outside, "granted.txt"), "utf8")).toBe("ok\n");
  });
});

describe("apply_patch: approvals", () => {
  it("untrusted always asks: item first, then the fileChange request; accept applies", async () => {
    const { ctx, patch } = setup("workspace-write", "untrusted");
    const out = await run(patch, { patch: wrap("*** Update File: a.txt\n@@\n-one\n+ONE") });
    expect(out.isError).toBe(false);
    expect(ctx.events.map((e) => e.type)).toEqual(["started", "approval", "completed", "diff"]);
    const item = ctx.started[0];
    expect(ctx.approvals[0]).toEqual({
      kind: "fileChange",
      params: { itemId: item.id, startedAtMs: item.startedAtMs, reason: expect.stringMatching(/untrusted/), grantRoot: null },
    });
    expect(read("a.txt")).toBe("ONE\ntwo\nthree\n");
  });

  it("acceptForSession: the same files are not asked again; other files are", async () => {
    const { ctx, patch } = setup("workspace-write", "untrusted");
    ctx.answers = ["acceptForSession"];
    await run(patch, { patch: wrap("*** Update File: a.txt\n@@\n-one\n+ONE") });
    expect(ctx.sessionApprovals.has(`file:${path.join(d.ws, "a.txt")}`)).toBe(true);
    await run(patch, { patch: wrap("*** Update File: a.txt\n@@\n-two\n+TWO") });
    expect(ctx.approvals).toHaveLength(1);
    await run(patch, { patch: wrap("*** Update File: a.txt\n@@\n-three\n+THREE\n*** Update File: b.txt\n@@\n-beta\n+BETA") });
    expect(ctx.approvals).toHaveLength(2);
    expect(read("a.txt")).toBe("ONE\nTWO\nTHREE\n");
  });

  it("decline leaves the files alone; the turn goes on", async () => {
    const { ctx, patch } = setup("workspace-write", "untrusted");
    ctx.answers = ["decline"];
    const out = await run(patch, { patch: wrap("*** Update File: a.txt\n@@\n-one\n+ONE") });
    expect(out).toMatchObject({ isError: true });
    expect(out.endTurn).toBeFalsy();
    expect(textOf(out)).toMatch(/declined/);
    expect(read("a.txt")).toBe("one\ntwo\nthree\n");
    expect(ctx.completed[0]).toMatchObject({ status: "declined" });
    expect(ctx.diffs).toEqual([]);
  });

  it("cancel declines the item and ends the turn", async () => {
    const { ctx, patch } = setup("workspace-write", "untrusted");
    ctx.answers = ["cancel"];
    const out = await run(patch, { patch: wrap("*** Update File: a.txt\n@@\n-one\n+ONE") });
    expect(out.endTurn).toBe(true);
    expect(read("a.txt")).toBe("one\ntwo\nthree\n");
    expect(ctx.completed[0]).toMatchObject({ status: "declined" });
  });

  it.each<[AskForApproval, SandboxMode, "run" | "ask" | "refuse"]>([
    ["untrusted", "workspace-write", "ask"],
    ["untrusted", "danger-full-access", "ask"],
    ["on-request", "workspace-write", "run"],
    ["on-request", "read-only", "ask"],
    ["on-failure", "read-only", "ask"],
    ["never", "workspace-write", "run"],
    ["never", "read-only", "refuse"],
    ["never", "danger-full-access", "run"],
  ])("policy %s with sandbox %s → %s (patch inside the workspace)", async (policy, sandbox, expected) => {
    const { ctx, patch } = setup(sandbox, policy);
    ctx.defaultAnswer = "decline";
    const out = await run(patch, { patch: wrap("*** Update File: a.txt\n@@\n-one\n+ONE") });
    const applied = read("a.txt").startsWith("ONE");
    expect(ctx.approvals.length > 0).toBe(expected === "ask");
    expect(applied).toBe(expected === "run");
    if (expected === "refuse") expect(textOf(out)).toMatch(/read-only/);
  });
});

describe("apply_patch: size limits (issue 24)", () => {
  it("refuses a patch over the boundary's limit before parsing it, changing nothing", async () => {
    const runner = new CommandRunner({ boundary: new TrustBoundary({ maxPatchBytes: 1024 }) });
    const ctx = new RecordingContext(d.ws, "workspace-write", "never", undefined, runner);
    const patch = toolNamed(builtinTools(ctx), "apply_patch");
    const big = wrap(`*** Add File: big.txt\n${"+0123456789abcdef\n".repeat(80)}`.trimEnd());
    const out = await run(patch, { patch: big });
    expect(out.isError).toBe(true);
    expect(textOf(out)).toMatch(/^The patch is too large: .* exceeds the limit of .*No files were changed\.$/);
    expect(existsSync(path.join(d.ws, "big.txt"))).toBe(false);
    expect(ctx.events).toEqual([]); // no item: nothing was attempted
    // Under the limit, the same tool applies it.
    expect((await run(patch, { patch: wrap("*** Add File: small.txt\n+ok") })).isError).toBe(false);
    expect(read("small.txt")).toBe("ok\n");
  });

  it("items carry at most MAX_SHOWN_DIFF_CHARS of a file's diff, and none line by line past MAX_DIFFED_CHARS", () => {
    const lines = (n: number, tag: string) => Array.from({ length: n }, (_, i) => `${tag} line ${i}`).join("\n") + "\n";
    const added = fileDiff("big.txt", null, lines(120_000, "new")); // ~1.9 MiB of added lines
    expect(added.length).toBeLessThan(MAX_SHOWN_DIFF_CHARS + 200);
    expect(added).toMatch(/\n\[… \d+ more characters of this diff not shown; the change itself is complete\]\n$/);
    expect(added.split("\n").slice(0, 4)).toEqual(["diff --git a/big.txt b/big.txt", "new file mode 100644", "--- /dev/null", "+++ b/big.txt"]);
    const huge = "x".repeat(MAX_DIFFED_CHARS);
    expect(fileDiff("huge.txt", huge, `${huge}y`)).toBe(
      `diff --git a/huge.txt b/huge.txt\n--- a/huge.txt\n+++ b/huge.txt\n@@ large file: ${huge.length} characters before, ${huge.length + 1} characters after; not shown line by line @@\n`,
    );
  });
});
