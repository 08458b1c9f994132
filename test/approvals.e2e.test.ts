// @needs-os-sandbox: runs commands in the OS sandbox (vitest.config.ts leaves this file out where bubblewrap cannot run).
/**
 * Approvals over a real WebSocket under `approvalPolicy: "untrusted"`: the exact wire order of a
 * command approval and a file-change approval (item/started → waitingOnApproval → the server
 * request → serverRequest/resolved → item/completed → the turn goes on), on each provider for the
 * accept flow, then every decision (accept, acceptForSession, decline, cancel, an error reply, an
 * unknown decision) on one provider: what runs, what the model is told, how the turn ends.
 */
import { readFileSync, existsSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { BACKENDS } from "./support/db.js";
import { TestClient } from "./support/client.js";
import { PROVIDERS, startTurnHarness, text, turnCompleted, type ProviderName, type TurnHarness } from "./support/turns.js";
import { expectSeqIncreasing, itemsCompleted, itemsStarted, mockCallId, serverRequests, toolResultsIn, wireSequence } from "./support/wire.js";
import {
  addFilePatch,
  COMMAND_APPROVAL,
  FILE_APPROVAL,
  lastToolResult,
  makeWorkspace,
  MARK_COMMAND,
  markerCount,
  nthServerRequest,
  statusesOf,
  updateFilePatch,
} from "./support/approvals.js";
import { shellInvocation } from "../src/tools/shell-invocation.js";

const backend = BACKENDS[BACKENDS.length - 1]!; // Postgres when available (faster per test), else PGlite

const WAITING = { type: "active", activeFlags: ["waitingOnApproval"] };
const ACTIVE = { type: "active", activeFlags: [] };

/** One approval round trip on the wire, from the tool's item/started to its item/completed. */
function approvalRoundTrip(kind: "commandExecution" | "fileChange", ran = false): string[] {
  return [
    `item/started:${kind}`,
    "thread/status/changed",
    `request:${kind === "commandExecution" ? COMMAND_APPROVAL : FILE_APPROVAL}`,
    "serverRequest/resolved",
    "thread/status/changed",
    // An accepted command streams its output before it completes.
    ...(kind === "commandExecution" && ran ? ["item/commandExecution/outputDelta"] : []),
    `item/completed:${kind}`,
  ];
}

function setup(provider: ProviderName) {
  const ctx = {} as { h: TurnHarness; client: TestClient; ws: string; threadId: string; cleanup: () => void };
  beforeEach(async () => {
    const w = makeWorkspace();
    ctx.ws = w.dir;
    ctx.cleanup = w.cleanup;
    ctx.h = await startTurnHarness(backend, provider);
    ctx.client = await TestClient.initialized(ctx.h.ts.url);
    ctx.threadId = (await ctx.client.request("thread/start", { cwd: ctx.ws, approvalPolicy: "untrusted", sandbox: "workspace-write" })).thread.id;
  });
  afterEach(async () => {
    await ctx.client?.close();
    await ctx.h?.close();
    ctx.cleanup?.();
  });
  return ctx;
}

describe.each(PROVIDERS)("approval accept flow with %s", (provider) => {
  const ctx = setup(provider);

  it("asks before a command, shows waitingOnApproval, runs it once accepted and goes on", async () => {
    const { h, client, ws, threadId } = ctx;
    h.mock.enqueue({ toolCalls: [{ name: "shell", arguments: { command: MARK_COMMAND } }] }, { text: "done" });
    const { turn } = await client.request("turn/start", { threadId, input: text("mark it") });

    const request = await nthServerRequest(client, COMMAND_APPROVAL);
    // While the request is out: nothing ran, the thread says why it waits, the turn is running.
    expect(markerCount(ws)).toBe(0);
    const read = await client.request("thread/read", { threadId });
    expect(read.thread.status).toEqual(WAITING);
    const [started] = itemsStarted(client, "commandExecution");
    expect(started).toMatchObject({ command: shellInvocation(MARK_COMMAND), cwd: ws, status: "inProgress", aggregatedOutput: null, exitCode: null });
    expect(request.params).toEqual({
      kind: "command",
      threadId,
      turnId: turn.id,
      itemId: started.id,
      startedAtMs: started.startedAtMs,
      environmentId: null,
      reason: expect.stringMatching(/untrusted/),
      command: shellInvocation(MARK_COMMAND),
      cwd: ws,
      commandActions: started.commandActions,
      // A redirection keeps a command away from saved rules: none is proposed.
      proposedExecpolicyAmendment: null,
      availableDecisions: ["accept", "acceptForSession", "decline", "cancel"],
    });
    expect(typeof request.params.startedAtMs).toBe("number");

    client.respond(request.id, { decision: "accept" });
    const done = (await turnCompleted(client, turn.id)).params.turn;
    expect(done).toMatchObject({ status: "completed", stopReason: "finalAnswer", error: null });

    expect(wireSequence(client, threadId)).toEqual([
      "thread/started",
      "thread/status/changed",
      "turn/started",
      "item/started:userMessage",
      "item/completed:userMessage",
      "thread/tokenUsage/updated",
      ...approvalRoundTrip("commandExecution", true),
      "item/started:agentMessage",
      "item/agentMessage/delta",
      "item/completed:agentMessage",
      "thread/tokenUsage/updated",
      "thread/status/changed",
      "turn/completed",
    ]);
    expectSeqIncreasing(client, threadId);
    expect(statusesOf(client, threadId)).toEqual([ACTIVE, WAITING, ACTIVE, { type: "idle" }]);
    const resolved = client.notifications("serverRequest/resolved").map((f) => f.params);
    expect(resolved).toEqual([{ threadId, requestId: request.id, seq: expect.any(Number) }]);

    expect(markerCount(ws)).toBe(1);
    const [completed] = itemsCompleted(client, "commandExecution");
    expect(completed).toMatchObject({ id: started.id, status: "completed", exitCode: 0 });
    expect(completed.aggregatedOutput).toContain("ran-1");
    const deltas = client.notifications("item/commandExecution/outputDelta").map((f) => f.params);
    expect(deltas.every((p) => p.itemId === started.id && p.threadId === threadId && p.turnId === turn.id)).toBe(true);
    expect(deltas.map((p) => p.delta).join("")).toBe(completed.aggregatedOutput);

    // The model got the command's output, paired with its call.
    const results = toolResultsIn(provider, h.mock.requests[1]!.body);
    expect(results).toEqual([expect.objectContaining({ callId: mockCallId(provider, 1) })]);
    expect(results[0]!.text).toContain("ran-1");
    expect(results[0]!.text).toMatch(/Exit code: 0/);
  });

  it("asks before a patch, writes the file once accepted and goes on", async () => {
    const { h, client, ws, threadId } = ctx;
    h.mock.enqueue({ toolCalls: [{ name: "apply_patch", arguments: { patch: addFilePatch("hello.txt", ["hello", "world"]) } }] }, { text: "done" });
    const { turn } = await client.request("turn/start", { threadId, input: text("write it") });

    const request = await nthServerRequest(client, FILE_APPROVAL);
    expect(existsSync(path.join(ws, "hello.txt"))).toBe(false);
    expect((await client.request("thread/read", { threadId })).thread.status).toEqual(WAITING);
    const [started] = itemsStarted(client, "fileChange");
    expect(started).toMatchObject({ status: "inProgress", changes: [expect.objectContaining({ kind: expect.anything() })] });
    expect(request.params).toEqual({
      threadId,
      turnId: turn.id,
      itemId: started.id,
      startedAtMs: started.startedAtMs,
      reason: expect.stringMatching(/untrusted/),
      grantRoot: null,
    });

    client.respond(request.id, { decision: "accept" });
    const done = (await turnCompleted(client, turn.id)).params.turn;
    expect(done).toMatchObject({ status: "completed", stopReason: "finalAnswer" });

    const seq = wireSequence(client, threadId);
    const at = seq.indexOf("item/started:fileChange");
    expect(seq.slice(at, at + 6)).toEqual(approvalRoundTrip("fileChange"));
    // The applied patch announces the turn's diff right after its item completes.
    expect(seq[at + 6]).toBe("turn/diff/updated");
    expect(seq.slice(-2)).toEqual(["thread/status/changed", "turn/completed"]);
    expectSeqIncreasing(client, threadId);
    expect(client.notifications("serverRequest/resolved").map((f) => f.params)).toEqual([{ threadId, requestId: request.id, seq: expect.any(Number) }]);

    expect(readFileSync(path.join(ws, "hello.txt"), "utf8")).toBe("hello\nworld\n");
    const [completed] = itemsCompleted(client, "fileChange");
    expect(completed).toMatchObject({ id: started.id, status: "completed" });
    expect(lastToolResult(h.mock, provider, 1)).toMatch(/^Success/);
  });
});

describe("approval decisions (openai)", () => {
  const provider = "openai" as const;
  const ctx = setup(provider);

  /** Answers every approval request of `method` with `answer(n)` and records the params. */
  const answerAll = (method: string, answer: (n: number) => unknown) => {
    const seen: any[] = [];
    ctx.client.onServerRequest(method, (params) => {
      seen.push(params);
      const a = answer(seen.length - 1);
      if (a instanceof Error) throw a;
      return a;
    });
    return seen;
  };
  const runTurn = async (input: string) => {
    const { turn } = await ctx.client.request("turn/start", { threadId: ctx.threadId, input: text(input) });
    return (await turnCompleted(ctx.client, turn.id)).params.turn;
  };

  describe("commands", () => {
    it("acceptForSession: the same command is not asked again in this thread; another one is", async () => {
      const { h, client, ws } = ctx;
      const asked = answerAll(COMMAND_APPROVAL, () => ({ decision: "acceptForSession" }));
      h.mock.enqueue(
        { toolCalls: [{ name: "shell", arguments: { command: MARK_COMMAND } }] },
        { toolCalls: [{ name: "shell", arguments: { command: MARK_COMMAND } }] },
        { text: "twice" },
      );
      expect(await runTurn("mark twice")).toMatchObject({ status: "completed" });
      expect(asked).toHaveLength(1);
      expect(markerCount(ws)).toBe(2);
      expect(itemsCompleted(client, "commandExecution").map((i) => [i.status, i.exitCode])).toEqual([
        ["completed", 0],
        ["completed", 0],
      ]);

      // Still remembered in the next turn of the same thread; a different command is asked.
      h.mock.enqueue(
        { toolCalls: [{ name: "shell", arguments: { command: MARK_COMMAND } }] },
        { toolCalls: [{ name: "shell", arguments: { command: "touch other.txt" } }] },
        { text: "more" },
      );
      expect(await runTurn("again")).toMatchObject({ status: "completed" });
      expect(asked.map((p) => p.command)).toEqual([MARK_COMMAND, "touch other.txt"].map((c) => shellInvocation(c)));
      expect(markerCount(ws)).toBe(3);
      expect(existsSync(path.join(ws, "other.txt"))).toBe(true);
      expect(serverRequests(client, COMMAND_APPROVAL)).toHaveLength(2);
    });

    it("accept is for this call only: the same command is asked again", async () => {
      const { h, ws } = ctx;
      const asked = answerAll(COMMAND_APPROVAL, () => ({ decision: "accept" }));
      h.mock.enqueue(
        { toolCalls: [{ name: "shell", arguments: { command: MARK_COMMAND } }] },
        { toolCalls: [{ name: "shell", arguments: { command: MARK_COMMAND } }] },
        { text: "twice" },
      );
      expect(await runTurn("mark twice")).toMatchObject({ status: "completed" });
      expect(asked).toHaveLength(2);
      expect(markerCount(ws)).toBe(2);
    });

    it("decline: the command does not run, the model is told so, the turn completes", async () => {
      const { h, client, ws, threadId } = ctx;
      answerAll(COMMAND_APPROVAL, () => ({ decision: "decline" }));
      h.mock.enqueue({ toolCalls: [{ name: "shell", arguments: { command: MARK_COMMAND } }] }, { text: "ok, not running it" });
      const turn = await runTurn("mark it");
      expect(turn).toMatchObject({ status: "completed", stopReason: "finalAnswer" });
      expect(markerCount(ws)).toBe(0);
      const seq = wireSequence(client, threadId);
      const at = seq.indexOf("item/started:commandExecution");
      expect(seq.slice(at, at + 6)).toEqual(approvalRoundTrip("commandExecution"));
      const [item] = itemsCompleted(client, "commandExecution");
      expect(item).toMatchObject({ status: "declined", exitCode: null, aggregatedOutput: null });
      expect(lastToolResult(h.mock, provider, 1)).toMatch(/user declined/);
      expect(itemsCompleted(client, "agentMessage").map((i) => i.text)).toEqual(["ok, not running it"]);
    });

    it("cancel: the command does not run and the turn ends interrupted", async () => {
      const { h, client, ws, threadId } = ctx;
      answerAll(COMMAND_APPROVAL, () => ({ decision: "cancel" }));
      h.mock.enqueue({ toolCalls: [{ name: "shell", arguments: { command: MARK_COMMAND } }] }, { text: "never asked for" });
      const turn = await runTurn("mark it");
      expect(turn).toMatchObject({ status: "interrupted", stopReason: "interrupted" });
      expect(markerCount(ws)).toBe(0);
      expect(h.mock.requests).toHaveLength(1); // the model is not called again in this turn
      const [item] = itemsCompleted(client, "commandExecution");
      expect(item).toMatchObject({ status: "declined" });
      const seq = wireSequence(client, threadId);
      const at = seq.indexOf("item/started:commandExecution");
      expect(seq.slice(at)).toEqual([...approvalRoundTrip("commandExecution"), "thread/status/changed", "turn/completed"]);
      expect(statusesOf(client, threadId).at(-1)).toEqual({ type: "idle" });

      // The next turn tells the model the call was cancelled.
      h.mock.reset();
      h.mock.enqueue({ text: "fine" });
      await runTurn("never mind");
      expect(lastToolResult(h.mock, provider, 0)).toMatch(/cancelled/);
    });

    it("cancel on the first of two calls in one message: neither runs, the second is not asked", async () => {
      const { h, client, ws } = ctx;
      const asked = answerAll(COMMAND_APPROVAL, () => ({ decision: "cancel" }));
      h.mock.enqueue(
        {
          toolCalls: [
            { name: "shell", arguments: { command: MARK_COMMAND } },
            { name: "shell", arguments: { command: "touch second.txt" } },
          ],
        },
        { text: "never asked for" },
      );
      expect(await runTurn("two")).toMatchObject({ status: "interrupted" });
      expect(asked).toHaveLength(1);
      expect(markerCount(ws)).toBe(0);
      expect(existsSync(path.join(ws, "second.txt"))).toBe(false);
      expect(itemsStarted(client, "commandExecution").map((i) => i.command)).toEqual([shellInvocation(MARK_COMMAND)]);

      // Both calls get a result in the history: the next request pairs each with its call.
      h.mock.reset();
      h.mock.enqueue({ text: "fine" });
      await runTurn("next");
      const results = toolResultsIn(provider, h.mock.requests[0]!.body);
      expect(results.map((r) => r.callId)).toEqual([mockCallId(provider, 1, 0), mockCallId(provider, 1, 1)]);
      expect(results[0]!.text).toMatch(/cancelled/);
      expect(results[1]!.text).toMatch(/not executed|interrupt/i);
    });

    it("a JSON-RPC error reply counts as decline", async () => {
      const { h, client, ws } = ctx;
      answerAll(COMMAND_APPROVAL, () => new Error("the approval UI crashed"));
      h.mock.enqueue({ toolCalls: [{ name: "shell", arguments: { command: MARK_COMMAND } }] }, { text: "declined then" });
      expect(await runTurn("mark it")).toMatchObject({ status: "completed" });
      expect(markerCount(ws)).toBe(0);
      expect(itemsCompleted(client, "commandExecution")[0]).toMatchObject({ status: "declined" });
      expect(lastToolResult(h.mock, provider, 1)).toMatch(/user declined/);
      expect(client.notifications("serverRequest/resolved")).toHaveLength(1);
    });

    it("an unknown decision (or no decision) counts as decline", async () => {
      const { h, client, ws } = ctx;
      const replies = [{ decision: "yes please" }, { approved: true }];
      answerAll(COMMAND_APPROVAL, (n) => replies[n]);
      h.mock.enqueue(
        { toolCalls: [{ name: "shell", arguments: { command: MARK_COMMAND } }] },
        { toolCalls: [{ name: "shell", arguments: { command: MARK_COMMAND } }] },
        { text: "declined twice" },
      );
      expect(await runTurn("mark it")).toMatchObject({ status: "completed" });
      expect(markerCount(ws)).toBe(0);
      expect(itemsCompleted(client, "commandExecution").map((i) => i.status)).toEqual(["declined", "declined"]);
      expect(lastToolResult(h.mock, provider, 1)).toMatch(/user declined/);
      expect(lastToolResult(h.mock, provider, 2)).toMatch(/user declined/);
    });

    it("a command on the read-only allow list runs without asking", async () => {
      const { h, client, ws } = ctx;
      writeFileSync(path.join(ws, "notes.txt"), "a note\n");
      h.mock.enqueue({ toolCalls: [{ name: "shell", arguments: { command: "cat notes.txt" } }] }, { text: "read" });
      expect(await runTurn("read it")).toMatchObject({ status: "completed" });
      expect(serverRequests(client, COMMAND_APPROVAL)).toHaveLength(0);
      expect(itemsCompleted(client, "commandExecution")[0]).toMatchObject({ status: "completed", aggregatedOutput: "a note\n" });
    });
  });

  describe("patches", () => {
    it("acceptForSession: a second patch on the same file is not asked again; another file is", async () => {
      const { h, client, ws } = ctx;
      const asked = answerAll(FILE_APPROVAL, () => ({ decision: "acceptForSession" }));
      h.mock.enqueue(
        { toolCalls: [{ name: "apply_patch", arguments: { patch: addFilePatch("a.txt", ["one"]) } }] },
        { toolCalls: [{ name: "apply_patch", arguments: { patch: updateFilePatch("a.txt", "one", "two") } }] },
        { toolCalls: [{ name: "apply_patch", arguments: { patch: addFilePatch("b.txt", ["bee"]) } }] },
        { text: "patched" },
      );
      expect(await runTurn("patch")).toMatchObject({ status: "completed" });
      expect(asked).toHaveLength(2);
      expect(readFileSync(path.join(ws, "a.txt"), "utf8")).toBe("two\n");
      expect(readFileSync(path.join(ws, "b.txt"), "utf8")).toBe("bee\n");
      expect(itemsCompleted(client, "fileChange").map((i) => i.status)).toEqual(["completed", "completed", "completed"]);
      const startedIds = itemsStarted(client, "fileChange").map((i) => i.id);
      expect(asked.map((p) => p.itemId)).toEqual([startedIds[0], startedIds[2]]);
    });

    it("decline: the file is unchanged, the model is told so, the turn completes", async () => {
      const { h, client, ws, threadId } = ctx;
      writeFileSync(path.join(ws, "a.txt"), "one\n");
      answerAll(FILE_APPROVAL, () => ({ decision: "decline" }));
      h.mock.enqueue({ toolCalls: [{ name: "apply_patch", arguments: { patch: updateFilePatch("a.txt", "one", "two") } }] }, { text: "left alone" });
      expect(await runTurn("patch")).toMatchObject({ status: "completed", stopReason: "finalAnswer" });
      expect(readFileSync(path.join(ws, "a.txt"), "utf8")).toBe("one\n");
      const seq = wireSequence(client, threadId);
      const at = seq.indexOf("item/started:fileChange");
      expect(seq.slice(at, at + 6)).toEqual(approvalRoundTrip("fileChange"));
      expect(seq).not.toContain("turn/diff/updated");
      expect(itemsCompleted(client, "fileChange")[0]).toMatchObject({ status: "declined" });
      expect(lastToolResult(h.mock, provider, 1)).toMatch(/user declined/);
    });

    it("accept after the file changed while waiting: nothing is overwritten, the item fails, the model is told", async () => {
      const { h, client, ws } = ctx;
      writeFileSync(path.join(ws, "a.txt"), "one\n");
      h.mock.enqueue({ toolCalls: [{ name: "apply_patch", arguments: { patch: updateFilePatch("a.txt", "one", "two") } }] }, { text: "ok" });
      const { turn } = await client.request("turn/start", { threadId: ctx.threadId, input: text("patch") });
      const request = await nthServerRequest(client, FILE_APPROVAL);
      writeFileSync(path.join(ws, "a.txt"), "edited by the user\n");
      client.respond(request.id, { decision: "accept" });
      expect((await turnCompleted(client, turn.id)).params.turn.status).toBe("completed");
      expect(readFileSync(path.join(ws, "a.txt"), "utf8")).toBe("edited by the user\n");
      expect(itemsCompleted(client, "fileChange").map((i) => i.status)).toEqual(["failed"]);
      expect(lastToolResult(h.mock, provider, 1)).toMatch(/changed after the patch was checked/);
    });

    it("cancel: nothing is written and the turn ends interrupted", async () => {
      const { h, client, ws } = ctx;
      answerAll(FILE_APPROVAL, () => ({ decision: "cancel" }));
      h.mock.enqueue({ toolCalls: [{ name: "apply_patch", arguments: { patch: addFilePatch("new.txt", ["x"]) } }] }, { text: "never asked for" });
      expect(await runTurn("patch")).toMatchObject({ status: "interrupted", stopReason: "interrupted" });
      expect(existsSync(path.join(ws, "new.txt"))).toBe(false);
      expect(h.mock.requests).toHaveLength(1);
      expect(itemsCompleted(client, "fileChange")[0]).toMatchObject({ status: "declined" });
    });

    it("a JSON-RPC error reply and an unknown decision count as decline", async () => {
      const { h, client, ws } = ctx;
      answerAll(FILE_APPROVAL, (n) => (n === 0 ? new Error("no UI") : { decision: "maybe" }));
      h.mock.enqueue(
        { toolCalls: [{ name: "apply_patch", arguments: { patch: addFilePatch("new.txt", ["x"]) } }] },
        { toolCalls: [{ name: "apply_patch", arguments: { patch: addFilePatch("new.txt", ["x"]) } }] },
        { text: "declined twice" },
      );
      expect(await runTurn("patch")).toMatchObject({ status: "completed" });
      expect(existsSync(path.join(ws, "new.txt"))).toBe(false);
      expect(itemsCompleted(client, "fileChange").map((i) => i.status)).toEqual(["declined", "declined"]);
      expect(lastToolResult(h.mock, provider, 1)).toMatch(/user declined/);
      expect(lastToolResult(h.mock, provider, 2)).toMatch(/user declined/);
    });
  });
});
