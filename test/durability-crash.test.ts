// @needs-os-sandbox: runs commands in the OS sandbox (vitest.config.ts leaves this file out where bubblewrap cannot run).
/**
 * Durable threads, part 4: crash safety. The real `app-server serve` runs as a child process and
 * is killed with SIGKILL (a) in the middle of a model stream and (b) while a client-implemented
 * tool call waits for its answer; a new process on the same home/database closes the turn as
 * interrupted ("server restarted"), keeps every completed item, never runs the tool again, replays
 * the closing notifications to a client that resumes with afterSeq, and sends the model the bytes
 * it would have sent had the process never stopped. Also: turn/start idempotency by
 * clientUserMessageId (in-process, and across the crash).
 */
import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { BACKENDS, TEST_DATABASE_URL, type Backend } from "./support/db.js";
import { TestClient, type Frame } from "./support/client.js";
import { startMockModelServer, type MockModelServer } from "./support/mock-model-server.js";
import { seededHome } from "./support/process.js";
import { startTurnHarness, text, turnCompleted, type TurnHarness } from "./support/turns.js";
import { afterFirstTextDelta, LOOKUP_TOOL, mockCallId, toolResultsIn } from "./support/wire.js";
import { allEvents, deferred, expectExtends, freshPostgresDatabase, spawnServer, threadNotifications, type ChildServer } from "./support/durability.js";
import { shellInvocation } from "../src/tools/shell-invocation.js";

const CRASH_PROVIDERS = ["openai", "anthropic"] as const;
/** Each test boots two server processes (PGlite: two WASM start-ups); generous for a loaded 2-core box. */
const CHILD_TEST_TIMEOUT_MS = 120_000;

