// @needs-os-sandbox: runs commands in the OS sandbox (vitest.config.ts leaves this file out where bubblewrap cannot run).
/**
 * The shell tool's approvals as Codex's clients expect them (issue 25): escalation on request,
 * one prompt per command, saved rules that answer later prompts without widening the sandbox, and
 * session approvals keyed on the command, its working directory and its sandbox (issue 24.6).
 * The end-to-end table over a WebSocket is test/approvals-table.e2e.test.ts.
 */
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { AskForApproval, SandboxMode } from "../../src/protocol/common.js";
import { shellTool } from "../../src/tools/shell.js";
import { makeDirs, RecordingContext, run, textOf, type Dirs } from "./helpers.js";

let d: Dirs;
beforeEach(() => {
  d = makeDirs();
});
afterEach(() => d.cleanup());

const setup = (sandbox: SandboxMode, policy: AskForApproval) => {
  const ctx = new RecordingContext(d.ws, sandbox, policy);
  return { ctx, shell: shellTool(ctx, { killGraceMs: 300 }) };
};
/** Appends a line each time it really runs (in the workspace), so a count says how often. */
const mark = (file = "m.txt") => `echo run >> ${file}`;
const runs = (file = "m.txt") => (existsSync(path.join(d.ws, file)) ? readFileSync(path.join(d.ws, file), "utf8").split("\n").filter(Boolean).length : 0);
const escalated = (command: string, extra: Record<string, unknown> = {}) => ({ command, sandbox_permissions: "require_escalated", justification: "Do you want to write m.txt?", ...extra });

describe("escalation on request", () => {
  it("on-request: asks first with the justification as the reason; accepted, runs outside the read-only sandbox", async () => {
    const { ctx, shell } = setup("read-only", "on-request");
    const out = await run(shell, escalated("touch a.txt"));
    expect(out.isError, textOf(out)).toBe(false);
    expect(ctx.approvals).toHaveLength(1);
    expect(ctx.approvals[0]!.params).toMatchObject({ reason: "Do you want to write m.txt?", proposedExecpolicyAmendment: ["touch", "a.txt"] });
    expect(existsSync(path.join(d.ws, "a.txt"))).toBe(true);
    // A redirection keeps a command away from rules: nothing is proposed for it.
    await run(shell, escalated(mark()));
    expect(ctx.approvals[1]!.params).toMatchObject({ proposedExecpolicyAmendment: null });
    expect(runs()).toBe(1);
  });

  it("on-request: a plain command the sandbox denies is reported with how to ask; nothing is asked", async () => {
    const { ctx, shell } = setup("read-only", "on-request");
    const out = await run(shell, { command: mark() });
    expect(ctx.approvals).toHaveLength(0);
    expect(runs()).toBe(0);
    expect(textOf(out)).toMatch(/Read-only file system[\s\S]*sandbox_permissions "require_escalated" and a justification/);
  });

  it("never: an escalation request is refused before anything is recorded or run; a plain one runs in the sandbox", async () => {
    const { ctx, shell } = setup("workspace-write", "never");
    const out = await run(shell, escalated(mark()));
    expect(out.isError).toBe(true);
    expect(textOf(out)).toMatch(/approval policy is "never"/);
    expect(ctx.events).toEqual([]);
    expect(runs()).toBe(0);
    expect((await run(shell, { command: mark() })).isError).toBe(false);
    expect(runs()).toBe(1);
  });

  it("danger-full-access: require_escalated changes nothing (no sandbox to leave); on-request does not ask", async () => {
    const { ctx, shell } = setup("danger-full-access", "on-request");
    expect((await run(shell, escalated(mark()))).isError).toBe(false);
    expect(ctx.approvals).toHaveLength(0);
    expect(runs()).toBe(1);
  });

  it("declined: not run, and the model is told", async () => {
    const { ctx, shell } = setup("read-only", "on-request");
    ctx.answers = ["decline"];
    const out = await run(shell, escalated(mark()));
    expect(textOf(out)).toMatch(/user declined/);
    expect(runs()).toBe(0);
  });
});

describe("one prompt per command", () => {
  it("untrusted: the accepted command that the sandbox denies runs again outside it without a second prompt", async () => {
    const { ctx, shell } = setup("read-only", "untrusted");
    const out = await run(shell, { command: mark() });
    expect(out.isError, textOf(out)).toBe(false);
    expect(ctx.approvals).toHaveLength(1);
    expect(runs()).toBe(1);
    expect(ctx.deltas.join("")).toContain("[running again without the sandbox]");
  });

  it("untrusted: an allow-listed command the sandbox denies is offered one run outside it", async () => {
    // Mode 000: the sandbox holds no capabilities, so reading it there fails with a denial.
    const locked = path.join(d.ws, "locked.txt");
    writeFileSync(locked, "the content\n");
    chmodSync(locked, 0o000);
    const { ctx, shell } = setup("read-only", "untrusted");
    ctx.answers = ["decline", "accept"];
    const declined = await run(shell, { command: "cat locked.txt" });
    expect(ctx.approvals).toHaveLength(1);
    expect(ctx.approvals[0]!.params.reason).toMatch(/failed inside the read-only sandbox; accept to run it again without the sandbox/);
    expect(textOf(declined)).toMatch(/Permission denied[\s\S]*declined to run it again outside the sandbox/);
    const accepted = await run(shell, { command: "cat locked.txt" });
    expect(ctx.approvals).toHaveLength(2);
    // Outside the sandbox only root (no permission checks) can read it.
    if (process.getuid?.() === 0) expect(textOf(accepted)).toContain("the content");
  });

  it("on-failure: a denial asks once; acceptForSession covers the next run of the same command here", async () => {
    const { ctx, shell } = setup("read-only", "on-failure");
    ctx.answers = ["acceptForSession"];
    await run(shell, { command: mark() });
    expect(ctx.approvals).toHaveLength(1);
    await run(shell, { command: mark() });
    expect(ctx.approvals).toHaveLength(1);
    expect(runs()).toBe(2);
  });
});

