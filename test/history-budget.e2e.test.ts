/**
 * The loaded threads' history budget (APP_SERVER_LOADED_HISTORY_MAX_BYTES, runtime/history-budget.ts):
 * over it, the least recently used idle threads drop their history log from memory — also threads a
 * connection stays subscribed to — and whatever uses them next reads it again from the store. Real
 * server, real database, the mock model; each thread's history is made ~40 KB by its turn's input so
 * that a budget of 140 000 bytes holds three of them and not four.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { BACKENDS } from "./support/db.js";
import { TestClient } from "./support/client.js";
import { startTurnHarness, text, turnCompleted, type TurnHarness } from "./support/turns.js";
import { untilItHolds } from "./support/retry.js";

const BUDGET = 140_000;
/** How long a turn may take on a machine loaded by other work (no verdict depends on it). */
const LONG = 50_000;
const BIG = 40_000;
/** A turn input of ~40 KB that names its thread and turn (found again in later model requests). */
const bigInput = (label: string) => `${label}:${"x".repeat(BIG)}`;

/** Up to 50 s: a loaded machine. */
const eventually = <T>(check: () => T | Promise<T>) => untilItHolds(check, 2000);

describe.each(BACKENDS)("loaded threads' history budget (%s)", (backend) => {
  let h: TurnHarness;
  const clients: TestClient[] = [];
  const client = async () => {
    const c = await TestClient.initialized(h.ts.url);
    clients.push(c);
    return c;
  };
  const runtime = () => h.ts.server.app.runtime;
  const loadedThread = (id: string) => runtime().loaded.get(id)!;
  /** Whether the thread's history log is in memory. */
  const inMemory = (id: string) => loadedThread(id).entries !== null;
  const metric = async (name: string) => {
    const body = await (await fetch(`${h.ts.httpUrl}/metrics`)).text();
    const line = body.split("\n").find((l) => l.startsWith(`${name} `));
    return line ? Number(line.slice(name.length + 1)) : NaN;
  };

  /** Runs a turn to its end, then waits until nothing runs or is queued on the thread (its lease may stay: thread-leases.ts). */
  const turn = async (c: TestClient, threadId: string, input: string) => {
    const { turn: started } = await c.request("turn/start", { threadId, input: text(input) });
    const done = (await turnCompleted(c, started.id, LONG)).params.turn;
    await eventually(() => {
      const t = loadedThread(threadId);
      expect(t.activeTurn === null && t.claiming === null && t.queued === 0).toBe(true);
    });
    return done;
  };
  const threadWithTurn = async (c: TestClient, label: string) => {
    const id = (await c.request("thread/start", {})).thread.id as string;
    expect((await turn(c, id, bigInput(label))).status).toBe("completed");
    return id;
  };
  const userTexts = (turns: any[]) => turns.flatMap((t) => t.items.filter((i: any) => i.type === "userMessage").map((i: any) => i.content[0].text.split(":")[0]));

  beforeAll(async () => {
    h = await startTurnHarness(backend, "openai", { limits: { loadedHistoryMaxBytes: BUDGET } });
  });
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close()));
    await eventually(() => expect(runtime().loaded.size).toBe(0));
    h.mock.reset();
  });
  afterAll(async () => {
    await h?.close();
  });

  it("drops the least recently used idle histories of subscribed threads; a turn, thread/read and thread/resume on them still see the whole history", { timeout: 180_000 }, async () => {
    const c = await client();
    const evictionsBefore = await metric("app_server_loaded_history_evictions_total");
    const ids: string[] = [];
    for (let i = 1; i <= 5; i++) ids.push(await threadWithTurn(c, `t${i}`));
    // All five stay loaded (the connection is subscribed to each); only the three most recent keep their history.
    expect((await c.request("thread/loaded/list", {})).data).toEqual([...ids].sort());
    expect(ids.map(inMemory)).toEqual([false, false, true, true, true]);
    expect(await metric("app_server_loaded_threads")).toBe(5);
    expect(await metric("app_server_loaded_threads_with_history")).toBe(3);
    expect(await metric("app_server_loaded_history_bytes")).toBeLessThanOrEqual(BUDGET);
    expect((await metric("app_server_loaded_history_evictions_total")) - evictionsBefore).toBe(2);

    // A turn on the oldest: its history comes back from the store, so the model sees the first turn.
    const [t1, t2] = [ids[0]!, ids[1]!];
    expect((await turn(c, t1, "t1b:again")).status).toBe("completed");
    const request = h.mock.requests.at(-1)!.rawBody;
    expect(request).toContain(bigInput("t1"));
    expect(request).toContain("t1b:again");
    expect(inMemory(t1)).toBe(true);
    // Using it made it the most recent: the least recently used one left (t3; t2 was already out).
    expect(ids.map(inMemory)).toEqual([true, false, false, true, true]);

    // thread/read and thread/resume of a thread whose history is not in memory.
    const read = (await c.request("thread/read", { threadId: t2, includeTurns: true })).thread;
    expect(userTexts(read.turns)).toEqual(["t2"]);
    const other = await client();
    const resumed = (await other.request("thread/resume", { threadId: t2 })).thread;
    expect(userTexts(resumed.turns)).toEqual(["t2"]);
    expect((await turn(other, t2, "t2b:more")).status).toBe("completed");
    expect(h.mock.requests.at(-1)!.rawBody).toContain(bigInput("t2"));
    const after = (await other.request("thread/read", { threadId: t2, includeTurns: true })).thread;
    expect(userTexts(after.turns)).toEqual(["t2", "t2b"]);
  });

  it("never drops the history of a thread whose turn is running", { timeout: 180_000 }, async () => {
    const c = await client();
    const running = await threadWithTurn(c, "r1");
    // Its second turn waits on the model (a reply that never comes) while others fill the budget.
    h.mock.enqueue({ kind: "hang" });
    const { turn: hanging } = await c.request("turn/start", { threadId: running, input: text("r2:wait") });
    await h.mock.waitForRequests(2);
    const others: string[] = [];
    for (let i = 1; i <= 4; i++) others.push(await threadWithTurn(c, `o${i}`));
    // The running thread is the least recently used, yet the idle ones went instead.
    expect(inMemory(running)).toBe(true);
    expect(loadedThread(running).activeTurn).not.toBeNull();
    expect(others.map(inMemory)).toEqual([false, false, true, true]);
    await c.request("turn/interrupt", { threadId: running, turnId: hanging.id });
    expect((await turnCompleted(c, hanging.id, LONG)).params.turn.status).toBe("interrupted");
  });

  it("a subscriber of a thread whose history was dropped still gets the events of a new turn", { timeout: 180_000 }, async () => {
    const watcher = await client();
    const first = await threadWithTurn(watcher, "w1");
    for (let i = 2; i <= 5; i++) await threadWithTurn(watcher, `w${i}`);
    expect(inMemory(first)).toBe(false);
    expect(loadedThread(first).subscribers.size).toBe(1);

    const driver = await client();
    await driver.request("thread/resume", { threadId: first });
    h.mock.enqueue({ text: ["seen ", "by ", "both"] });
    const { turn: started } = await driver.request("turn/start", { threadId: first, input: text("w1b:go") });
    const completed = (await turnCompleted(watcher, started.id, LONG)).params.turn;
    expect(completed.status).toBe("completed");
    const deltas = watcher
      .notifications("item/agentMessage/delta")
      .filter((f) => f.params.turnId === started.id)
      .map((f) => f.params.delta)
      .join("");
    expect(deltas).toBe("seen by both");
    expect(watcher.notifications("turn/started").some((f) => f.params.turn.id === started.id)).toBe(true);
    expect(h.mock.requests.at(-1)!.rawBody).toContain(bigInput("w1"));
  });
});
