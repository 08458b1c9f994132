/**
 * Controlling a running turn over the wire, on each of the three providers: turn/interrupt (while
 * the model hangs, mid-stream, while a client tool call is out), turn/steer, and the turn/start
 * rules (one turn per thread, validation, clientUserMessageId idempotency). Mid-stream pauses use
 * the mock's `gate`, never sleeps.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { BACKENDS } from "./support/db.js";
import { RpcError, TestClient } from "./support/client.js";
import { methodSequence, PROVIDERS, startTurnHarness, text, turnCompleted, type TurnHarness } from "./support/turns.js";
import {
  afterFirstTextDelta,
  expectSeqIncreasing,
  itemsCompleted,
  itemsStarted,
  LOOKUP_TOOL,
  mockCallId,
  serverRequests,
  toolResultsIn,
  userTextsIn,
  wireSequence,
  OPENING,
} from "./support/wire.js";

const backend = BACKENDS[BACKENDS.length - 1]!; // Postgres when available (faster per test), else PGlite


/** A promise the test opens by hand: the mock holds its stream at a gate until then. */
function gate(): { wait: Promise<void>; open: () => void } {
  let open!: () => void;
  const wait = new Promise<void>((resolve) => (open = resolve));
  return { wait, open };
}

async function rpcError(p: Promise<unknown>): Promise<RpcError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof RpcError) return err;
    throw err;
  }
  throw new Error("expected a JSON-RPC error");
}