describe.each(BACKENDS)("SIGKILL and restart (%s)", (backend: Backend) => {
  describe.each(CRASH_PROVIDERS)("with %s", (provider) => {
    let mock: MockModelServer;
    let home: string;
    let cleanupHome: () => Promise<void>;
    let database: { url: string; drop(): Promise<void> } | undefined;
    let servers: ChildServer[];
    let clients: TestClient[];
    let gates: Array<() => void>;

    beforeEach(async () => {
      mock = await startMockModelServer();
      servers = [];
      clients = [];
      gates = [];
      if (backend === "postgres") {
        home = await mkdtemp(path.join(os.tmpdir(), "aas-crash-"));
        cleanupHome = () => rm(home, { recursive: true, force: true });
        database = await freshPostgresDatabase(TEST_DATABASE_URL!);
      } else {
        const seeded = await seededHome();
        home = seeded.home;
        cleanupHome = seeded.cleanup;
        database = undefined;
      }
    });
    afterEach(async () => {
      for (const c of clients) await c.close();
      for (const s of servers) await s.proc.kill();
      for (const open of gates) open();
      await mock.close();
      await database?.drop();
      await cleanupHome();
    });

    const start = async () => {
      const s = await spawnServer({ home, databaseUrl: database?.url, provider, mock });
      servers.push(s);
      return s;
    };
    const connect = async (s: ChildServer) => {
      const c = await TestClient.initialized(s.url);
      clients.push(c);
      return c;
    };
    const kill = async (s: ChildServer) => {
      s.proc.child.kill("SIGKILL");
      expect((await s.proc.exited).signal).toBe("SIGKILL");
    };
    const lastSeq = (c: TestClient, threadId: string) => Math.max(...threadNotifications(c, threadId).map((f) => f.params.seq as number));
    const completedItems = (c: TestClient, turnId: string) => c.notifications("item/completed").filter((f) => f.params.turnId === turnId).map((f) => f.params.item);

    /** What a client resuming with afterSeq gets from the new process: the recovery's closing events. */
    async function expectRecoveryReplay(c: TestClient, threadId: string, turnId: string, afterSeq: number): Promise<Frame[]> {
      await c.request("thread/resume", { threadId, afterSeq, excludeTurns: true });
      const done = await turnCompleted(c, turnId);
      expect(done.params.turn).toMatchObject({ id: turnId, status: "interrupted", stopReason: "interrupted" });
      expect(done.params.turn.error).toMatchObject({ message: "server restarted" });
      const seen = threadNotifications(c, threadId);
      const seqs = seen.map((f) => f.params.seq as number);
      expect(Math.min(...seqs)).toBeGreaterThan(afterSeq);
      for (let i = 1; i < seqs.length; i++) expect(seqs[i]).toBeGreaterThan(seqs[i - 1]!);
      // Exactly the stored events after afterSeq, in order.
      expect(seqs).toEqual((await allEvents(c, threadId, afterSeq)).map((e) => e.seq));
      expect(seen.map((f) => f.method)).toEqual([...seen.filter((f) => f.method === "item/completed").map(() => "item/completed"), "thread/status/changed", "turn/completed"]);
      expect(seen.find((f) => f.method === "thread/status/changed")!.params.status).toEqual({ type: "idle" });
      return seen;
    }

    it("killed mid-stream: the turn is interrupted, completed items kept, the retry of its message not re-run, the next request extends the last", async () => {
      let server = await start();
      const a = await connect(server);
      const threadId = (await a.request("thread/start", {})).thread.id;
      mock.enqueue({ text: "re:zero" });
      const t0 = (await a.request("turn/start", { threadId, input: text("zero") })).turn;
      await turnCompleted(a, t0.id);
      const t0Items = completedItems(a, t0.id);

      const gate = deferred();
      gates.push(gate.open);
      mock.enqueue({ text: ["Hel", "lo ", "wor", "ld"], gate: { afterEvents: afterFirstTextDelta(provider), wait: gate.promise } });
      const t1 = (await a.request("turn/start", { threadId, input: text("first"), clientUserMessageId: "msg-1" })).turn;
      await a.waitForNotification("item/agentMessage/delta", (p) => p.turnId === t1.id);
      const userItem = completedItems(a, t1.id).find((i) => i.type === "userMessage");
      expect(userItem).toBeDefined();
      const streaming = a.notifications("item/started").find((f) => f.params.turnId === t1.id && f.params.item.type === "agentMessage")!.params.item;
      // Its item/started went out once its row committed (record before publish): the row is there.
      expect((await a.request("thread/read", { threadId, includeTurns: true })).thread.turns[1]?.items.some((i: any) => i.id === streaming.id)).toBe(true);
      const seenByA = lastSeq(a, threadId);
      expect(mock.requests).toHaveLength(2);
      const lastBefore = mock.requests[1]!;

      await kill(server);
      gate.open();
      server = await start();
      const b = await connect(server);
      const replay = await expectRecoveryReplay(b, threadId, t1.id, seenByA);
      const closed = replay.filter((f) => f.method === "item/completed").map((f) => f.params.item);
      expect(closed).toHaveLength(1);
      expect(closed[0]).toMatchObject({ id: streaming.id, type: "agentMessage" });
      expect(closed[0].completedAtMs).toEqual(expect.any(Number));

      const read = await b.request("thread/read", { threadId, includeTurns: true });
      expect(read.thread.turns.map((t: any) => [t.id, t.status])).toEqual([
        [t0.id, "completed"],
        [t1.id, "interrupted"],
      ]);
      expect(read.thread.turns[0].items).toEqual(t0Items);
      expect(read.thread.turns[1].error).toMatchObject({ message: "server restarted" });
      expect(read.thread.turns[1].items[0]).toEqual(userItem);
      expect(read.thread.turns[1].items[1]).toEqual(closed[0]);
      expect(read.thread.status).toEqual({ type: "idle" });

      // The client retries its message after the crash: same turn, no new model request.
      const again = await b.request("turn/start", { threadId, input: text("first"), clientUserMessageId: "msg-1" });
      expect(again.turn).toMatchObject({ id: t1.id, status: "interrupted" });
      expect(mock.requests).toHaveLength(2);

      mock.enqueue({ text: "second answer" });
      const t2 = (await b.request("turn/start", { threadId, input: text("second") })).turn;
      expect((await turnCompleted(b, t2.id)).params.turn.status).toBe("completed");
      expect(mock.requests).toHaveLength(3);
      expectExtends(provider, lastBefore, mock.requests[2]!);
      expect(mock.requests[2]!.rawBody).not.toContain("Hel"); // the half-streamed answer was never recorded as history
    }, CHILD_TEST_TIMEOUT_MS);

    it("killed while a client tool call waits: the call is failed, never run again, and the next request extends the last", async () => {
      let toolCalls = 0;
      const neverAnswer = () => {
        toolCalls++;
        return new Promise(() => {});
      };
      let server = await start();
      const a = await connect(server);
      a.onServerRequest("item/tool/call", neverAnswer);
      const threadId = (await a.request("thread/start", { dynamicTools: [LOOKUP_TOOL] })).thread.id;
      mock.enqueue({ text: "Checking.", toolCalls: [{ name: "lookup", arguments: { key: "k" } }] });
      const t1 = (await a.request("turn/start", { threadId, input: text("look it up") })).turn;
      const call = await a.waitFor((f) => f.method === "item/tool/call" && f.id !== undefined);
      expect(call.params).toMatchObject({ threadId, turnId: t1.id, tool: "lookup", arguments: { key: "k" } });
      const toolItem = a.notifications("item/started").find((f) => f.params.item.type === "dynamicToolCall")!.params.item;
      const doneBefore = completedItems(a, t1.id);
      expect(doneBefore.map((i) => i.type)).toEqual(["userMessage", "agentMessage"]);
      const seenByA = lastSeq(a, threadId);
      expect(mock.requests).toHaveLength(1);
      const lastBefore = mock.requests[0]!;

      await kill(server);
      server = await start();
      const b = await connect(server);
      b.onServerRequest("item/tool/call", neverAnswer);
      const replay = await expectRecoveryReplay(b, threadId, t1.id, seenByA);
      const closed = replay.filter((f) => f.method === "item/completed").map((f) => f.params.item);
      expect(closed).toHaveLength(1);
      expect(closed[0]).toMatchObject({ id: toolItem.id, type: "dynamicToolCall", status: "failed", tool: "lookup", arguments: { key: "k" } });

      const read = await b.request("thread/read", { threadId, includeTurns: true });
      const items = read.thread.turns[0].items;
      expect(items.map((i: any) => i.type)).toEqual(["userMessage", "agentMessage", "dynamicToolCall"]);
      expect(items.slice(0, 2)).toEqual(doneBefore);
      expect(items[2]).toEqual(closed[0]);

      mock.enqueue({ text: "It did not run." });
      const t2 = (await b.request("turn/start", { threadId, input: text("and?") })).turn;
      expect((await turnCompleted(b, t2.id)).params.turn.status).toBe("completed");
      expect(toolCalls).toBe(1); // asked once, before the kill; never again
      expect(b.frames.filter((f) => f.method === "item/tool/call")).toEqual([]);
      expect(mock.requests).toHaveLength(2);
      const next = mock.requests[1]!;
      expectExtends(provider, lastBefore, next);
      // The call the model made is answered right after it, truthfully: it had started (the
      // client was asked), so its outcome is unknown — never "not executed".
      const results = toolResultsIn(provider, next.body);
      expect(results.map((r) => r.callId)).toEqual([mockCallId(provider, 1)]);
      expect(results[0]!.text).not.toMatch(/not executed/);
      expect(results[0]!.text).toMatch(/outcome is unknown/);
    }, CHILD_TEST_TIMEOUT_MS);

    it("killed during a started shell command: the next request does not tell the model it was not executed", async () => {
      const workspace = await mkdtemp(path.join(os.tmpdir(), "aas-crash-ws-"));
      try {
        let server = await start();
        const a = await connect(server);
        const threadId = (await a.request("thread/start", { cwd: workspace, approvalPolicy: "never" })).thread.id;
        mock.enqueue({ toolCalls: [{ name: "shell", arguments: { command: "echo started > started.txt; sleep 60" } }] });
        await a.request("turn/start", { threadId, input: text("run it") });
        await a.waitFor((f) => f.method === "item/started" && f.params.item?.type === "commandExecution");
        // The command is running (its side effect is visible) when the process dies.
        for (let i = 0; i < 200 && !existsSync(path.join(workspace, "started.txt")); i++) await new Promise((r) => setTimeout(r, 25));
        expect(existsSync(path.join(workspace, "started.txt"))).toBe(true);
        const lastBefore = mock.requests[0]!;

        await kill(server);
        server = await start();
        const b = await connect(server);
        await b.request("thread/resume", { threadId });
        mock.enqueue({ text: "I will check first." });
        const t2 = (await b.request("turn/start", { threadId, input: text("what happened?") })).turn;
        expect((await turnCompleted(b, t2.id)).params.turn.status).toBe("completed");
        const next = mock.requests.at(-1)!;
        expectExtends(provider, lastBefore, next);
        const results = toolResultsIn(provider, next.body);
        expect(results.map((r) => r.callId)).toEqual([mockCallId(provider, 1)]);
        expect(results[0]!.text).not.toMatch(/not executed/);
        expect(results[0]!.text).toMatch(/outcome is unknown/);
      } finally {
        await rm(workspace, { recursive: true, force: true });
      }
    }, CHILD_TEST_TIMEOUT_MS);

    it("killed during a user shell command (thread/shellCommand): its turn stays in the thread, interrupted, the command failed", async () => {
      const workspace = await mkdtemp(path.join(os.tmpdir(), "aas-crash-ws-"));
      try {
        let server = await start();
        const a = await connect(server);
        const threadId = (await a.request("thread/start", { cwd: workspace, sandbox: "workspace-write" })).thread.id;
        await a.request("thread/shellCommand", { threadId, command: "echo started > started.txt; sleep 60" });
        const started = await a.waitFor((f) => f.method === "item/started" && f.params.item?.type === "commandExecution");
        for (let i = 0; i < 200 && !existsSync(path.join(workspace, "started.txt")); i++) await new Promise((r) => setTimeout(r, 25));
        expect(existsSync(path.join(workspace, "started.txt"))).toBe(true);

        await kill(server);
        server = await start();
        const b = await connect(server);
        // It wrote nothing to the model's history: it read as rolled back and vanished from the thread.
        const { thread } = await b.request("thread/read", { threadId, includeTurns: true });
        expect(thread.turns.map((t: any) => t.id)).toEqual([started.params.turnId]);
        expect(thread.turns[0]).toMatchObject({ status: "interrupted", error: { message: "server restarted" } });
        expect(thread.turns[0].items).toEqual([expect.objectContaining({ type: "commandExecution", source: "userShell", status: "failed" })]);
        expect(thread.turns[0].items[0].aggregatedOutput).toContain("[server restarted]");
        // The thread goes on.
        mock.enqueue({ text: "ok" });
        const t2 = (await b.request("turn/start", { threadId, input: text("next") })).turn;
        expect((await turnCompleted(b, t2.id)).params.turn.status).toBe("completed");
        expect((await b.request("thread/read", { threadId, includeTurns: true })).thread.turns.map((t: any) => t.id)).toEqual([started.params.turnId, t2.id]);
      } finally {
        await rm(workspace, { recursive: true, force: true });
      }
    }, CHILD_TEST_TIMEOUT_MS);

    it("killed during a review (review/start): the turn is interrupted and its review mode closed, as a client waits for", async () => {
      let server = await start();
      const a = await connect(server);
      const threadId = (await a.request("thread/start", {})).thread.id;
      const gate = deferred();
      gates.push(gate.open);
      mock.enqueue({ text: ["Look", "ing"], gate: { afterEvents: afterFirstTextDelta(provider), wait: gate.promise } });
      const { turn } = await a.request("review/start", { threadId, target: { type: "custom", instructions: "Check the parser." } });
      await a.waitForNotification("item/agentMessage/delta", (p) => p.turnId === turn.id);
      const afterSeq = lastSeq(a, threadId);

      await kill(server);
      gate.open();
      server = await start();
      const b = await connect(server);
      const seen = await b.request("thread/resume", { threadId, afterSeq, excludeTurns: true }).then(() => turnCompleted(b, turn.id));
      expect(seen.params.turn).toMatchObject({ status: "interrupted", error: { message: "server restarted" } });
      const exited = b.notifications("item/completed").find((f) => f.params.turnId === turn.id && f.params.item.type === "exitedReviewMode");
      expect(exited?.params.item.review).toBe("The review was interrupted: server restarted.");
      const { thread } = await b.request("thread/read", { threadId, includeTurns: true });
      const types = thread.turns[0].items.map((i: any) => i.type);
      expect(types[0]).toBe("enteredReviewMode");
      expect(types.at(-1)).toBe("exitedReviewMode");
      expect(types.filter((t: string) => t === "exitedReviewMode")).toHaveLength(1);
    }, CHILD_TEST_TIMEOUT_MS);

    it("killed while an approval waits: the turn is restored as waiting, asked again with the same item, and accept runs the command once", async () => {
      const workspace = await mkdtemp(path.join(os.tmpdir(), "aas-crash-ws-"));
      try {
        let server = await start();
        const a = await connect(server);
        const threadId = (await a.request("thread/start", { cwd: workspace, approvalPolicy: "untrusted" })).thread.id;
        mock.enqueue({ toolCalls: [{ name: "shell", arguments: { command: "echo ran >> runs.txt" } }] }, { text: "Done." });
        const t1 = (await a.request("turn/start", { threadId, input: text("run it") })).turn;
        const asked = await a.waitFor((f) => f.method === "item/commandExecution/requestApproval" && f.id !== undefined);
        const seenByA = lastSeq(a, threadId);
        expect(mock.requests).toHaveLength(1);

        await kill(server);
        expect(existsSync(path.join(workspace, "runs.txt"))).toBe(false);
        server = await start();
        const b = await connect(server);
        const again = b.waitFor((f) => f.method === "item/commandExecution/requestApproval" && f.id !== undefined);
        await b.request("thread/resume", { threadId, afterSeq: seenByA });
        const request = await again;
        expect(request.params).toMatchObject({ threadId, turnId: t1.id, itemId: asked.params.itemId, command: shellInvocation("echo ran >> runs.txt") });
        b.respond(request.id, { decision: "accept" });
        const done = await turnCompleted(b, t1.id);
        expect(done.params.turn.status).toBe("completed");
        expect(readFileSync(path.join(workspace, "runs.txt"), "utf8")).toBe("ran\n"); // exactly once
        expect(mock.requests).toHaveLength(2);
        const results = toolResultsIn(provider, mock.requests[1]!.body);
        expect(results.map((r) => r.callId)).toEqual([mockCallId(provider, 1)]);
        expect(results[0]!.text).toMatch(/Exit code: 0/);
      } finally {
        await rm(workspace, { recursive: true, force: true });
      }
    }, CHILD_TEST_TIMEOUT_MS);
  });
});

