// @needs-os-sandbox: runs commands in the OS sandbox (vitest.config.ts leaves this file out where bubblewrap cannot run).
/** The shell tool: items, output, exit codes, timeouts, interrupts, approvals and the policy matrix. */
import { mkdirSync, promises as fsPromises, symlinkSync, writeFileSync, existsSync } from "node:fs";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { AskForApproval, SandboxMode } from "../../src/protocol/common.js";
import { shellTool, type ShellOptions } from "../../src/tools/shell.js";
import { shellInvocation } from "../../src/tools/shell-invocation.js";
import { makeDirs, processesRunning, RecordingContext, run, runningPids, textOf, waitGone, type Dirs } from "./helpers.js";

let d: Dirs;
beforeEach(() => {
  d = makeDirs();
  writeFileSync(path.join(d.ws, "hello.txt"), "hello world\n");
  mkdirSync(path.join(d.ws, "sub"));
});
afterEach(() => d.cleanup());

const FAST: Partial<ShellOptions> = { killGraceMs: 300 };
const setup = (sandbox: SandboxMode = "workspace-write", policy: AskForApproval = "on-request", opts: Partial<ShellOptions> = FAST) => {
  const ctx = new RecordingContext(d.ws, sandbox, policy);
  return { ctx, shell: shellTool(ctx, opts) };
};

