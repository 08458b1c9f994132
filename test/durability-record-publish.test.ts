/**
 * Issue 16, record-before-publish kept cheap, and issue 32 (item 7), without exceptions:
 *   - a streamed item's item/started is published only once its record has committed, and its
 *     deltas, which the stream keeps producing meanwhile, go out right behind it; a client
 *     resuming meanwhile replays the log in order — the log stays exactly the live order;
 *   - an item/started whose record fails: nothing of that item is published (no start, no delta,
 *     no completion), the turn fails naming the error, and the thread takes the next turn;
 *   - events refer to the item rows they announce instead of repeating the text, and replay
 *     returns the same JSON, byte for byte, as the event stored whole.
 */
import postgres from "postgres";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { BACKENDS, TEST_DATABASE_URL, type Backend } from "./support/db.js";
import { TestClient, type Frame } from "./support/client.js";
import { startTurnHarness, text, turnCompleted, type TurnHarness } from "./support/turns.js";
import { allEvents, deferred, isDelta, threadNotifications } from "./support/durability.js";
import { SUMMARY_TEXT_CAP } from "../src/runtime/turn-end.js";

/** Notifications that are stored in the event log (not deltas, not per-connection ones). */
const storable = (f: Frame) => !isDelta(f.method) && f.method !== "serverRequest/resolved";

function harness(backend: Backend) {
  const ctx = {} as { h: TurnHarness; client: TestClient; others: TestClient[]; cleanups: Array<() => Promise<unknown>> };
  beforeEach(async () => {
    ctx.h = await startTurnHarness(backend, "openai");
    ctx.client = await TestClient.initialized(ctx.h.ts.url);
    ctx.others = [];
    ctx.cleanups = [];
  });
  afterEach(async () => {
    for (const c of ctx.cleanups.reverse()) await c().catch(() => {});
    for (const c of ctx.others) await c.close();
    await ctx.client?.close();
    await ctx.h?.close();
  });
  return ctx;
}

/** The live client's stored-kind notifications equal the log, seq for seq, params for params. */
async function expectLogIsLive(client: TestClient, threadId: string) {
  const stored = await allEvents(client, threadId, 0, 1000);
  const live = threadNotifications(client, threadId).filter(storable);
  expect(live.map((f) => [f.params.seq, f.method, f.params, f.emittedAtMs])).toEqual(stored.map((e) => [e.seq, e.method, e.params, e.emittedAtMs]));
  return stored;
}