describe("turn/start idempotency by clientUserMessageId", () => {
  let h: TurnHarness;
  let client: TestClient;
  beforeEach(async () => {
    h = await startTurnHarness(BACKENDS[BACKENDS.length - 1]!, "openai");
    client = await TestClient.initialized(h.ts.url);
  });
  afterEach(async () => {
    await client?.close();
    await h?.close();
  });

  it("the same message twice (while it runs, and after) gives the same turn and one model request", async () => {
    const threadId = (await client.request("thread/start", {})).thread.id;
    const gate = deferred();
    h.mock.enqueue({ text: ["o", "k"], gate: { afterEvents: afterFirstTextDelta("openai"), wait: gate.promise } });
    const params = { threadId, input: text("hello"), clientUserMessageId: "client-msg-1" };
    const [first, second] = await Promise.all([client.request("turn/start", params), client.request("turn/start", params)]);
    expect(second.turn.id).toBe(first.turn.id);
    await client.waitForNotification("item/agentMessage/delta");
    const during = await client.request("turn/start", params);
    expect(during.turn.id).toBe(first.turn.id);
    gate.open();
    await turnCompleted(client, first.turn.id);
    const after = await client.request("turn/start", params);
    expect(after.turn).toMatchObject({ id: first.turn.id, status: "completed" });
    expect(h.mock.requests).toHaveLength(1);
    expect(client.notifications("turn/started")).toHaveLength(1);
    const read = await client.request("thread/read", { threadId, includeTurns: true });
    expect(read.thread.turns).toHaveLength(1);
    expect(read.thread.turns[0].items.filter((i: any) => i.type === "userMessage")).toHaveLength(1);

    // Another message id is another turn.
    h.mock.enqueue({ text: "again" });
    const other = await client.request("turn/start", { ...params, clientUserMessageId: "client-msg-2" });
    expect(other.turn.id).not.toBe(first.turn.id);
    await turnCompleted(client, other.turn.id);
    expect(h.mock.requests).toHaveLength(2);
  });

  it("an id longer than 256 characters is refused with -32602 (it is a unique-index key; 8 kB of it was -32603), and nothing starts", async () => {
    const threadId = (await client.request("thread/start", {})).thread.id;
    for (const [method, params] of [
      ["turn/start", { threadId, input: text("hello"), clientUserMessageId: "x".repeat(257) }],
      ["turn/start", { threadId, input: text("hello"), clientUserMessageId: "é".repeat(4000) }],
      ["turn/steer", { threadId, expectedTurnId: "t", input: text("more"), clientUserMessageId: "x".repeat(8000) }],
    ] as const) {
      const f = await client.requestRaw(method, params);
      expect(f.error, method).toMatchObject({ code: -32602, message: expect.stringContaining("clientUserMessageId is at most 256 characters") });
    }
    expect((await client.request("thread/read", { threadId, includeTurns: true })).thread.turns).toEqual([]);
    // At the bound, in characters of three UTF-8 bytes each, it is a key like any other.
    h.mock.enqueue({ text: "ok" });
    const params = { threadId, input: text("hello"), clientUserMessageId: "€".repeat(256) };
    const first = await client.request("turn/start", params);
    await turnCompleted(client, first.turn.id);
    expect((await client.request("turn/start", params)).turn.id).toBe(first.turn.id);
    expect(h.mock.requests).toHaveLength(1);
  });
});