describe("shell: running commands", () => {
  it("runs with bash -lc in the workspace and records a commandExecution item", async () => {
    const { ctx, shell } = setup();
    const out = await run(shell, { command: "cat hello.txt && pwd" });
    expect(out.isError).toBe(false);
    expect(textOf(out)).toMatch(/^Exit code: 0\nWall time: [\d.]+ seconds\nOutput:\nhello world\n/);
    expect(textOf(out)).toContain(d.ws);

    expect(ctx.started).toHaveLength(1);
    const started = ctx.started[0];
    expect(started).toMatchObject({
      type: "commandExecution",
      // As Codex reports it: the shell invocation that ran (the TUI shows the script).
      command: "/bin/bash -lc 'cat hello.txt && pwd'",
      cwd: d.ws,
      source: "agent",
      status: "inProgress",
      processId: null,
      aggregatedOutput: null,
      exitCode: null,
      durationMs: null,
      pluginId: null,
      scriptPath: null,
    });
    const done = ctx.completed[0];
    expect(done).toMatchObject({ id: started.id, status: "completed", exitCode: 0, aggregatedOutput: `hello world\n${d.ws}\n` });
    expect(done.type === "commandExecution" && Number(done.processId)).toBeGreaterThan(0);
    // The item's duration is the one the model is told, and lies within the item's own span.
    const durationMs = done.type === "commandExecution" ? done.durationMs : null;
    expect(durationMs).toEqual(expect.any(Number));
    expect(textOf(out)).toContain(`Wall time: ${(durationMs! / 1000).toFixed(1)} seconds`);
    expect(durationMs).toBeGreaterThanOrEqual(0);
    expect(durationMs).toBeLessThanOrEqual(done.completedAtMs! - done.startedAtMs!);
    expect(ctx.deltas.join("")).toBe(`hello world\n${d.ws}\n`);
    expect(ctx.events.every((e) => e.type !== "delta" || e.itemId === started.id)).toBe(true);
  });

  it("durationMs is the command's run: one that sleeps 0.3 s takes at least 300 ms", async () => {
    const { ctx, shell } = setup();
    const out = await run(shell, { command: "sleep 0.3" });
    expect(out.isError).toBe(false);
    const [done] = ctx.completed;
    const durationMs = done.type === "commandExecution" ? done.durationMs : null;
    expect(durationMs).toBeGreaterThanOrEqual(300);
    expect(durationMs).toBeLessThanOrEqual(done.completedAtMs! - done.startedAtMs!);
    expect(textOf(out)).toContain(`Wall time: ${(durationMs! / 1000).toFixed(1)} seconds`);
  });

  it("parses command actions best-effort", async () => {
    const { ctx, shell } = setup();
    await run(shell, { command: "cat hello.txt" });
    await run(shell, { command: "ls sub" });
    await run(shell, { command: "grep -n hello . | head -5" });
    await run(shell, { command: "echo hi > out.txt" });
    expect(ctx.started.map((i) => i.type === "commandExecution" && i.commandActions)).toEqual([
      [{ type: "read", command: "cat hello.txt", name: "hello.txt", path: path.join(d.ws, "hello.txt") }],
      [{ type: "listFiles", command: "ls sub", path: "sub" }],
      [{ type: "search", command: "grep -n hello .", query: "hello", path: "." }],
      [{ type: "unknown", command: "echo hi > out.txt" }],
    ]);
  });

  it("runs in workdir", async () => {
    const { ctx, shell } = setup();
    const out = await run(shell, { command: "pwd", workdir: "sub" });
    expect(textOf(out)).toContain(path.join(d.ws, "sub"));
    expect(ctx.started[0]).toMatchObject({ cwd: path.join(d.ws, "sub") });
  });

  it("a non-zero exit is a failed item and an error result", async () => {
    const { ctx, shell } = setup();
    const out = await run(shell, { command: "echo oops >&2; exit 7" });
    expect(out.isError).toBe(true);
    expect(textOf(out)).toMatch(/^Exit code: 7\n/);
    expect(textOf(out)).toContain("oops");
    expect(ctx.completed[0]).toMatchObject({ status: "failed", exitCode: 7 });
  });

  it("a missing command exits 127: failed item and a clear result", async () => {
    const { ctx, shell } = setup();
    const out = await run(shell, { command: "no-such-command-xyz --flag" });
    expect(out.isError).toBe(true);
    expect(textOf(out)).toMatch(/Exit code: 127 \(command not found\)/);
    expect(textOf(out)).toMatch(/no-such-command-xyz: command not found/);
    expect(ctx.completed[0]).toMatchObject({ status: "failed", exitCode: 127 });
  });

  it("timeout kills the whole process tree (exit 124)", async () => {
    const { ctx, shell } = setup();
    const out = await run(shell, { command: "sleep 7001 & sleep 7002 & echo started; wait", timeout_ms: 3_000 });
    expect(out.isError).toBe(true);
    expect(textOf(out)).toMatch(/timed out after 3000 ms/);
    expect(textOf(out)).toContain("started");
    const item = ctx.completed[0];
    expect(item).toMatchObject({ status: "failed", exitCode: 124 });
    expect(runningPids([Number(item.type === "commandExecution" && item.processId)])).toEqual([]);
    expect([...processesRunning("sleep 7001"), ...processesRunning("sleep 7002")]).toEqual([]);
  });

  it("an interrupt (abort signal) kills the whole process tree", async () => {
    const { ctx, shell } = setup();
    const controller = new AbortController();
    const pending = run(shell, { command: "sleep 7003 & sleep 7004 & echo started; wait" }, controller.signal);
    const deadline = Date.now() + 20_000;
    const both = () => [...processesRunning("sleep 7003"), ...processesRunning("sleep 7004")];
    while ((!ctx.deltas.join("").includes("started") || both().length < 2) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(both()).toHaveLength(2);
    controller.abort();
    const out = await pending;
    expect(out.isError).toBe(true);
    expect(textOf(out)).toMatch(/interrupted/);
    expect(await waitGone(both)).toEqual([]);
    expect(ctx.completed[0]).toMatchObject({ status: "failed" });
  });

  it("caps timeout_ms at the maximum", async () => {
    const { shell } = setup("workspace-write", "on-request", { ...FAST, maxTimeoutMs: 1_000 });
    const out = await run(shell, { command: "echo hi", timeout_ms: 999_999 });
    expect(textOf(out)).toMatch(/timeout_ms 999999 was capped at 1000/);
  });

  it("gives the model head + tail of long output; the item keeps up to the cap with a note", async () => {
    const { ctx, shell } = setup("workspace-write", "on-request", { ...FAST, outputCapBytes: 64 * 1024, modelOutputBytes: 2_000 });
    const out = await run(shell, { command: "echo FIRST; seq 1 100000; echo LAST" });
    const text = textOf(out);
    expect(Buffer.byteLength(text)).toBeLessThan(3_000);
    expect(text).toMatch(/Output \(\d+ bytes in total; the middle was omitted\):\nFIRST\n1\n/);
    expect(text).toMatch(/\[… \d+ bytes omitted …\]/);
    expect(text.trimEnd().endsWith("100000\nLAST")).toBe(true);
    const item = ctx.completed[0];
    const agg = item.type === "commandExecution" ? item.aggregatedOutput! : "";
    expect(Buffer.byteLength(agg)).toBeLessThan(64 * 1024 + 100);
    expect(agg).toMatch(/\[… \d+ bytes omitted …\]/);
    // Live deltas stop after the cap too.
    expect(ctx.deltas.join("").length).toBeLessThan(64 * 1024 + 70_000);
  });

  it("binary output reaches the model and the item as safe text", async () => {
    const { ctx, shell } = setup();
    const out = await run(shell, { command: "printf 'A\\000B\\377C'" });
    expect(textOf(out)).toContain("AB\uFFFDC");
    expect(ctx.completed[0]).toMatchObject({ aggregatedOutput: "AB\uFFFDC" });
  });

  it("refuses a missing workdir or one that escapes, without running anything", async () => {
    const { ctx, shell } = setup("workspace-write", "never");
    const missing = await run(shell, { command: "pwd", workdir: "nope" });
    expect(missing.isError).toBe(true);
    expect(textOf(missing)).toMatch(/does not exist/);
    symlinkSync(d.outside, path.join(d.ws, "out-link"));
    const escape = await run(shell, { command: "touch pwned", workdir: "out-link" });
    expect(escape.isError).toBe(true);
    expect(textOf(escape)).toMatch(/Refused to run this command: the working directory is not allowed: .*symbolic link/);
    expect(existsSync(path.join(d.outside, "pwned"))).toBe(false);
    expect(ctx.completed.at(-1)).toMatchObject({ status: "declined" });
  });

  it("a workdir that exists but cannot be looked at says why, not that it does not exist", async () => {
    const { shell } = setup("workspace-write", "never");
    mkdirSync(path.join(d.ws, "locked"));
    // Tests run as root, whom permissions do not stop: the EACCES a user would get is injected.
    const stat = fsPromises.stat;
    vi.spyOn(fsPromises, "stat").mockImplementation(((p: string, ...rest: []) =>
      String(p).endsWith("/locked") ? Promise.reject(Object.assign(new Error(`EACCES: permission denied, stat '${p}'`), { code: "EACCES" })) : stat(p, ...rest)) as typeof stat);
    const out = await run(shell, { command: "pwd", workdir: "locked" }).finally(() => vi.restoreAllMocks());
    expect(out.isError).toBe(true);
    expect(textOf(out)).toMatch(/^Cannot run the command: the working directory .*locked cannot be used \(EACCES\)\.$/);
  });
});

describe("shell: approvals", () => {
  it("starts the item first, then asks with the Codex params; accept runs the command", async () => {
    const { ctx, shell } = setup("workspace-write", "untrusted");
    const out = await run(shell, { command: "touch made.txt" });
    expect(out.isError).toBe(false);
    expect(existsSync(path.join(d.ws, "made.txt"))).toBe(true);
    expect(ctx.events.map((e) => e.type)).toEqual(["started", "approval", "completed"]);
    const item = ctx.started[0];
    expect(ctx.approvals[0]).toEqual({
      kind: "command",
      params: {
        kind: "command",
        itemId: item.id,
        startedAtMs: item.startedAtMs,
        environmentId: null,
        reason: expect.stringMatching(/untrusted/),
        command: shellInvocation("touch made.txt"),
        cwd: d.ws,
        commandActions: [{ type: "unknown", command: "touch made.txt" }],
        proposedExecpolicyAmendment: ["touch", "made.txt"],
      },
    });
  });

  it("acceptForSession: the identical command is not asked again, a different one is", async () => {
    const { ctx, shell } = setup("workspace-write", "untrusted");
    ctx.answers = ["acceptForSession"];
    await run(shell, { command: "touch a.txt" });
    await run(shell, { command: "touch a.txt" });
    expect(ctx.approvals).toHaveLength(1);
    await run(shell, { command: "touch b.txt" });
    expect(ctx.approvals).toHaveLength(2);
  });

  it("decline: the item is declined, the model is told, the turn goes on", async () => {
    const { ctx, shell } = setup("workspace-write", "untrusted");
    ctx.answers = ["decline"];
    const out = await run(shell, { command: "touch nope.txt" });
    expect(out.isError).toBe(true);
    expect(out.endTurn).toBeFalsy();
    expect(textOf(out)).toMatch(/user declined/);
    expect(existsSync(path.join(d.ws, "nope.txt"))).toBe(false);
    expect(ctx.completed[0]).toMatchObject({ status: "declined", exitCode: null });
  });

  it("cancel: the item is declined and the turn ends", async () => {
    const { ctx, shell } = setup("workspace-write", "untrusted");
    ctx.answers = ["cancel"];
    const out = await run(shell, { command: "touch nope.txt" });
    expect(out.endTurn).toBe(true);
    expect(out.isError).toBe(true);
    expect(existsSync(path.join(d.ws, "nope.txt"))).toBe(false);
    expect(ctx.completed[0]).toMatchObject({ status: "declined" });
  });
});

describe("shell: policy matrix", () => {
  const cases: Array<[AskForApproval, SandboxMode, string, "run" | "ask" | "refuse" | "denied" | "retry"]> = [
    // untrusted: ask unless on the read-only allow list
    ["untrusted", "workspace-write", "ls -la", "run"],
    ["untrusted", "workspace-write", "cat hello.txt | grep hello", "run"],
    ["untrusted", "workspace-write", "git status", "run"],
    ["untrusted", "workspace-write", "find . -name '*.txt'", "run"],
    ["untrusted", "workspace-write", "find . -delete", "ask"],
    ["untrusted", "workspace-write", "ls; rm -rf x", "ask"],
    ["untrusted", "workspace-write", "cat hello.txt > copy.txt", "ask"],
    ["untrusted", "workspace-write", "echo $(whoami)", "ask"],
    ["untrusted", "workspace-write", "echo `whoami`", "ask"],
    ["untrusted", "workspace-write", "ls && touch x", "ask"],
    ["untrusted", "danger-full-access", "touch x", "ask"],
    // on-request: ask only for what the checks object to; the OS sandbox stops the rest
    ["on-request", "read-only", "cat hello.txt", "run"],
    ["on-request", "read-only", "touch x", "denied"],
    ["on-request", "workspace-write", "touch x", "run"],
    ["on-request", "danger-full-access", "touch x", "run"],
    // on-failure (and untrusted): after a sandbox denial, ask before running it unconfined
    ["on-failure", "read-only", "touch x", "retry"],
    ["on-failure", "workspace-write", "touch x", "run"],
    // never: never ask; the sandbox stops what it forbids
    ["never", "read-only", "touch x", "denied"],
    ["never", "read-only", "ls", "run"],
    ["never", "workspace-write", "touch x", "run"],
    [{ granular: { sandbox_approval: true, rules: false, skill_approval: false, request_permissions: false, mcp_elicitations: false } }, "read-only", "touch x", "denied"],
    [{ granular: { sandbox_approval: false, rules: false, skill_approval: false, request_permissions: false, mcp_elicitations: false } }, "read-only", "touch x", "denied"],
  ];

  it.each(cases)("%j / %s: %s → %s", async (policy, sandbox, command, expected) => {
    const { ctx, shell } = setup(sandbox, policy);
    ctx.defaultAnswer = "decline";
    const out = await run(shell, { command });
    const asked = ctx.approvals.length > 0;
    const first = ctx.completed[0];
    const ran = first?.type === "commandExecution" && first.status !== "declined";
    if (expected === "run") {
      expect(asked).toBe(false);
      expect(ran).toBe(true);
    } else if (expected === "denied") {
      expect(asked).toBe(false);
      expect(first).toMatchObject({ status: "failed" });
      expect(textOf(out)).toMatch(/Read-only file system/);
      expect(existsSync(path.join(d.ws, "x"))).toBe(false);
    } else if (expected === "retry") {
      expect(ctx.approvals).toHaveLength(1);
      expect(ctx.approvals[0].params.reason).toMatch(/failed inside the read-only sandbox.*without the sandbox/);
      expect(first).toMatchObject({ status: "failed" });
      expect(existsSync(path.join(d.ws, "x"))).toBe(false);
    } else if (expected === "ask") {
      expect(asked).toBe(true);
      expect(ran).toBe(false);
    } else {
      expect(asked).toBe(false);
      expect(ran).toBe(false);
      expect(out.isError).toBe(true);
      expect(textOf(out)).toMatch(/Refused to run this command: .*"never"/);
    }
  });

  it("on-request in a read-only sandbox asks for a workdir outside the workspace", async () => {
    const { ctx, shell } = setup("read-only", "on-request");
    ctx.defaultAnswer = "decline";
    await run(shell, { command: "ls", workdir: d.outside });
    expect(ctx.approvals).toHaveLength(1);
    expect(ctx.approvals[0].params.reason).toMatch(/outside the workspace roots/);
  });
});

describe("shell: invalid arguments", () => {
  it.each([
    ["not JSON", "{command: ls", /not valid JSON/],
    ["not an object", "[1,2]", /expected a JSON object/],
    ["missing command", "{}", /command: missing \(required\)/],
    ["wrong type", JSON.stringify({ command: 42 }), /command: expected string, received number/],
    ["bad timeout", JSON.stringify({ command: "ls", timeout_ms: "soon" }), /timeout_ms: expected number/],
  ])("%s → an error result, no item", async (_name, raw, message) => {
    const { ctx, shell } = setup();
    const out = await run(shell, raw);
    expect(out.isError).toBe(true);
    expect(textOf(out)).toMatch(/^Invalid arguments for shell: /);
    expect(textOf(out)).toMatch(message);
    expect(ctx.events).toEqual([]);
  });

  it("treats null optional fields as absent", async () => {
    const { shell } = setup();
    const out = await run(shell, JSON.stringify({ command: "echo ok", workdir: null, timeout_ms: null }));
    expect(out.isError).toBe(false);
  });
});
