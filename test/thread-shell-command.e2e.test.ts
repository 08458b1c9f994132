// @needs-os-sandbox: the user's shell commands run in the thread's OS sandbox.
/**
 * thread/shellCommand (the TUI's `!ls`) over a real WebSocket: a turn of its own whose only item
 * is a `commandExecution` with `source: "userShell"`, streamed and stored like the model's
 * commands, shown by thread/read, and handed to the model's next request. It runs in the
 * thread's cwd and OS sandbox, exactly as the `shell` tool does (Codex runs it unsandboxed; we
 * never run a read-only or workspace-write thread's command outside bubblewrap). Hostile params
 * get clear errors and leave nothing behind.
 */
import { existsSync, readFileSync, rmSync, mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { TestClient } from "./support/client.js";
import { BACKENDS } from "./support/db.js";
import { deferred } from "./support/durability.js";
import { startTurnHarness, text, turnCompleted, type TurnHarness } from "./support/turns.js";
import { afterFirstTextDelta } from "./support/wire.js";
import { makeDirs, type Dirs } from "./tools/helpers.js";
import { shellInvocation } from "../src/tools/shell-invocation.js";

const backend = BACKENDS[BACKENDS.length - 1]!;

describe("thread/shellCommand", () => {
  let h: TurnHarness;
  let client: TestClient;
  let dirs: Dirs;

  beforeEach(async () => {
    h = await startTurnHarness(backend, "openai");
    client = await TestClient.initialized(h.ts.url);
    dirs = makeDirs();
  });
  afterEach(async () => {
    await client?.close();
    await h?.close();
    dirs?.cleanup();
  });

  const startThread = async (sandbox: string, cwd = dirs.ws) => (await client.request("thread/start", { cwd, sandbox, approvalPolicy: "on-request" })).thread.id as string;
  /** Runs `command` and resolves with the turn's completion and the command's completed item. */
  async function shell(threadId: string, command: string, timeoutMs?: number) {
    const from = client.frames.length;
    expect(await client.request("thread/shellCommand", { threadId, command, ...(timeoutMs === undefined ? {} : { timeoutMs }) })).toEqual({});
    const started = await client.waitFor((f) => client.frames.indexOf(f) >= from && f.method === "turn/started" && f.params.threadId === threadId);
    const done = await turnCompleted(client, started.params.turn.id);
    const frames = client.frames.slice(from).filter((f) => f.params?.threadId === threadId && f.params?.turnId === started.params.turn.id);
    const item = frames.find((f) => f.method === "item/completed")!.params.item;
    return { done, item, frames, turnId: started.params.turn.id as string };
  }

  it("runs in the thread's cwd as a turn of its own: commandExecution (userShell) streamed, stored, read back, and told to the model", async () => {
    writeFileSync(path.join(dirs.ws, "hello.txt"), "hi\n");
    const threadId = await startThread("workspace-write");
    const { done, item, frames } = await shell(threadId, "ls; echo made > made.txt; echo to-stderr >&2; pwd");
    expect(done.params.turn.status).toBe("completed");
    expect(frames.map((f) => f.method).filter((m, i, a) => m !== a[i - 1])).toEqual(["item/started", "item/commandExecution/outputDelta", "item/completed"]);
    expect(item).toMatchObject({ type: "commandExecution", source: "userShell", status: "completed", exitCode: 0, cwd: dirs.ws, command: shellInvocation("ls; echo made > made.txt; echo to-stderr >&2; pwd") });
    expect(item.aggregatedOutput).toContain("hello.txt");
    expect(item.aggregatedOutput).toContain("to-stderr");
    expect(item.aggregatedOutput).toContain(dirs.ws);
    expect(readFileSync(path.join(dirs.ws, "made.txt"), "utf8")).toBe("made\n");

    // Persisted like any item: thread/read shows the turn with the command.
    const read = (await client.request("thread/read", { threadId, includeTurns: true })).thread;
    expect(read.turns).toHaveLength(1);
    expect(read.turns[0].items).toEqual([expect.objectContaining({ id: item.id, type: "commandExecution", source: "userShell", aggregatedOutput: item.aggregatedOutput })]);

    // The model's next request carries the command and its output, as a user message.
    h.mock.enqueue({ text: "seen" });
    const { turn } = await client.request("turn/start", { threadId, input: text("what did I run?") });
    await turnCompleted(client, turn.id);
    const body = JSON.stringify(h.mock.requests.at(-1)!.body);
    expect(body).toContain("<user_shell_command>");
    expect(body).toContain("hello.txt");
  });

  it("obeys the thread's sandbox: read-only writes nothing, workspace-write nothing outside the workspace", async () => {
    const ro = await startThread("read-only");
    const denied = await shell(ro, "echo x > ro.txt");
    expect(denied.done.params.turn.status).toBe("completed"); // the turn ran; the command failed
    expect(denied.item).toMatchObject({ source: "userShell", status: "failed" });
    expect(denied.item.exitCode).not.toBe(0);
    expect(denied.item.aggregatedOutput).toMatch(/Read-only file system/);
    expect(existsSync(path.join(dirs.ws, "ro.txt"))).toBe(false);

    const ww = await startThread("workspace-write");
    const outsideFile = path.join(dirs.outside, "escaped.txt");
    const escaped = await shell(ww, `echo x > ${outsideFile}`);
    expect(escaped.item.status).toBe("failed");
    expect(existsSync(outsideFile)).toBe(false);
    // Nothing was asked: the user typed the command.
    expect(client.frames.some((f) => f.method === "item/commandExecution/requestApproval")).toBe(false);
  });

  it("timeoutMs: 0 is an immediate timeout (exit 124); turn/interrupt stops a running command, and one attached to its turn", async () => {
    const threadId = await startThread("workspace-write");
    const timedOut = await shell(threadId, "sleep 5", 0);
    expect(timedOut.item).toMatchObject({ status: "failed", exitCode: 124 });

    expect(await client.request("thread/shellCommand", { threadId, command: "sleep 600" })).toEqual({});
    const started = await client.waitFor((f) => f.method === "item/started" && f.params.item.command === shellInvocation("sleep 600"));
    // A second command while the first runs joins its turn (no turn of its own).
    expect(await client.request("thread/shellCommand", { threadId, command: "sleep 601" })).toEqual({});
    const second = await client.waitFor((f) => f.method === "item/started" && f.params.item.command === shellInvocation("sleep 601"));
    expect(second.params.turnId).toBe(started.params.turnId);
    await client.request("turn/interrupt", { threadId, turnId: started.params.turnId });
    const done = await turnCompleted(client, started.params.turnId);
    expect(done.params.turn.status).toBe("interrupted");
    const ended = client.notifications("item/completed").filter((f) => f.params.turnId === started.params.turnId).map((f) => f.params.item.command);
    expect(ended.sort()).toEqual(["sleep 600", "sleep 601"].map((c) => shellInvocation(c)));
  });

  it("while the model's turn runs, the command runs inside that turn; the turn ends after it, and the model hears of it next", async () => {
    const threadId = await startThread("workspace-write");
    const gate = deferred();
    h.mock.enqueue({ text: ["work", "ing"], gate: { afterEvents: afterFirstTextDelta("openai"), wait: gate.promise } });
    const { turn } = await client.request("turn/start", { threadId, input: text("do something") });
    await client.waitForNotification("item/agentMessage/delta", (p) => p.turnId === turn.id);
    expect(await client.request("thread/shellCommand", { threadId, command: "echo side-$((40+2)); sleep 0.5" })).toEqual({});
    const ran = await client.waitFor((f) => f.method === "item/completed" && f.params.item.type === "commandExecution");
    expect(ran.params).toMatchObject({ turnId: turn.id, item: { source: "userShell", status: "completed", aggregatedOutput: "side-42\n" } });
    gate.open();
    const done = await turnCompleted(client, turn.id);
    expect(done.params.turn.status).toBe("completed");
    // No turn of its own: the thread has the one turn, with the command among its items.
    const read = (await client.request("thread/read", { threadId, includeTurns: true })).thread;
    expect(read.turns).toHaveLength(1);
    expect(read.turns[0].items.map((i: any) => i.type)).toEqual(["userMessage", "agentMessage", "commandExecution"]); // in the order they started
    // The next request carries the turn's answer, then what the user ran (history stays paired).
    h.mock.enqueue({ text: "noted" });
    const next = (await client.request("turn/start", { threadId, input: text("and?") })).turn;
    await turnCompleted(client, next.id);
    const body = JSON.stringify(h.mock.requests.at(-1)!.body);
    expect(body.indexOf("working")).toBeGreaterThan(-1);
    expect(body.indexOf("side-42")).toBeGreaterThan(body.indexOf("working"));
  });

  it("hostile params: unknown thread, empty or huge command, negative timeout, a cwd that is gone — clear errors, nothing recorded", async () => {
    const threadId = await startThread("workspace-write");
    const bad = (params: unknown) => client.request("thread/shellCommand", params);
    await expect(bad({ threadId: "01a00000-0000-7000-8000-000000000000", command: "ls" })).rejects.toMatchObject({ code: -32600, message: expect.stringContaining("thread not found") });
    await expect(bad({ threadId, command: "   " })).rejects.toMatchObject({ code: -32600, message: "command must not be empty" });
    await expect(bad({ threadId, command: "x".repeat(200_000) })).rejects.toMatchObject({ code: -32602 });
    await expect(bad({ threadId, command: "ls", timeoutMs: -1 })).rejects.toMatchObject({ code: -32602 });
    await expect(bad({ threadId })).rejects.toMatchObject({ code: -32602 });

    const gone = path.join(dirs.ws, "gone");
    mkdirSync(gone);
    const inGone = await startThread("workspace-write", gone);
    rmSync(gone, { recursive: true });
    await expect(bad({ threadId: inGone, command: "ls" })).rejects.toMatchObject({ code: -32600, message: expect.stringContaining("not an existing directory") });
    // A turn or a review there is refused the same way, before anything is recorded or leased.
    const gonePath = expect.stringContaining(`${gone} is not an existing directory on this server`);
    await expect(client.request("turn/start", { threadId: inGone, input: text("hi") })).rejects.toMatchObject({ code: -32600, message: gonePath });
    await expect(client.request("review/start", { threadId: inGone, target: { type: "uncommittedChanges" } })).rejects.toMatchObject({ code: -32600, message: gonePath });

    // None of them started a turn; the thread still takes commands.
    for (const id of [threadId, inGone]) expect((await client.request("thread/read", { threadId: id, includeTurns: true })).thread.turns).toEqual([]);
    expect((await shell(threadId, "echo still-fine")).item.aggregatedOutput).toBe("still-fine\n");
  });
});