describe.skipIf(!TEST_DATABASE_URL)("a streamed item is published once recorded (postgres)", () => {
  const ctx = harness("postgres");

  it("while its item/started waits on a lock, clients see neither it nor a delta; then it and every delta in order; a resume meanwhile replays it in order", async () => {
    const { h, client } = ctx;
    const threadId = (await client.request("thread/start", {})).thread.id;
    const [{ schema }] = await h.ts.server.db.sql<{ schema: string }[]>`select current_schema() as schema`;
    const locker = postgres(TEST_DATABASE_URL!, { max: 1, onnotice: () => {}, connection: { search_path: schema! } });
    ctx.cleanups.push(() => locker.end());
    const gate = deferred();
    h.mock.enqueue({ text: ["Hel", "lo ", "wor", "ld"], gate: { afterEvents: 0, wait: gate.promise } });
    const { turn } = await client.request("turn/start", { threadId, input: text("hi") });
    await client.waitForNotification("item/completed", (p) => p.turnId === turn.id && p.item.type === "userMessage");

    // Inserts into items now wait for this transaction: the agentMessage's item/started cannot commit.
    const lock = await locker.reserve();
    ctx.cleanups.push(async () => lock.release());
    await lock`begin`;
    await lock`lock table items in share mode`;
    const [{ pid }] = await lock<{ pid: number }[]>`select pg_backend_pid() as pid`;
    gate.open();
    // The server's insert is blocked behind the lock: its item/started is not committed.
    await expect
      .poll(async () => (await lock<{ n: number }[]>`select count(*)::int as n from pg_locks where not granted and ${pid}::int = any(pg_blocking_pids(pid))`)[0]!.n, { timeout: 20_000 })
      .toBeGreaterThan(0);
    const agentEvents = () => threadNotifications(client, threadId).filter((f) => f.params.turnId === turn.id && f.method !== "item/started" ? isDelta(f.method) : f.params.item?.type === "agentMessage");
    expect(agentEvents(), "nothing of the item before its record commits").toEqual([]);

    // A client resuming now is answered from the log and follows live from there.
    const other = await TestClient.initialized(h.ts.url);
    ctx.others.push(other);
    const resumed = other.request("thread/resume", { threadId, afterSeq: 0, excludeTurns: true });

    await lock`commit`;
    await resumed;
    const done = await turnCompleted(client, turn.id);
    expect(done.params.turn.status).toBe("completed");
    await turnCompleted(other, turn.id);

    const [started, ...deltas] = agentEvents();
    expect(started!.method).toBe("item/started");
    expect(deltas.map((d) => d.params.delta).join("")).toBe("Hello world");
    expect(deltas.every((d) => d.method === "item/agentMessage/delta" && d.params.seq > started!.params.seq)).toBe(true);
    const stored = await expectLogIsLive(client, threadId);
    expect(stored.find((e) => e.seq === started!.params.seq)).toMatchObject({ method: "item/started", params: started!.params });
    // The resumed client: every stored event once, in order, the item/started among them.
    const seen = threadNotifications(other, threadId);
    const seqs = seen.map((f) => f.params.seq as number);
    for (let i = 1; i < seqs.length; i++) expect(seqs[i]).toBeGreaterThan(seqs[i - 1]!);
    expect(seen.filter(storable).map((f) => f.params.seq)).toEqual(stored.map((e) => e.seq));
  });
});

describe.each(BACKENDS)("an item/started whose record fails (%s)", (backend) => {
  const ctx = harness(backend);

  it("fails the turn cleanly; nothing of the item reaches a client; the log is what was published; the thread takes the next turn", async () => {
    const { h, client } = ctx;
    const sql = h.ts.server.db.sql;
    // The first agentMessage row insert fails (a sequence is not rolled back with the transaction).
    await sql.unsafe(`
      create sequence fail_agent_item;
      create function fail_agent_item() returns trigger language plpgsql as $$
      begin
        if new.type = 'agentMessage' then
          if nextval('fail_agent_item') = 1 then raise exception 'injected: items unavailable'; end if;
        end if;
        return new;
      end $$;
      create trigger fail_agent_item before insert on items for each row execute function fail_agent_item();`);
    ctx.cleanups.push(() => sql.unsafe(`drop trigger if exists fail_agent_item on items; drop function if exists fail_agent_item(); drop sequence if exists fail_agent_item;`));
    const threadId = (await client.request("thread/start", {})).thread.id;
    h.mock.enqueue({ text: ["Hel", "lo"] });
    const { turn } = await client.request("turn/start", { threadId, input: text("hi") });
    const done = await turnCompleted(client, turn.id);
    expect(done.params.turn.status).toBe("failed");
    expect(done.params.turn.error.message).toContain("injected: items unavailable");

    const live = threadNotifications(client, threadId);
    expect(live.filter((f) => f.params.item?.type === "agentMessage" || f.method === "item/agentMessage/delta"), "no start, delta or completion of the unrecorded item").toEqual([]);
    expect(done.params.turn.items.filter((i: any) => i.type === "agentMessage")).toEqual([]);
    expect(await sql`select 1 from items where thread_id = ${threadId} and type = 'agentMessage'`).toHaveLength(0);
    await expectLogIsLive(client, threadId);

    h.mock.enqueue({ text: ["again"] });
    const next = await client.request("turn/start", { threadId, input: text("once more") });
    expect((await turnCompleted(client, next.turn.id)).params.turn.status).toBe("completed");
    await expectLogIsLive(client, threadId);
  });
});