describe.each(PROVIDERS)("turn control with %s", (provider) => {
  let h: TurnHarness;
  let client: TestClient;
  let threadId: string;
  const gates: Array<() => void> = [];
  beforeEach(async () => {
    h = await startTurnHarness(backend, provider);
    client = await TestClient.initialized(h.ts.url);
    threadId = (await client.request("thread/start", { dynamicTools: [LOOKUP_TOOL] })).thread.id;
  });
  afterEach(async () => {
    for (const open of gates.splice(0)) open();
    await client?.close();
    await h?.close();
  });

  const newGate = () => {
    const g = gate();
    gates.push(g.open);
    return g;
  };
  const startTurn = async (input: string, extra: object = {}) => (await client.request("turn/start", { threadId, input: text(input), ...extra })).turn;
  const firstDelta = () => client.waitForNotification("item/agentMessage/delta", (p) => p.threadId === threadId);

  describe("turn/interrupt", () => {
    it("while the model hangs: the turn ends interrupted; a repeated interrupt returns {} at once", async () => {
      h.mock.enqueue({ kind: "hang" });
      const turn = await startTurn("hi");
      await h.mock.waitForRequests(1);
      // Two interrupts back to back: both answered, neither hangs.
      const [a, b] = await Promise.all([
        client.request("turn/interrupt", { threadId, turnId: turn.id }),
        client.request("turn/interrupt", { threadId, turnId: turn.id }),
      ]);
      expect(a).toEqual({});
      expect(b).toEqual({});
      const done = (await turnCompleted(client, turn.id)).params.turn;
      expect(done).toMatchObject({ id: turn.id, status: "interrupted", stopReason: "interrupted", error: null });
      expect(methodSequence(client, threadId)).toEqual([...OPENING, "thread/status/changed", "turn/completed"]);
      expect(client.notifications("error")).toEqual([]);
      expect(client.notifications("thread/status/changed").at(-1)!.params.status).toEqual({ type: "idle" });
      // After the end, interrupting the same turn is still not an error.
      expect(await client.request("turn/interrupt", { threadId, turnId: turn.id })).toEqual({});
      expect(client.notifications("turn/completed")).toHaveLength(1);
      expect(h.mock.requests).toHaveLength(1);

      // The thread takes a new turn normally.
      h.mock.enqueue({ text: "back" });
      const next = await startTurn("again");
      expect((await turnCompleted(client, next.id)).params.turn.status).toBe("completed");
    });

    it("mid-stream: the partial agent message completes with what arrived", async () => {
      const g = newGate();
      h.mock.enqueue({ text: ["Hel", "lo"], gate: { afterEvents: afterFirstTextDelta(provider), wait: g.wait } });
      const turn = await startTurn("hi");
      await firstDelta();
      expect(await client.request("turn/interrupt", { threadId, turnId: turn.id })).toEqual({});
      const done = (await turnCompleted(client, turn.id)).params.turn;
      expect(done).toMatchObject({ status: "interrupted", stopReason: "interrupted", error: null });
      expect(methodSequence(client, threadId)).toEqual([
        ...OPENING,
        "item/started:agentMessage",
        "item/agentMessage/delta",
        "item/completed:agentMessage",
        "thread/status/changed",
        "turn/completed",
      ]);
      expect(itemsCompleted(client, "agentMessage").map((i) => i.text)).toEqual(["Hel"]);
      expect(client.notifications("error")).toEqual([]);
      expectSeqIncreasing(client, threadId);
      const read = await client.request("thread/read", { threadId, includeTurns: true });
      expect(read.thread.turns[0]).toMatchObject({ status: "interrupted", stopReason: "interrupted" });
      expect(read.thread.turns[0].items.map((i: any) => i.text ?? i.type)).toEqual(["userMessage", "Hel"]);
    });

    it("a turn id that is unknown, or belongs to another thread, is -32600", async () => {
      const unknown = await rpcError(client.request("turn/interrupt", { threadId, turnId: "01900000-0000-7000-8000-000000000000" }));
      expect(unknown.code).toBe(-32600);
      // A real, finished turn of another thread is stale here.
      const other = (await client.request("thread/start", {})).thread.id;
      const { turn } = await client.request("turn/start", { threadId: other, input: text("elsewhere") });
      await turnCompleted(client, turn.id);
      const stale = await rpcError(client.request("turn/interrupt", { threadId, turnId: turn.id }));
      expect(stale.code).toBe(-32600);
      const noThread = await rpcError(client.request("turn/interrupt", { threadId: "no-such-thread", turnId: turn.id }));
      expect(noThread.code).toBe(-32600);
      expect(methodSequence(client, threadId)).toEqual(["thread/started"]);
    });

    it("while the client's item/tool/call answer is pending: interrupted, and the request is resolved", async () => {
      // No handler: the test never answers the tool call.
      h.mock.enqueue({ toolCalls: [{ name: "lookup", arguments: { key: "k" } }] });
      const turn = await startTurn("look it up");
      const request = await client.waitFor((f) => f.method === "item/tool/call" && f.id !== undefined);
      expect(request.params).toMatchObject({ threadId, turnId: turn.id, callId: mockCallId(provider, 1), tool: "lookup" });
      expect(await client.request("turn/interrupt", { threadId, turnId: turn.id })).toEqual({});
      const done = (await turnCompleted(client, turn.id)).params.turn;
      expect(done).toMatchObject({ status: "interrupted", stopReason: "interrupted" });
      expect(wireSequence(client, threadId)).toEqual([
        ...OPENING,
        "thread/tokenUsage/updated",
        "item/started:dynamicToolCall",
        "request:item/tool/call",
        "serverRequest/resolved",
        "item/completed:dynamicToolCall",
        "thread/status/changed",
        "turn/completed",
      ]);
      expect(client.notifications("serverRequest/resolved").map((f) => f.params)).toEqual([expect.objectContaining({ threadId, requestId: request.id })]);
      expect(itemsCompleted(client, "dynamicToolCall")).toEqual([expect.objectContaining({ status: "failed", success: false })]);
      expectSeqIncreasing(client, threadId);

      // A late answer is ignored, and the next request pairs the call with its (cancelled) result.
      client.respond(request.id, { contentItems: [{ type: "inputText", text: "too late" }], success: true });
      h.mock.enqueue({ text: "ok" });
      const next = await startTurn("again");
      expect((await turnCompleted(client, next.id)).params.turn.status).toBe("completed");
      const results = toolResultsIn(provider, h.mock.requests[1]!.body);
      expect(results).toHaveLength(1);
      expect(results[0]!.callId).toBe(mockCallId(provider, 1));
      expect(results[0]!.text).not.toContain("too late");
    });

    it("during a retry backoff: the wait is cut short and nothing is retried", async () => {
      // A harness that honours a long Retry-After, so the turn is parked in its backoff.
      const slow = await startTurnHarness(backend, provider, { turns: { retry: { maxRetries: 3, baseDelayMs: 5, maxDelayMs: 20, maxRetryAfterMs: 600_000 } } });
      const c = await TestClient.initialized(slow.ts.url);
      try {
        const tid = (await c.request("thread/start", {})).thread.id;
        slow.mock.enqueue({ kind: "error", status: 429, retryAfterSeconds: 300 });
        const { turn } = await c.request("turn/start", { threadId: tid, input: text("hi") });
        await c.waitForNotification("error", (p) => p.turnId === turn.id && p.willRetry === true);
        expect(await c.request("turn/interrupt", { threadId: tid, turnId: turn.id })).toEqual({});
        const done = (await turnCompleted(c, turn.id)).params.turn;
        expect(done).toMatchObject({ status: "interrupted", stopReason: "interrupted", error: null });
        expect(methodSequence(c, tid)).toEqual([...OPENING, "error", "thread/status/changed", "turn/completed"]);
        expect(slow.mock.requests).toHaveLength(1);
      } finally {
        await c.close();
        await slow.close();
      }
    });
  });

  describe("turn/steer", () => {
    it("steering during the final answer: the user message is recorded and the loop calls the model again with it", async () => {
      const g = newGate();
      h.mock.enqueue({ text: ["Working", " on it"], gate: { afterEvents: afterFirstTextDelta(provider), wait: g.wait } }, { text: "Steered answer" });
      const turn = await startTurn("first");
      await firstDelta();
      const steer = await client.request("turn/steer", { threadId, expectedTurnId: turn.id, input: text("also this"), clientUserMessageId: "steer-1" });
      expect(steer).toEqual({ turnId: turn.id });
      // A retried steer (same clientUserMessageId) answers the same and adds nothing.
      expect(await client.request("turn/steer", { threadId, expectedTurnId: turn.id, input: text("also this"), clientUserMessageId: "steer-1" })).toEqual({
        turnId: turn.id,
      });
      g.open();
      const done = (await turnCompleted(client, turn.id)).params.turn;
      expect(done).toMatchObject({ status: "completed", stopReason: "finalAnswer" });
      expect(methodSequence(client, threadId)).toEqual([
        ...OPENING,
        "item/started:agentMessage",
        "item/agentMessage/delta",
        "item/completed:agentMessage",
        "thread/tokenUsage/updated",
        "item/started:userMessage",
        "item/completed:userMessage",
        "item/started:agentMessage",
        "item/agentMessage/delta",
        "item/completed:agentMessage",
        "thread/tokenUsage/updated",
        "thread/status/changed",
        "turn/completed",
      ]);
      const users = itemsCompleted(client, "userMessage");
      expect(users[1]).toMatchObject({ clientId: "steer-1", content: [expect.objectContaining({ type: "text", text: "also this" })] });
      expect(itemsCompleted(client, "agentMessage").map((i) => i.text)).toEqual(["Working on it", "Steered answer"]);
      // The second model call carries the first answer, then the steered input, last.
      expect(h.mock.requests).toHaveLength(2);
      const body = h.mock.requests[1]!.body;
      expect(userTextsIn(provider, body).at(-1)).toBe("also this");
      expect(JSON.stringify(body)).toContain("Working on it");
      const read = await client.request("thread/read", { threadId, includeTurns: true });
      expect(read.thread.turns).toHaveLength(1);
      expect(read.thread.turns[0].items.map((i: any) => i.type)).toEqual(["userMessage", "agentMessage", "userMessage", "agentMessage"]);
    });

    it("steering while a tool call streams: the not-yet-started call is cancelled, the steer reaches the next request", async () => {
      const asked: unknown[] = [];
      client.onServerRequest("item/tool/call", (p) => {
        asked.push(p);
        return { contentItems: [{ type: "inputText", text: "42" }], success: true };
      });
      const g = newGate();
      h.mock.enqueue(
        { text: ["Let me", " check"], toolCalls: [{ name: "lookup", arguments: { key: "k" } }], gate: { afterEvents: afterFirstTextDelta(provider), wait: g.wait } },
        { text: "Never mind then." },
      );
      const turn = await startTurn("look it up");
      await firstDelta();
      expect(await client.request("turn/steer", { threadId, expectedTurnId: turn.id, input: text("skip the lookup") })).toEqual({ turnId: turn.id });
      g.open();
      const done = (await turnCompleted(client, turn.id)).params.turn;
      expect(done.status).toBe("completed");
      expect(asked).toEqual([]);
      expect(serverRequests(client, "item/tool/call")).toEqual([]);
      expect(itemsStarted(client, "dynamicToolCall")).toEqual([]);
      // The steered user message appears before the next model call's items.
      const seq = methodSequence(client, threadId);
      expect(seq.slice(OPENING.length)).toEqual([
        "item/started:agentMessage",
        "item/agentMessage/delta",
        "item/completed:agentMessage",
        "thread/tokenUsage/updated",
        "item/started:userMessage",
        "item/completed:userMessage",
        "item/started:agentMessage",
        "item/agentMessage/delta",
        "item/completed:agentMessage",
        "thread/tokenUsage/updated",
        "thread/status/changed",
        "turn/completed",
      ]);
      const body = h.mock.requests[1]!.body;
      const [result] = toolResultsIn(provider, body);
      expect(result).toMatchObject({ callId: mockCallId(provider, 1) });
      expect(result!.text).toMatch(/not executed/);
      expect(userTextsIn(provider, body).at(-1)).toBe("skip the lookup");
    });

    it("steering while the client runs a tool: the running call finishes, then the steer is injected", async () => {
      h.mock.enqueue({ toolCalls: [{ name: "lookup", arguments: { key: "k" } }] }, { text: "Done, and noted." });
      const turn = await startTurn("look it up");
      const request = await client.waitFor((f) => f.method === "item/tool/call" && f.id !== undefined);
      expect(await client.request("turn/steer", { threadId, expectedTurnId: turn.id, input: text("then stop") })).toEqual({ turnId: turn.id });
      client.respond(request.id, { contentItems: [{ type: "inputText", text: "42" }], success: true });
      const done = (await turnCompleted(client, turn.id)).params.turn;
      expect(done).toMatchObject({ status: "completed", stopReason: "finalAnswer" });
      expect(wireSequence(client, threadId).slice(OPENING.length)).toEqual([
        "thread/tokenUsage/updated",
        "item/started:dynamicToolCall",
        "request:item/tool/call",
        "serverRequest/resolved",
        "item/completed:dynamicToolCall",
        "item/started:userMessage",
        "item/completed:userMessage",
        "item/started:agentMessage",
        "item/agentMessage/delta",
        "item/completed:agentMessage",
        "thread/tokenUsage/updated",
        "thread/status/changed",
        "turn/completed",
      ]);
      expect(itemsCompleted(client, "dynamicToolCall")).toEqual([expect.objectContaining({ status: "completed", success: true })]);
      const body = h.mock.requests[1]!.body;
      expect(toolResultsIn(provider, body)).toEqual([expect.objectContaining({ callId: mockCallId(provider, 1), text: "42" })]);
      expect(userTextsIn(provider, body).at(-1)).toBe("then stop");
    });

    it("steering into a turn that then ends without another model call: the input is kept, not dropped", async () => {
      const g = newGate();
      // The answer is cut by the token limit: the loop stops without calling the model again.
      h.mock.enqueue({ text: ["Part one", " and"], stop: "maxTokens", gate: { afterEvents: afterFirstTextDelta(provider), wait: g.wait } });
      const turn = await startTurn("write a lot");
      await firstDelta();
      expect(await client.request("turn/steer", { threadId, expectedTurnId: turn.id, input: text("keep it short"), clientUserMessageId: "late-steer" })).toEqual({
        turnId: turn.id,
      });
      g.open();
      const done = (await turnCompleted(client, turn.id)).params.turn;
      expect(done).toMatchObject({ status: "failed", stopReason: "maxTokens" });
      // Accepted input is recorded in the turn it was accepted into...
      const users = itemsCompleted(client, "userMessage");
      expect(users.map((u) => u.clientId)).toEqual([null, "late-steer"]);
      const seq = methodSequence(client, threadId);
      expect(seq.slice(-5)).toEqual(["item/started:userMessage", "item/completed:userMessage", "error", "thread/status/changed", "turn/completed"]);
      const read = await client.request("thread/read", { threadId, includeTurns: true });
      expect(read.thread.turns[0].items.map((i: any) => i.type)).toEqual(["userMessage", "agentMessage", "userMessage"]);
      // ...and reaches the model with the next turn, before that turn's own input.
      h.mock.enqueue({ text: "ok" });
      const next = await startTurn("continue");
      await turnCompleted(client, next.id);
      expect(userTextsIn(provider, h.mock.requests[1]!.body).slice(-2)).toEqual(["keep it short", "continue"]);
    });

    it("a wrong expectedTurnId, and a thread with no running turn, are -32600", async () => {
      const g = newGate();
      h.mock.enqueue({ text: ["a", "b"], gate: { afterEvents: afterFirstTextDelta(provider), wait: g.wait } });
      const turn = await startTurn("hi");
      await firstDelta();
      const wrong = await rpcError(client.request("turn/steer", { threadId, expectedTurnId: "01900000-0000-7000-8000-000000000000", input: text("x") }));
      expect(wrong.code).toBe(-32600);
      g.open();
      await turnCompleted(client, turn.id);
      const idle = await rpcError(client.request("turn/steer", { threadId, expectedTurnId: turn.id, input: text("x") }));
      expect(idle.code).toBe(-32600);
      const noThread = await rpcError(client.request("turn/steer", { threadId: "no-such-thread", expectedTurnId: turn.id, input: text("x") }));
      expect(noThread.code).toBe(-32600);
      // Neither steer was recorded or sent to the model.
      expect(itemsCompleted(client, "userMessage")).toHaveLength(1);
      expect(h.mock.requests).toHaveLength(1);
    });
  });

  describe("turn/start", () => {
    it("while a turn runs: -32600, and the running turn is untouched", async () => {
      const g = newGate();
      h.mock.enqueue({ text: ["a", "b"], gate: { afterEvents: afterFirstTextDelta(provider), wait: g.wait } });
      const turn = await startTurn("first");
      await firstDelta();
      const busy = await rpcError(client.request("turn/start", { threadId, input: text("second") }));
      expect(busy.code).toBe(-32600);
      expect(busy.message).toContain(turn.id);
      g.open();
      const done = (await turnCompleted(client, turn.id)).params.turn;
      expect(done.status).toBe("completed");
      expect(client.notifications("turn/started")).toHaveLength(1);
      expect(h.mock.requests).toHaveLength(1);
    });

    it("on an unknown thread: -32600", async () => {
      const err = await rpcError(client.request("turn/start", { threadId: "01900000-0000-7000-8000-000000000000", input: text("hi") }));
      expect(err.code).toBe(-32600);
      expect(err.message).toContain("01900000-0000-7000-8000-000000000000");
    });

    it("invalid input is -32602 and records nothing", async () => {
      const empty = await rpcError(client.request("turn/start", { threadId, input: [] }));
      expect(empty.code).toBe(-32602);
      const unknownType = await rpcError(client.request("turn/start", { threadId, input: [{ type: "hologram", text: "hi" }] }));
      expect(unknownType.code).toBe(-32602);
      // Valid shape, but not something we can send to a model.
      const byFileId = await rpcError(client.request("turn/start", { threadId, input: [{ type: "image", fileId: "file-1" }] }));
      expect(byFileId.code).toBe(-32602);
      const noProvider = await rpcError(client.request("turn/start", { threadId, input: text("hi"), modelProvider: "nobody" }));
      expect(noProvider.code).toBe(-32602);
      const missingImage = await rpcError(client.request("turn/start", { threadId, input: [{ type: "localImage", path: "does-not-exist.png" }] }));
      expect(missingImage.code).toBe(-32602);
      expect(methodSequence(client, threadId)).toEqual(["thread/started"]);
      expect(h.mock.requests).toHaveLength(0);
      const read = await client.request("thread/read", { threadId, includeTurns: true });
      expect(read.thread.turns).toEqual([]);
      expect(read.thread.preview).toBe("");

      // None of it left the thread busy.
      h.mock.enqueue({ text: "ok" });
      const turn = await startTurn("valid");
      expect((await turnCompleted(client, turn.id)).params.turn.status).toBe("completed");
    });

    it("the same clientUserMessageId sent twice gives the same turn and one model request", async () => {
      const g = newGate();
      h.mock.enqueue({ text: ["a", "b"], gate: { afterEvents: afterFirstTextDelta(provider), wait: g.wait } });
      const params = { threadId, input: text("hi"), clientUserMessageId: "msg-1" };
      // Back to back, as a client retrying over a flaky link would.
      const [first, second] = await Promise.all([client.request("turn/start", params), client.request("turn/start", params)]);
      expect(second.turn.id).toBe(first.turn.id);
      await firstDelta();
      // Again while it runs.
      const third = await client.request("turn/start", params);
      expect(third.turn.id).toBe(first.turn.id);
      g.open();
      await turnCompleted(client, first.turn.id);
      // And after it ended.
      const fourth = await client.request("turn/start", params);
      expect(fourth.turn.id).toBe(first.turn.id);
      expect(h.mock.requests).toHaveLength(1);
      expect(client.notifications("turn/started")).toHaveLength(1);
      expect(itemsCompleted(client, "userMessage")).toEqual([expect.objectContaining({ clientId: "msg-1" })]);
      const read = await client.request("thread/read", { threadId, includeTurns: true });
      expect(read.thread.turns.map((t: any) => t.id)).toEqual([first.turn.id]);
    });

    it("a turn/start retried on a new connection, then thread/resume with afterSeq: each event reaches that connection once", async () => {
      // The flaky-link client: its first connection dropped mid-turn, it retries the message on a
      // new one (which subscribes it, live) and then resumes from the last seq it saw. What it
      // received live between the two must not come again in the replay (issue 31, chaos seed 31).
      const g = newGate();
      h.mock.enqueue({ text: ["a", "b"], gate: { afterEvents: afterFirstTextDelta(provider), wait: g.wait } });
      const params = { threadId, input: text("hi"), clientUserMessageId: "msg-again" };
      const turn = (await client.request("turn/start", params)).turn;
      await firstDelta();
      const retrying = await TestClient.initialized(h.ts.url);
      try {
        expect((await retrying.request("turn/start", params)).turn.id).toBe(turn.id);
        g.open();
        await turnCompleted(retrying, turn.id); // the end reached it live
        await retrying.request("thread/resume", { threadId, afterSeq: 0 });
        // Pipeline order: the replay goes out before anything of a later turn.
        h.mock.enqueue({ text: "next" });
        const next = (await retrying.request("turn/start", { threadId, input: text("next") })).turn;
        await turnCompleted(retrying, next.id);
        const seqs = retrying.notifications().filter((f) => f.params?.threadId === threadId).map((f) => f.params.seq as number);
        const repeated = seqs.filter((s, i) => seqs.indexOf(s) !== i);
        expect(repeated, JSON.stringify(retrying.notifications().map((f) => [f.method, f.params?.seq]))).toEqual([]);
        // Nothing stored was left out either: a fresh resume from 0 sees no seq it lacks.
        const fresh = await TestClient.initialized(h.ts.url);
        try {
          await fresh.request("thread/resume", { threadId, afterSeq: 0 });
          await fresh.waitForNotification("turn/completed", (p) => p.turn?.id === next.id);
          const stored = fresh.notifications().filter((f) => f.params?.threadId === threadId).map((f) => f.params.seq as number);
          expect(stored.filter((s) => !seqs.includes(s))).toEqual([]);
          expect(stored.length).toBeGreaterThan(10);
        } finally {
          await fresh.close();
        }
      } finally {
        await retrying.close();
      }
    });
  });
});
