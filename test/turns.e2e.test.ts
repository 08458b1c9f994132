import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { BACKENDS } from "./support/db.js";
import { TestClient } from "./support/client.js";
import { methodSequence, PROVIDERS, startTurnHarness, text, turnCompleted, type TurnHarness } from "./support/turns.js";

const backend = BACKENDS[BACKENDS.length - 1]!; // Postgres when available (faster per test), else PGlite

describe.each(PROVIDERS)("turns over WebSocket with %s", (provider) => {
  let h: TurnHarness;
  let client: TestClient;
  let threadId: string;
  beforeEach(async () => {
    h = await startTurnHarness(backend, provider);
    client = await TestClient.initialized(h.ts.url);
    threadId = (await client.request("thread/start", {})).thread.id;
  });
  afterEach(async () => {
    await client?.close();
    await h?.close();
  });

  it("streams a text turn in Codex order", async () => {
    h.mock.enqueue({ text: ["Hello", " there", "!"], usage: { input: 100, output: 5, cached: 40 } });
    const asked = Date.now();
    const { turn } = await client.request("turn/start", { threadId, input: text("hi") });
    expect(turn.status).toBe("inProgress");
    const done = await turnCompleted(client, turn.id);
    const told = Date.now();
    expect(done.params.turn).toMatchObject({ id: turn.id, status: "completed", stopReason: "finalAnswer", error: null });
    // The turn's duration spans its items and lies within the request..turn/completed round trip
    // (the server runs in this process: one clock); its start and end in seconds agree with it.
    const { durationMs, startedAt, completedAt } = done.params.turn;
    const ofTurn = (method: string) => client.notifications(method).filter((f) => f.params.turnId === turn.id);
    const itemsFrom = Math.min(...ofTurn("item/started").map((f) => f.params.startedAtMs));
    const itemsTo = Math.max(...ofTurn("item/completed").map((f) => f.params.completedAtMs));
    expect(durationMs).toBeGreaterThanOrEqual(itemsTo - itemsFrom);
    expect(durationMs).toBeLessThanOrEqual(told - asked);
    expect(completedAt - startedAt - Math.floor(durationMs / 1000)).toBeOneOf([0, 1]);
    expect(methodSequence(client, threadId)).toEqual([
      "thread/started",
      "thread/status/changed",
      "turn/started",
      "item/started:userMessage",
      "item/completed:userMessage",
      "item/started:agentMessage",
      "item/agentMessage/delta",
      "item/completed:agentMessage",
      "thread/tokenUsage/updated",
      "thread/status/changed",
      "turn/completed",
    ]);
    const deltas = client.notifications("item/agentMessage/delta").map((f) => f.params.delta).join("");
    expect(deltas).toBe("Hello there!");
    const completed = client.notifications("item/completed").find((f) => f.params.item.type === "agentMessage")!;
    expect(completed.params.item.text).toBe("Hello there!");
    const usage = client.notifications("thread/tokenUsage/updated")[0]!.params.tokenUsage;
    expect(usage.last).toMatchObject({ inputTokens: 100, cachedInputTokens: 40, outputTokens: 5 });
    const seqs = client.notifications().filter((f) => f.params.threadId === threadId || f.params.thread?.id === threadId).map((f) => f.params.seq);
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    expect(new Set(seqs).size).toBe(seqs.length);

    const read = await client.request("thread/read", { threadId, includeTurns: true });
    expect(read.thread.preview).toBe("hi");
    expect(read.thread.turns).toHaveLength(1);
    expect(read.thread.turns[0].items.map((i: any) => i.type)).toEqual(["userMessage", "agentMessage"]);
    expect(read.thread.turns[0].items[1].text).toBe("Hello there!");
  });
});