describe.each(BACKENDS)("events refer to the items they announce (%s)", (backend) => {
  const ctx = harness(backend);

  it("stores an answer's text once in the event log, and replays the same JSON as an event stored whole", async () => {
    const { h, client } = ctx;
    const sql = h.ts.server.db.sql;
    const threadId = (await client.request("thread/start", {})).thread.id;
    const answer = "the answer, stored once: " + "x".repeat(5000);
    h.mock.enqueue({ text: [answer.slice(0, 2000), answer.slice(2000)] });
    const { turn } = await client.request("turn/start", { threadId, input: text("a question worth a long reply") });
    await turnCompleted(client, turn.id);

    const rows = await sql<{ method: string; params: string; itemIds: string[] | null }[]>`
      select method, params::text as params, item_ids from thread_events where thread_id = ${threadId} order by seq`;
    // item/completed and turn/completed name the rows; the answer is not in any event row.
    expect(rows.filter((r) => r.params.includes("x".repeat(5000)))).toEqual([]);
    expect(rows.filter((r) => r.itemIds).map((r) => r.method)).toEqual(["item/started", "item/completed", "item/completed", "turn/completed"]);

    // Replayed = live, and byte for byte what jsonb gives for the whole event (the old storage).
    const stored = await expectLogIsLive(client, threadId);
    for (const e of stored) {
      const [whole] = await sql<{ p: unknown }[]>`select ${sql.json(e.params)}::jsonb as p`;
      expect(JSON.stringify(e.params)).toBe(JSON.stringify(whole!.p));
    }
    const final = stored.find((e) => e.method === "turn/completed")!;
    expect(final.params.turn.items.map((i: any) => [i.type, i.phase ?? null])).toEqual([
      ["userMessage", null],
      ["agentMessage", "final_answer"],
    ]);
    expect(final.params.turn.items[1].text).toBe(answer);

    // An event stored whole (every row written before the migration) still replays.
    await sql`insert into thread_events (thread_id, seq, method, params, emitted_at_ms)
      values (${threadId}, 100000, 'thread/name/updated', ${sql.json({ threadId, threadName: "old row", seq: 100000 })}, 1)`;
    const again = await allEvents(client, threadId, 0, 1000);
    expect(again.slice(0, -1)).toEqual(stored);
    expect(again[again.length - 1]).toMatchObject({ seq: 100000, params: { threadName: "old row" } });
  });
  it("caps a very long answer in turn/completed (live and replayed alike); item/completed, the item row and thread/read keep it whole", async () => {
    const { h, client } = ctx;
    const sql = h.ts.server.db.sql;
    const threadId = (await client.request("thread/start", {})).thread.id;
    // Over the cap, with a surrogate pair straddling it: the cut must not split the pair.
    const answer = "y".repeat(SUMMARY_TEXT_CAP - 1) + "😀" + "z".repeat(20_000);
    h.mock.enqueue({ text: [answer.slice(0, 40_000), answer.slice(40_000)] });
    const { turn } = await client.request("turn/start", { threadId, input: text("a question worth a very long reply") });
    const completed = await turnCompleted(client, turn.id);

    const live = completed.params.turn.items.find((i: any) => i.type === "agentMessage");
    expect(live.text).toBe("y".repeat(SUMMARY_TEXT_CAP - 1));
    const itemCompleted = threadNotifications(client, threadId).find((f) => f.method === "item/completed" && f.params.item.type === "agentMessage")!;
    expect(itemCompleted.params.item.text).toBe(answer);

    const stored = await expectLogIsLive(client, threadId);
    expect(stored.find((e) => e.method === "turn/completed")!.params.turn.items[1].text).toBe(live.text);
    // Stored once: no event row repeats the text, capped or not.
    const rows = await sql<{ params: string }[]>`select params::text as params from thread_events where thread_id = ${threadId}`;
    expect(rows.filter((r) => r.params.includes("y".repeat(1000)))).toEqual([]);
    const [item] = await sql<{ text: string }[]>`select payload->>'text' as text from items where thread_id = ${threadId} and payload->>'type' = 'agentMessage'`;
    expect(item!.text).toBe(answer);
    const read = await client.request("thread/read", { threadId, includeTurns: true });
    expect(read.thread.turns[0].items.find((i: any) => i.type === "agentMessage").text).toBe(answer);
  });
});