describe("saved rules", () => {
  it("accepting the proposed rule saves it; a later matching escalation runs outside the sandbox without a prompt", async () => {
    const { ctx, shell } = setup("read-only", "on-request");
    ctx.answers = ["acceptWithExecpolicyAmendment"];
    const first = await run(shell, escalated("touch a.txt"));
    expect(ctx.rules).toEqual([["touch", "a.txt"]]);
    expect(textOf(first)).toMatch(/saved a rule: commands that start with \["touch","a.txt"\]/);
    const second = await run(shell, escalated("touch a.txt b.txt"));
    expect(second.isError, textOf(second)).toBe(false);
    expect(ctx.approvals).toHaveLength(1);
    expect(existsSync(path.join(d.ws, "b.txt"))).toBe(true);
  });

  it("a rule never widens the sandbox by itself: a matching command that did not ask runs sandboxed, and the model is told how to ask", async () => {
    const { ctx, shell } = setup("read-only", "on-request");
    ctx.rules.push(["touch"]);
    const plain = await run(shell, { command: "touch a.txt" });
    expect(existsSync(path.join(d.ws, "a.txt"))).toBe(false);
    expect(textOf(plain)).toMatch(/require_escalated/);
    await run(shell, escalated("touch a.txt"));
    expect(existsSync(path.join(d.ws, "a.txt"))).toBe(true);
    expect(ctx.approvals).toHaveLength(0);
  });

  it("never: a saved rule does not make an escalation possible", async () => {
    const { ctx, shell } = setup("read-only", "never");
    ctx.rules.push(["touch"]);
    expect(textOf(await run(shell, escalated("touch a.txt")))).toMatch(/"never"/);
    expect(existsSync(path.join(d.ws, "a.txt"))).toBe(false);
  });

  it("every part of the command must match: a rule for one part does not approve another after && or |", async () => {
    const { ctx, shell } = setup("read-only", "on-request");
    ctx.rules.push(["touch", "a.txt"]);
    ctx.defaultAnswer = "decline";
    await run(shell, escalated("touch a.txt && touch b.txt"));
    await run(shell, escalated("touch a.txt > b.txt"));
    expect(ctx.approvals).toHaveLength(2);
    expect(ctx.approvals.map((a) => (a.kind === "command" ? a.params.proposedExecpolicyAmendment : undefined))).toEqual([["touch", "b.txt"], null]);
    expect(existsSync(path.join(d.ws, "b.txt"))).toBe(false);
  });

  it("never proposes a prefix that covers a shell, an interpreter's inline code or a wrapper; the model's own prefix_rule is checked the same way", async () => {
    const { ctx, shell } = setup("read-only", "on-request");
    ctx.defaultAnswer = "decline";
    for (const command of ["bash -c 'touch a'", "python3 -c 'print(1)'", "node -e 1", "env FOO=1 touch a", "sudo touch a", "xargs touch", "sh x.sh"])
      await run(shell, escalated(command));
    await run(shell, escalated("touch a", { prefix_rule: ["touch"] }));
    await run(shell, escalated("python3 -c 'print(1)'", { prefix_rule: ["python3", "-c"] }));
    await run(shell, escalated("touch a", { prefix_rule: ["rm"] }));
    const proposals = ctx.approvals.map((a) => (a.kind === "command" ? a.params.proposedExecpolicyAmendment : undefined));
    expect(proposals).toEqual([null, null, null, null, null, null, null, ["touch"], null, ["touch", "a"]]);
  });
});

describe("session approvals are keyed on the command, its working directory and its sandbox", () => {
  it("a different workdir asks again (and is not made writable unasked)", async () => {
    const other = path.join(d.root, "other");
    mkdirSync(other);
    const { ctx, shell } = setup("workspace-write", "on-request");
    ctx.answers = ["acceptForSession", "decline"];
    await run(shell, { command: "touch granted.txt", workdir: d.outside });
    expect(existsSync(path.join(d.outside, "granted.txt"))).toBe(true);
    await run(shell, { command: "touch granted.txt", workdir: d.outside });
    expect(ctx.approvals).toHaveLength(1);
    await run(shell, { command: "touch granted.txt", workdir: other });
    expect(ctx.approvals).toHaveLength(2);
    expect(existsSync(path.join(other, "granted.txt"))).toBe(false);
  });

  it("a different sandbox asks again", async () => {
    const readOnly = setup("read-only", "untrusted");
    readOnly.ctx.answers = ["acceptForSession"];
    await run(readOnly.shell, { command: "touch s.txt" });
    const writable = new RecordingContext(d.ws, "danger-full-access", "untrusted");
    for (const key of readOnly.ctx.sessionApprovals) writable.sessionApprovals.add(key);
    writable.defaultAnswer = "decline";
    await run(shellTool(writable), { command: "touch s.txt" });
    expect(writable.approvals).toHaveLength(1);
  });
});
