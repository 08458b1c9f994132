// @needs-os-sandbox: runs commands in the OS sandbox (vitest.config.ts leaves this file out where bubblewrap cannot run).
/**
 * Approvals and the clients around them, over real WebSockets (one provider: the semantics do not
 * depend on it): two subscribed clients racing to answer, a client that disconnects while a request
 * is out (the request waits and is sent again to the next client that resumes the thread), an
 * interrupt while waiting, and the optional approval timeout. Outcomes only — no timing asserts.
 */
import { existsSync } from "node:fs";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { BACKENDS } from "./support/db.js";
import { TestClient } from "./support/client.js";
import { eventually } from "./support/cluster.js";
import { startTurnHarness, text, turnCompleted, type TurnHarness } from "./support/turns.js";
import { expectSeqIncreasing, itemsCompleted, itemsStarted, serverRequests, wireSequence } from "./support/wire.js";
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
} from "./support/approvals.js";
import { shellInvocation } from "../src/tools/shell-invocation.js";

const backend = BACKENDS[BACKENDS.length - 1]!;
const provider = "openai" as const;
const WAITING = { type: "active", activeFlags: ["waitingOnApproval"] };

describe("approvals with several clients, interrupts and timeouts", () => {
  let h: TurnHarness;
  let ws: string;
  let cleanup: () => void;
  const clients: TestClient[] = [];

  const connect = async () => {
    const c = await TestClient.initialized(h.ts.url);
    clients.push(c);
    return c;
  };
  const start = async (turns: object = {}) => {
    h = await startTurnHarness(backend, provider, { turns });
    const a = await connect();
    const threadId = (await a.request("thread/start", { cwd: ws, approvalPolicy: "untrusted", sandbox: "workspace-write" })).thread.id as string;
    return { a, threadId };
  };

  beforeEach(() => {
    const w = makeWorkspace();
    ws = w.dir;
    cleanup = w.cleanup;
  });
  afterEach(async () => {
    for (const c of clients.splice(0)) await c.close();
    await h?.close();
    cleanup();
  });

  it("two subscribed clients both get the request; racing answers: the command runs once, both get serverRequest/resolved", async () => {
    const { a, threadId } = await start();
    const b = await connect();
    await b.request("thread/resume", { threadId });
    h.mock.enqueue({ toolCalls: [{ name: "shell", arguments: { command: MARK_COMMAND } }] }, { text: "done" });
    const { turn } = await a.request("turn/start", { threadId, input: text("mark it") });

    const [ra, rb] = await Promise.all([nthServerRequest(a, COMMAND_APPROVAL), nthServerRequest(b, COMMAND_APPROVAL)]);
    // The same question to both, each under the id its own connection uses.
    expect(rb.params).toEqual(ra.params);
    expect(ra.params.turnId).toBe(turn.id);

    // Both answer at once (no waiting in between): whichever arrives first wins.
    a.respond(ra.id, { decision: "accept" });
    b.respond(rb.id, { decision: "accept" });
    const done = (await turnCompleted(a, turn.id)).params.turn;
    expect(done.status).toBe("completed");
    await turnCompleted(b, turn.id);

    expect(markerCount(ws)).toBe(1);
    expect(itemsCompleted(a, "commandExecution").map((i) => [i.status, i.aggregatedOutput])).toEqual([["completed", "ran-1\n"]]);
    for (const [c, r] of [
      [a, ra],
      [b, rb],
    ] as const) {
      expect(c.notifications("serverRequest/resolved").map((f) => f.params)).toEqual([{ threadId, requestId: r.id, seq: expect.any(Number) }]);
      expect(serverRequests(c, COMMAND_APPROVAL)).toHaveLength(1);
    }
    expect(wireSequence(b, threadId)).toEqual(wireSequence(a, threadId).filter((l) => l !== "thread/started"));
    expect(h.mock.requests).toHaveLength(2);
  });

  it("the first answer wins: a later, different answer from the other client changes nothing", async () => {
    const { a, threadId } = await start();
    const b = await connect();
    await b.request("thread/resume", { threadId });
    h.mock.enqueue({ toolCalls: [{ name: "apply_patch", arguments: { patch: addFilePatch("won.txt", ["yes"]) } }] }, { text: "done" });
    const { turn } = await a.request("turn/start", { threadId, input: text("patch") });

    const [ra, rb] = await Promise.all([nthServerRequest(a, FILE_APPROVAL), nthServerRequest(b, FILE_APPROVAL)]);
    b.respond(rb.id, { decision: "accept" });
    await a.waitForNotification("serverRequest/resolved", (p) => p.requestId === ra.id);
    a.respond(ra.id, { decision: "decline" }); // too late: already resolved
    expect((await turnCompleted(a, turn.id)).params.turn.status).toBe("completed");
    expect(existsSync(path.join(ws, "won.txt"))).toBe(true);
    expect(itemsCompleted(a, "fileChange").map((i) => i.status)).toEqual(["completed"]);
    expect(b.notifications("serverRequest/resolved").map((f) => f.params.requestId)).toEqual([rb.id]);
  });

  it("a client that disconnects leaves the request pending; the next client that resumes gets it again and its answer counts", async () => {
    const { a, threadId } = await start();
    h.mock.enqueue({ toolCalls: [{ name: "shell", arguments: { command: MARK_COMMAND } }] }, { text: "done after reconnect" });
    const { turn } = await a.request("turn/start", { threadId, input: text("mark it") });
    const first = await nthServerRequest(a, COMMAND_APPROVAL);
    await a.close();

    // Still waiting: nothing ran, the turn runs on, the thread says why.
    const b = await connect();
    const read = await b.request("thread/read", { threadId, includeTurns: true });
    expect(read.thread.status).toEqual(WAITING);
    expect(read.thread.turns.at(-1)).toMatchObject({ id: turn.id, status: "inProgress" });
    expect(read.thread.turns.at(-1).items.at(-1)).toMatchObject({ type: "commandExecution", id: first.params.itemId, status: "inProgress" });
    expect(markerCount(ws)).toBe(0);
    expect(h.mock.requests).toHaveLength(1);

    const resumed = await b.request("thread/resume", { threadId });
    expect(resumed.thread.status).toEqual(WAITING);
    const again = await nthServerRequest(b, COMMAND_APPROVAL);
    expect(again.params).toEqual(first.params); // same item, same question
    expect(again.params.itemId).toBe(first.params.itemId);
    // Its own request, sent after the resume response.
    const responseAt = b.frames.findIndex((f) => f.result?.thread?.id === threadId);
    expect(b.frames.indexOf(again)).toBeGreaterThan(responseAt);

    b.respond(again.id, { decision: "accept" });
    const done = (await turnCompleted(b, turn.id)).params.turn;
    expect(done.status).toBe("completed");
    expect(markerCount(ws)).toBe(1);
    expect(b.notifications("serverRequest/resolved").map((f) => f.params)).toEqual([{ threadId, requestId: again.id, seq: expect.any(Number) }]);
    const [item] = itemsCompleted(b, "commandExecution");
    expect(item).toMatchObject({ id: first.params.itemId, status: "completed", exitCode: 0 });
    expect(itemsCompleted(b, "agentMessage").map((i) => i.text)).toEqual(["done after reconnect"]);
    expect(serverRequests(b, COMMAND_APPROVAL)).toHaveLength(1);
    expectSeqIncreasing(b, threadId);
  });

  it("a request made while no client is connected waits for the next client that resumes the thread", async () => {
    const { a, threadId } = await start();
    let open!: () => void;
    const wait = new Promise<void>((resolve) => (open = resolve));
    h.mock.enqueue({ toolCalls: [{ name: "shell", arguments: { command: MARK_COMMAND } }], gate: { afterEvents: 1, wait } }, { text: "done" });
    const { turn } = await a.request("turn/start", { threadId, input: text("mark it") });
    await h.mock.waitForRequests(1);
    await a.close();
    open();

    // Nobody is subscribed; an observer that only reads sees the thread wait.
    const b = await connect();
    await eventually(
      async () => (await b.request("thread/read", { threadId })).thread.status.activeFlags?.includes("waitingOnApproval"),
      1000,
      20,
      "thread/read to show the thread waiting on approval",
    );
    expect(serverRequests(b, COMMAND_APPROVAL)).toHaveLength(0);
    await b.request("thread/resume", { threadId });
    const request = await nthServerRequest(b, COMMAND_APPROVAL);
    expect(request.params).toMatchObject({ threadId, turnId: turn.id, command: shellInvocation(MARK_COMMAND) });
    b.respond(request.id, { decision: "accept" });
    expect((await turnCompleted(b, turn.id)).params.turn.status).toBe("completed");
    expect(markerCount(ws)).toBe(1);
    expect(serverRequests(a, COMMAND_APPROVAL)).toHaveLength(0);
  });

  it("a client that resumes with afterSeq gets the replayed item/started and then the pending request", async () => {
    const { a, threadId } = await start();
    h.mock.enqueue({ toolCalls: [{ name: "apply_patch", arguments: { patch: addFilePatch("late.txt", ["late"]) } }] }, { text: "ok" });
    const { turn } = await a.request("turn/start", { threadId, input: text("patch") });
    const first = await nthServerRequest(a, FILE_APPROVAL);
    await a.close();

    const b = await connect();
    await b.request("thread/resume", { threadId, afterSeq: 0 });
    const again = await nthServerRequest(b, FILE_APPROVAL);
    expect(again.params).toEqual(first.params);
    const [started] = itemsStarted(b, "fileChange");
    expect(started.id).toBe(again.params.itemId);
    const seq = wireSequence(b, threadId);
    // The replay ends with the waiting status; the request comes after it.
    expect(seq.slice(seq.indexOf("item/started:fileChange"))).toEqual(["item/started:fileChange", "thread/status/changed", `request:${FILE_APPROVAL}`]);

    b.respond(again.id, { decision: "accept" });
    expect((await turnCompleted(b, turn.id)).params.turn.status).toBe("completed");
    expect(existsSync(path.join(ws, "late.txt"))).toBe(true);
  });

  it("turn/interrupt while waiting ends the wait (serverRequest/resolved) and the turn; the command never runs", async () => {
    const { a, threadId } = await start();
    const b = await connect();
    await b.request("thread/resume", { threadId });
    h.mock.enqueue({ toolCalls: [{ name: "shell", arguments: { command: MARK_COMMAND } }] }, { text: "never sent" });
    const { turn } = await a.request("turn/start", { threadId, input: text("mark it") });
    const [ra, rb] = await Promise.all([nthServerRequest(a, COMMAND_APPROVAL), nthServerRequest(b, COMMAND_APPROVAL)]);

    expect(await a.request("turn/interrupt", { threadId, turnId: turn.id })).toEqual({});
    const done = (await turnCompleted(a, turn.id)).params.turn;
    expect(done).toMatchObject({ status: "interrupted", stopReason: "interrupted" });
    await turnCompleted(b, turn.id);
    for (const [c, r] of [
      [a, ra],
      [b, rb],
    ] as const) {
      expect(c.notifications("serverRequest/resolved").map((f) => f.params)).toEqual([{ threadId, requestId: r.id, seq: expect.any(Number) }]);
    }
    // An answer after the interrupt is ignored.
    a.respond(ra.id, { decision: "accept" });
    expect(await a.request("thread/read", { threadId })).toMatchObject({ thread: { status: { type: "idle" } } });

    expect(markerCount(ws)).toBe(0);
    expect(h.mock.requests).toHaveLength(1);
    const [item] = itemsCompleted(a, "commandExecution");
    expect(item).toMatchObject({ id: ra.params.itemId, status: "declined", exitCode: null });
    const seq = wireSequence(a, threadId);
    expect(seq.slice(seq.indexOf(`request:${COMMAND_APPROVAL}`))).toEqual([
      `request:${COMMAND_APPROVAL}`,
      "serverRequest/resolved",
      "item/completed:commandExecution",
      "thread/status/changed",
      "turn/completed",
    ]);
    expect(statusesOf(a, threadId).at(-1)).toEqual({ type: "idle" });

    // The thread is usable again, and the model learns the call did not run.
    h.mock.reset();
    h.mock.enqueue({ text: "ok" });
    const { turn: next } = await a.request("turn/start", { threadId, input: text("next") });
    expect((await turnCompleted(a, next.id)).params.turn.status).toBe("completed");
    expect(lastToolResult(h.mock, provider, 0)).toMatch(/cancel|interrupt/i);
    expect(markerCount(ws)).toBe(0);
  });

  it("turn/interrupt while a patch waits: nothing is written", async () => {
    const { a, threadId } = await start();
    h.mock.enqueue({ toolCalls: [{ name: "apply_patch", arguments: { patch: addFilePatch("never.txt", ["no"]) } }] }, { text: "never sent" });
    const { turn } = await a.request("turn/start", { threadId, input: text("patch") });
    const r = await nthServerRequest(a, FILE_APPROVAL);
    await a.request("turn/interrupt", { threadId, turnId: turn.id });
    expect((await turnCompleted(a, turn.id)).params.turn.status).toBe("interrupted");
    expect(a.notifications("serverRequest/resolved").map((f) => f.params.requestId)).toEqual([r.id]);
    expect(existsSync(path.join(ws, "never.txt"))).toBe(false);
    expect(itemsCompleted(a, "fileChange").map((i) => i.status)).toEqual(["declined"]);
  });

  it("with approvalTimeoutMs an unanswered request is declined and the turn goes on", async () => {
    const { a, threadId } = await start({ approvalTimeoutMs: 200 });
    h.mock.enqueue(
      { toolCalls: [{ name: "shell", arguments: { command: MARK_COMMAND } }] },
      { toolCalls: [{ name: "apply_patch", arguments: { patch: addFilePatch("t.txt", ["t"]) } }] },
      { text: "nobody answered" },
    );
    const { turn } = await a.request("turn/start", { threadId, input: text("mark it") });
    const done = (await turnCompleted(a, turn.id)).params.turn;
    expect(done).toMatchObject({ status: "completed", stopReason: "finalAnswer" });

    const requests = [...serverRequests(a, COMMAND_APPROVAL), ...serverRequests(a, FILE_APPROVAL)];
    expect(requests).toHaveLength(2);
    expect(a.notifications("serverRequest/resolved").map((f) => f.params.requestId).sort()).toEqual(requests.map((r) => r.id).sort());
    expect(markerCount(ws)).toBe(0);
    expect(existsSync(path.join(ws, "t.txt"))).toBe(false);
    expect(itemsCompleted(a, "commandExecution").map((i) => i.status)).toEqual(["declined"]);
    expect(itemsCompleted(a, "fileChange").map((i) => i.status)).toEqual(["declined"]);
    expect(lastToolResult(h.mock, provider, 1)).toMatch(/declined/);
    expect(lastToolResult(h.mock, provider, 2)).toMatch(/declined/);
    expect(itemsCompleted(a, "agentMessage").map((i) => i.text)).toEqual(["nobody answered"]);
    expect(statusesOf(a, threadId)).toEqual([
      { type: "active", activeFlags: [] },
      WAITING,
      { type: "active", activeFlags: [] },
      WAITING,
      { type: "active", activeFlags: [] },
      { type: "idle" },
    ]);
  });
});
