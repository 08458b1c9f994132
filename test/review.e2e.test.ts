// @needs-os-sandbox: the reviewer's commands run in the thread's OS sandbox.
/**
 * review/start (the TUI's `/review`) over a real WebSocket: a turn of the thread that opens with
 * `enteredReviewMode` (what is reviewed), lets the model work as in any turn, and closes with
 * `exitedReviewMode` carrying its review; the request the model gets names the target. Hostile
 * params get clear errors and start nothing.
 */
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { TestClient } from "./support/client.js";
import { BACKENDS } from "./support/db.js";
import { startTurnHarness, turnCompleted, type TurnHarness } from "./support/turns.js";
import { makeDirs, type Dirs } from "./tools/helpers.js";
import { shellInvocation } from "../src/tools/shell-invocation.js";

const backend = BACKENDS[BACKENDS.length - 1]!;

describe("review/start", () => {
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

  const startThread = async () => (await client.request("thread/start", { cwd: dirs.ws, sandbox: "workspace-write", approvalPolicy: "on-request" })).thread.id as string;
  const items = (turnId: string, method: string) => client.notifications(method).filter((f) => f.params.turnId === turnId).map((f) => f.params.item);

  it("reviews uncommitted changes: enteredReviewMode → the model's work → exitedReviewMode with its answer, recorded", async () => {
    const git = (...args: string[]) => execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@t", ...args], { cwd: dirs.ws });
    git("init", "-q");
    writeFileSync(path.join(dirs.ws, "a.ts"), "export const x = 1;\n");
    git("add", "a.ts");
    git("commit", "-qm", "init");
    writeFileSync(path.join(dirs.ws, "a.ts"), "export const x = 1 / 0;\n");
    const threadId = await startThread();
    const review = "[P1] a.ts:1 divides by zero: x is Infinity.\nVerdict: not correct as it stands.";
    h.mock.enqueue({ toolCalls: [{ name: "shell", arguments: { command: "git diff HEAD" } }] }, { text: review });

    const res = await client.request("review/start", { threadId, target: { type: "uncommittedChanges" }, delivery: "inline" });
    expect(res).toEqual({ turn: expect.objectContaining({ status: "inProgress" }), reviewThreadId: threadId });
    const done = await turnCompleted(client, res.turn.id);
    expect(done.params.turn.status).toBe("completed");

    const completed = items(res.turn.id, "item/completed");
    expect(completed.map((i) => i.type)).toEqual(["enteredReviewMode", "commandExecution", "agentMessage", "exitedReviewMode"]);
    expect(completed[0]).toMatchObject({ review: "current changes" });
    expect(completed[1].aggregatedOutput).toContain("1 / 0");
    expect(completed[3]).toMatchObject({ review });
    // The model was asked to review the uncommitted changes, with the rubric.
    const asked = JSON.stringify(h.mock.requests[0]!.body);
    expect(asked).toContain("uncommitted changes");
    expect(asked).toContain("[P0]");
    // Stored like any turn: thread/read shows the same items.
    const read = (await client.request("thread/read", { threadId, includeTurns: true })).thread;
    expect(read.turns[0].items.map((i: any) => i.type)).toEqual(["enteredReviewMode", "commandExecution", "agentMessage", "exitedReviewMode"]);
    expect(read.turns[0].items[3].review).toBe(review);
  });

  it("names each target as Codex does, and tells the model what to look at", async () => {
    const threadId = await startThread();
    const cases: Array<[object, string, string]> = [
      [{ type: "baseBranch", branch: "main" }, "changes against 'main'", "git merge-base HEAD main"],
      [{ type: "commit", sha: "0123456789abcdef", title: "Fix the parser" }, "commit 0123456: Fix the parser", "git show 0123456789abcdef"],
      [{ type: "commit", sha: "fedcba9876543210", title: null }, "commit fedcba9", "git show fedcba9876543210"],
      [{ type: "custom", instructions: "Check the error handling only." }, "Check the error handling only.", "Check the error handling only."],
    ];
    for (const [target, hint, asked] of cases) {
      h.mock.enqueue({ text: "Nothing worth reporting." });
      const { turn } = await client.request("review/start", { threadId, target });
      await turnCompleted(client, turn.id);
      expect(items(turn.id, "item/completed").map((i) => [i.type, i.review ?? i.text])).toEqual([
        ["enteredReviewMode", hint],
        ["agentMessage", "Nothing worth reporting."],
        ["exitedReviewMode", "Nothing worth reporting."],
      ]);
      expect(JSON.stringify(h.mock.requests.at(-1)!.body)).toContain(asked);
    }
  });

  it("a model failure still ends review mode, saying why", async () => {
    const threadId = await startThread();
    h.mock.enqueue({ kind: "error", status: 400, message: "bad request" });
    const { turn } = await client.request("review/start", { threadId, target: { type: "uncommittedChanges" } });
    const done = await turnCompleted(client, turn.id);
    expect(done.params.turn.status).toBe("failed");
    const exited = items(turn.id, "item/completed").find((i) => i.type === "exitedReviewMode");
    expect(exited.review).toMatch(/^The review failed: /);
  });

  it("hostile params: unknown thread, unknown delivery or target, empty fields, a running turn — clear errors, nothing started", async () => {
    const threadId = await startThread();
    const bad = (params: unknown) => client.request("review/start", params);
    await expect(bad({ threadId: "01a00000-0000-7000-8000-000000000000", target: { type: "uncommittedChanges" } })).rejects.toMatchObject({ code: -32600, message: expect.stringContaining("thread not found") });
    await expect(bad({ threadId, target: { type: "uncommittedChanges" }, delivery: "detached" })).rejects.toMatchObject({ code: -32602 });
    await expect(bad({ threadId, target: { type: "everything" } })).rejects.toMatchObject({ code: -32602 });
    await expect(bad({ threadId, target: { type: "baseBranch", branch: "  " } })).rejects.toMatchObject({ code: -32602 });
    await expect(bad({ threadId, target: { type: "custom", instructions: "x".repeat(100_000) } })).rejects.toMatchObject({ code: -32602 });
    await expect(bad({ threadId })).rejects.toMatchObject({ code: -32602 });
    expect((await client.request("thread/read", { threadId, includeTurns: true })).thread.turns).toEqual([]);

    // While a turn runs, a review is refused like a second turn/start.
    expect(await client.request("thread/shellCommand", { threadId, command: "sleep 600" })).toEqual({});
    const running = await client.waitFor((f) => f.method === "item/started" && f.params.item.command === shellInvocation("sleep 600"));
    await expect(bad({ threadId, target: { type: "uncommittedChanges" } })).rejects.toMatchObject({ code: -32600, message: expect.stringContaining("already running") });
    await client.request("turn/interrupt", { threadId, turnId: running.params.turnId });
    await turnCompleted(client, running.params.turnId);
  });
});
