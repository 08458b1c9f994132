/**
 * What clients see around turns, on each of the three providers: model/list, thread/read with
 * turns after a tool turn, who receives a turn's notifications (subscribers only), and
 * persistence across a server restart on the same database (same items; the next request is a
 * prefix extension of the last one before the restart, so the provider's prompt cache still hits).
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { BACKENDS, freshDatabase, type TestDatabase } from "./support/db.js";
import { TestClient } from "./support/client.js";
import { startMockModelServer, type MockModelServer } from "./support/mock-model-server.js";
import { startServerOn, type TestServer } from "./support/server.js";
import { methodSequence, mockProviders, PROVIDERS, startTurnHarness, text, turnCompleted, type ProviderName, type TurnHarness } from "./support/turns.js";
import { expectPrefixExtension, itemsCompleted, LOOKUP_TOOL, mockCallId, serverRequests, wireSequence } from "./support/wire.js";
import { DEFAULT_MODELS } from "../src/config.js";

const backend = BACKENDS[BACKENDS.length - 1]!; // Postgres when available (faster per test), else PGlite

const answer42 = () => ({ contentItems: [{ type: "inputText", text: "42" }], success: true });

describe.each(PROVIDERS)("sessions with %s", (provider) => {
  let h: TurnHarness;
  let client: TestClient;
  const others: TestClient[] = [];
  beforeEach(async () => {
    h = await startTurnHarness(backend, provider);
    client = await TestClient.initialized(h.ts.url);
  });
  afterEach(async () => {
    for (const c of others.splice(0)) await c.close();
    await client?.close();
    await h?.close();
  });
  const connect = async () => {
    const c = await TestClient.initialized(h.ts.url);
    others.push(c);
    return c;
  };

  it("model/list: every configured model, isDefault on the server's provider, filterable by provider", async () => {
    const all = await client.request("model/list", {});
    expect(all.nextCursor).toBeNull();
    expect(all.data.map((m: any) => m.modelProvider).sort()).toEqual([...PROVIDERS].sort());
    for (const m of all.data) {
      const isServerDefault = m.modelProvider === provider;
      expect(m).toMatchObject({ isDefault: isServerDefault, hidden: false, model: m.id });
      expect(m.id).toBe(isServerDefault ? "mock-model" : DEFAULT_MODELS[m.modelProvider]);
    }
    expect(all.data.filter((m: any) => m.isDefault)).toHaveLength(1);

    for (const p of PROVIDERS) {
      const only = await client.request("model/list", { modelProvider: p });
      expect(only.data).toHaveLength(1);
      expect(only.data[0]).toMatchObject({ modelProvider: p, isDefault: p === provider });
    }
    expect((await client.request("model/list", { modelProvider: "nobody" })).data).toEqual([]);
    const page = await client.request("model/list", { limit: 2 });
    expect(page.data).toHaveLength(2);
    const rest = await client.request("model/list", { limit: 2, cursor: page.nextCursor });
    expect([...page.data, ...rest.data]).toEqual(all.data);
    expect(rest.nextCursor).toBeNull();
  });

  it("thread/read includeTurns after a tool turn: the turn with its items, as the client saw them complete", async () => {
    client.onServerRequest("item/tool/call", answer42);
    const threadId = (await client.request("thread/start", { dynamicTools: [LOOKUP_TOOL] })).thread.id;
    h.mock.enqueue({ text: "Looking.", toolCalls: [{ name: "lookup", arguments: { key: "k" } }] }, { text: "It is 42." });
    const { turn } = await client.request("turn/start", { threadId, input: text("look it up") });
    const done = (await turnCompleted(client, turn.id)).params.turn;

    const read = await client.request("thread/read", { threadId, includeTurns: true });
    expect(read.thread.status).toEqual({ type: "idle" });
    expect(read.thread.preview).toBe("look it up");
    expect(read.thread.turns).toHaveLength(1);
    const stored = read.thread.turns[0];
    expect(stored).toMatchObject({ id: turn.id, status: "completed", stopReason: "finalAnswer", error: null, itemsView: "full" });
    expect(stored.durationMs).toBe(done.durationMs);
    expect(stored.items.map((i: any) => i.type)).toEqual(["userMessage", "agentMessage", "dynamicToolCall", "agentMessage"]);
    // Every stored item is exactly its item/completed payload.
    const completed = client.notifications("item/completed").map((f) => f.params.item);
    expect(stored.items).toEqual(completed);
    expect(stored.items[2]).toMatchObject({ status: "completed", tool: "lookup", arguments: { key: "k" }, contentItems: [{ type: "inputText", text: "42" }] });
    // Without includeTurns, no turns.
    expect((await client.request("thread/read", { threadId })).thread.turns).toEqual([]);
  });

  it("a client that did not subscribe sees nothing of the turn; one that sent turn/start on it sees all of it", async () => {
    client.onServerRequest("item/tool/call", answer42);
    const bystander = await connect();
    const threadId = (await client.request("thread/start", { dynamicTools: [LOOKUP_TOOL] })).thread.id;
    h.mock.enqueue({ toolCalls: [{ name: "lookup", arguments: { key: "k" } }] }, { text: "done" });
    const first = (await client.request("turn/start", { threadId, input: text("one") })).turn;
    await turnCompleted(client, first.id);
    // Reading a thread does not subscribe to it either.
    await bystander.request("thread/read", { threadId, includeTurns: true });

    // A second client starts a turn on a thread it never started: it is subscribed from then on.
    const joiner = await connect();
    joiner.onServerRequest("item/tool/call", answer42);
    h.mock.enqueue({ toolCalls: [{ name: "lookup", arguments: { key: "j" } }] }, { text: "done again" });
    const second = (await joiner.request("turn/start", { threadId, input: text("two") })).turn;
    await turnCompleted(joiner, second.id);
    await turnCompleted(client, second.id);

    expect(bystander.frames.filter((f) => f.method)).toEqual([]);
    const turnWire = [
      "thread/status/changed",
      "turn/started",
      "item/started:userMessage",
      "item/completed:userMessage",
      "thread/tokenUsage/updated",
      "item/started:dynamicToolCall",
      "request:item/tool/call",
      "serverRequest/resolved",
      "item/completed:dynamicToolCall",
      "item/started:agentMessage",
      "item/agentMessage/delta",
      "item/completed:agentMessage",
      "thread/tokenUsage/updated",
      "thread/status/changed",
      "turn/completed",
    ];
    expect(wireSequence(joiner, threadId)).toEqual(turnWire);
    // The starter saw both turns; both got the second turn's tool call, one answer won.
    expect(wireSequence(client, threadId)).toEqual(["thread/started", ...turnWire, ...turnWire]);
    const secondCall = (c: TestClient) => serverRequests(c, "item/tool/call").find((f) => f.params.turnId === second.id)!;
    expect(secondCall(client).params).toEqual(secondCall(joiner).params);
    expect(secondCall(joiner).params.callId).toBe(mockCallId(provider, 3));
    // Both copies of the request were resolved on both connections.
    for (const c of [client, joiner]) {
      expect(c.notifications("serverRequest/resolved").some((f) => f.params.requestId === secondCall(c).id)).toBe(true);
    }
    // Identical notifications (same seq) on both connections for the second turn.
    const secondTurnSeqs = (c: TestClient) =>
      c
        .notifications()
        .filter((f) => f.params.threadId === threadId && f.method !== "serverRequest/resolved")
        .filter((f) => f.params.turnId === second.id || f.params.turn?.id === second.id)
        .map((f) => `${f.params.seq}:${f.method}`);
    expect(secondTurnSeqs(joiner)).toEqual(secondTurnSeqs(client));
    expect(itemsCompleted(joiner, "dynamicToolCall")).toHaveLength(1);
  });

  it("a tool call pending when its client disconnects is asked again of a client that resumes the thread", async () => {
    const threadId = (await client.request("thread/start", { dynamicTools: [LOOKUP_TOOL] })).thread.id;
    h.mock.enqueue({ toolCalls: [{ name: "lookup", arguments: { key: "k" } }] }, { text: "It is 42." });
    const { turn } = await client.request("turn/start", { threadId, input: text("look it up") });
    const first = await client.waitFor((f) => f.method === "item/tool/call" && f.id !== undefined);
    await client.close(); // never answered

    const resumer = await connect();
    resumer.onServerRequest("item/tool/call", answer42);
    await resumer.request("thread/resume", { threadId });
    const done = (await turnCompleted(resumer, turn.id)).params.turn;
    expect(done).toMatchObject({ status: "completed", stopReason: "finalAnswer" });
    const [again] = serverRequests(resumer, "item/tool/call");
    expect(again!.params).toEqual(first.params);
    expect(resumer.notifications("serverRequest/resolved").map((f) => f.params.requestId)).toEqual([again!.id]);
    expect(itemsCompleted(resumer, "dynamicToolCall")).toEqual([expect.objectContaining({ status: "completed", contentItems: [{ type: "inputText", text: "42" }] })]);
    expect(h.mock.requests).toHaveLength(2);
  });

  it("unsubscribed: a client that leaves a thread stops receiving its turns", async () => {
    const threadId = (await client.request("thread/start", {})).thread.id;
    const watcher = await connect();
    h.mock.enqueue({ text: "one" }, { text: "two" });
    const first = (await watcher.request("turn/start", { threadId, input: text("one") })).turn;
    await turnCompleted(watcher, first.id);
    expect(await watcher.request("thread/unsubscribe", { threadId })).toEqual({ status: "unsubscribed" });
    const before = watcher.frames.length;
    const second = (await client.request("turn/start", { threadId, input: text("two") })).turn;
    await turnCompleted(client, second.id);
    expect(watcher.frames.slice(before).filter((f) => f.method)).toEqual([]);
    expect(methodSequence(client, threadId).filter((m) => m === "turn/completed")).toHaveLength(2);
  });
});

describe.each(BACKENDS)("persistence across a restart (%s)", (persistBackend) => {
  describe.each(PROVIDERS)("with %s", (provider: ProviderName) => {
    let mock: MockModelServer;
    let db: TestDatabase;
    let ts: TestServer | undefined;
    const clients: TestClient[] = [];
    beforeEach(async () => {
      mock = await startMockModelServer();
      db = await freshDatabase(persistBackend);
    });
    afterEach(async () => {
      for (const c of clients.splice(0)) await c.close();
      await ts?.close();
      ts = undefined;
      await mock.close();
      await db.cleanup();
    });

    const start = (reopen: boolean) =>
      startServerOn(
        db,
        {
          modelProvider: provider,
          model: "mock-model",
          providers: mockProviders(mock),
          turns: { retry: { maxRetries: 3, baseDelayMs: 5, maxDelayMs: 20, maxRetryAfterMs: 50 } },
        },
        reopen,
      );
    const connect = async () => {
      const c = await TestClient.initialized(ts!.url);
      c.onServerRequest("item/tool/call", answer42);
      clients.push(c);
      return c;
    };

    it("thread/read returns the same turns, and the next request extends the last one byte for byte", async () => {
      ts = await start(false);
      let client = await connect();
      const threadId = (await client.request("thread/start", { dynamicTools: [LOOKUP_TOOL], developerInstructions: "Be brief." })).thread.id;
      mock.enqueue(
        {
          reasoning: { summary: ["Need the table."], text: "I should look it up.", signature: "sig-persist", encryptedContent: "enc-persist" },
          text: "Checking.",
          toolCalls: [{ name: "lookup", arguments: { key: "k" } }],
        },
        { text: "It is 42." },
      );
      const { turn } = await client.request("turn/start", { threadId, input: text("look it up") });
      await turnCompleted(client, turn.id);
      const readBefore = await client.request("thread/read", { threadId, includeTurns: true });
      expect(readBefore.thread.turns[0].items.map((i: any) => i.type)).toEqual(["userMessage", "reasoning", "agentMessage", "dynamicToolCall", "agentMessage"]);
      expect(mock.requests).toHaveLength(2);
      const lastBefore = mock.requests[1]!;

      // Restart on the same database (same PGlite directory or Postgres schema).
      await client.close();
      await ts.close();
      ts = await start(true);
      client = await connect();

      const readAfter = await client.request("thread/read", { threadId, includeTurns: true });
      expect(readAfter.thread.turns).toEqual(readBefore.thread.turns);
      expect(readAfter.thread.preview).toBe(readBefore.thread.preview);

      await client.request("thread/resume", { threadId });
      mock.enqueue({ text: "Still 42." });
      const next = (await client.request("turn/start", { threadId, input: text("and now?") })).turn;
      expect((await turnCompleted(client, next.id)).params.turn.status).toBe("completed");
      expect(mock.requests).toHaveLength(3);
      const firstAfter = mock.requests[2]!;
      expectPrefixExtension(provider, lastBefore, firstAfter);

      // Provider-specific opaque state survived the restart inside that prefix.
      const raw = firstAfter.rawBody;
      if (provider === "anthropic") expect(raw).toContain('"signature":"sig-persist"');
      if (provider === "openai") expect(raw).toContain('"encrypted_content":"enc-persist"');
      expect(raw).toContain(`"${mockCallId(provider, 1)}"`);
    });
  });
});
