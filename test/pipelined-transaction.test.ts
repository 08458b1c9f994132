/**
 * Pipelined recording transactions (issue 33 item 2), on both backends: BEGIN, the statements and
 * (for writes issued at once) COMMIT leave without waiting for each other's answers; a statement
 * that fails — a check that fails in SQL among them (the fence, a second ending) — takes the whole
 * transaction with it although its COMMIT had gone; a statement issued after COMMIT is refused;
 * a dropped connection fails the transaction and the pool goes on. On Postgres, through a proxy
 * that holds every answer: COMMIT reaches the server before any answer has come back (one round
 * trip). And group commit: records queued while an earlier one commits share one transaction, and
 * when it fails each of them fails (publishing nothing) unless it has attempts left.
 */
import { randomUUID } from "node:crypto";
import net from "node:net";
import postgres, { type Sql } from "postgres";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { EventLog } from "../src/runtime/event-log.js";
import { LoadedThread } from "../src/runtime/loaded-thread.js";
import { SeqCounter } from "../src/runtime/seq.js";
import type { ThreadContext } from "../src/runtime/thread-context.js";
import { ThreadLeases } from "../src/runtime/thread-leases.js";
import type { Subscriber } from "../src/runtime/thread-types.js";
import { openDatabase, type Database } from "../src/store/database.js";
import { LeaseStore } from "../src/store/lease-store.js";
import { ThreadStore } from "../src/store/thread-store.js";
import { pipelinedTransaction, TransactionRolledBackError } from "../src/store/transaction.js";
import { TurnAlreadyEndedError, TurnStore } from "../src/store/turn-store.js";
import { BACKENDS, freshDatabase, TEST_DATABASE_URL, type TestDatabase } from "./support/db.js";

const silent = { info() {}, warn() {}, error() {}, debug() {} };

async function insertThread(sql: Sql, id: string): Promise<void> {
  await sql`
    insert into threads (id, session_id, model_provider, model, cwd, approval_policy, sandbox, cli_version, source, created_at_ms, updated_at_ms)
    values (${id}, ${id}, 'openai', 'm', '/tmp', ${sql.json("never")}, 'read-only', 'test', 'cli', 0, 0)`;
}

const event = (seq: number, method = "thread/name/updated") => ({ seq, method, params: { seq }, emittedAtMs: 1 });

describe.each(BACKENDS)("pipelined transactions (%s)", (backend) => {
  let test: TestDatabase;
  let db: Database;
  let store: ThreadStore;
  let threadId: string;

  beforeEach(async () => {
    test = await freshDatabase(backend);
    db = await openDatabase(test.options);
    store = new ThreadStore(db.sql);
    threadId = randomUUID();
    await insertThread(db.sql, threadId);
  });
  afterEach(async () => {
    await db.close();
    await test.cleanup();
  });

  const storedSeqs = async () => (await db.sql<{ seq: number }[]>`select seq from thread_events where thread_id = ${threadId} order by seq`).map((r) => Number(r.seq));

  it("commits what was issued at once, and fails whole when a statement fails, a failed SQL check included", async () => {
    await store.pipelined((tx) => Promise.all([store.insertEvents(tx, threadId, [event(1)]), store.reserveSeq(tx, threadId, 10)]), "atOnce");
    expect(await storedSeqs()).toEqual([1]);

    // A second ending of a turn that is not in progress: the check fails in SQL, after COMMIT was sent.
    const turns = new TurnStore(db.sql);
    const ending = store.pipelined(
      (tx) => Promise.all([store.insertEvents(tx, threadId, [event(2)]), turns.finishTurn(tx, randomUUID(), { status: "completed", stopReason: "finalAnswer", error: null, completedAtMs: 1 })]),
      "atOnce",
    );
    await expect(ending).rejects.toBeInstanceOf(TurnAlreadyEndedError);
    expect(await storedSeqs()).toEqual([1]);

    // The fence of a lease this process does not hold: false, and the transaction rolled back
    // although every statement's promise settled (COMMIT was answered ROLLBACK).
    const leases = new LeaseStore(db.sql);
    let fenced: boolean | undefined;
    const lost = store.pipelined(async (tx) => {
      fenced = await leases.fence(tx, threadId, randomUUID(), 7, 100);
    }, "atOnce");
    await expect(lost).rejects.toBeInstanceOf(TransactionRolledBackError);
    expect(fenced).toBe(false);
    const fencedAndWrite = store.pipelined((tx) => Promise.all([leases.fence(tx, threadId, randomUUID(), 7, 100), store.insertEvents(tx, threadId, [event(3)])]), "atOnce");
    await expect(fencedAndWrite).rejects.toMatchObject({ code: "25P02" }); // refused after the fence failed
    expect(await storedSeqs()).toEqual([1]);
    const [row] = await db.sql<{ seqReserved: number }[]>`select seq_reserved from threads where id = ${threadId}`;
    expect(Number(row!.seqReserved)).toBe(10);

    // The connection went back to the pool each time (PGlite has one).
    expect(await db.sql`select 1 as one`).toEqual([{ one: 1 }]);
  });

  it("refuses a statement issued after COMMIT went, and rolls back what an 'awaited' write rejects", async () => {
    const late = store.pipelined(async (tx) => {
      await tx`select 1`;
      await store.insertEvents(tx, threadId, [event(5)]);
    }, "atOnce");
    await expect(late).rejects.toThrow(/after its pipelined transaction's COMMIT/);
    // An "awaited" write may read and decide; what it throws rolls the transaction back.
    const decided = store.pipelined(async (tx) => {
      await store.insertEvents(tx, threadId, [event(6)]);
      const [n] = await tx<{ n: number }[]>`select count(*)::int as n from thread_events where thread_id = ${threadId}`;
      if (n!.n === 1) throw new Error("decided against it");
    }, "awaited");
    await expect(decided).rejects.toThrow("decided against it");
    expect(await storedSeqs()).toEqual([]);
    await store.pipelined((tx) => store.insertEvents(tx, threadId, [event(7)]), "awaited");
    expect(await storedSeqs()).toEqual([7]);
  });

  it("group commit: records queued behind a transaction in flight share the next one; a failed one fails each record in it, publishing none", async () => {
    const ctx: ThreadContext = { store, log: silent, loaded: new Map(), cluster: null, unrecorded: null, historyBudget: null };
    let transactions = 0;
    ctx.onCommit = () => transactions++;
    const events = new EventLog(ctx, new ThreadLeases(ctx));
    const thread = new LoadedThread((await store.getThread(threadId))!, new SeqCounter(0));
    const told: number[] = [];
    const subscriber: Subscriber = { id: 1, notify: (_m, p) => void told.push((p as { seq: number }).seq) };
    thread.subscribers.add(subscriber);
    const name = (n: string) => [{ method: "thread/name/updated" as const, params: { threadId, threadName: n } }];

    // The first transaction waits on a lock on the thread row (held by another session) …
    const other = backend === "postgres" ? postgres(TEST_DATABASE_URL!, { max: 1, onnotice: () => {}, connection: { search_path: test.options.schema! } }) : null;
    let unlock = () => {};
    if (other) {
      const locked = new Promise<void>((resolve) => {
        void other.begin(async (tx) => {
          await tx`select 1 from threads where id = ${threadId} for update`;
          resolve();
          await new Promise<void>((r) => (unlock = r));
        });
      });
      await locked;
    }
    const first = events.commit(thread, name("a"), (tx) => store.updateThread(tx, threadId, { name: "a", updatedAtMs: 1 }).then(() => {}), { atOnce: true });
    // … (PGlite has one session: the first is simply in flight) while three more are queued.
    await new Promise((resolve) => setImmediate(resolve));
    const errors: unknown[] = [];
    const second = events.commit(thread, name("b"), undefined, { onError: (e) => errors.push(e), atOnce: true });
    const third = events.commit(thread, name("c"), (tx) => tx`insert into no_such_table values (1)`.then(() => {}), { onError: (e) => errors.push(e) });
    const retried = events.commit(thread, name("d"), undefined, { attempts: 2 });
    unlock();
    await first;
    await expect(second).rejects.toMatchObject({ code: "42P01" });
    await expect(third).rejects.toMatchObject({ code: "42P01" });
    expect(errors).toHaveLength(2);
    // With an attempt left, "d" is tried again, without the records that failed, and commits.
    const [d] = await retried;
    await thread.enqueue(async () => undefined);
    expect(await storedSeqs()).toEqual([1, d!.seq]);
    expect(told).toEqual([1, d!.seq]);
    expect(transactions).toBe(2); // "a"; then "d" alone (the failed batch of b, c, d is not counted)
    await other?.end();
  });
});

/** Forwards a Postgres connection, holding every answer while `hold` is set; sees what the client sends. */
class HoldingProxy {
  hold = false;
  sent = "";
  heldAnswers: Buffer[] = [];
  private client: net.Socket | null = null;
  private readonly sockets = new Set<net.Socket>();
  port = 0;
  private readonly server = net.createServer((client) => {
    this.client = client;
    const upstream = net.connect(this.target.port, this.target.host);
    for (const s of [client, upstream]) {
      this.sockets.add(s);
      s.on("error", () => {});
      s.on("close", () => this.sockets.delete(s));
    }
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
    client.on("data", (d: Buffer) => {
      this.sent += d.toString("latin1");
      upstream.write(d);
    });
    upstream.on("data", (d: Buffer) => (this.hold ? this.heldAnswers.push(d) : client.write(d)));
  });

  constructor(private readonly target: { host: string; port: number }) {}

  async start(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, "127.0.0.1", resolve));
    this.port = (this.server.address() as net.AddressInfo).port;
  }
  release(): void {
    this.hold = false;
    for (const d of this.heldAnswers.splice(0)) this.client!.write(d);
  }
  dropConnections(): void {
    for (const s of this.sockets) s.destroy();
  }
  async close(): Promise<void> {
    this.dropConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

describe.skipIf(!TEST_DATABASE_URL)("a pipelined transaction on the wire (postgres)", () => {
  let test: TestDatabase;
  let db: Database;
  let proxy: HoldingProxy;
  let sql: Sql;
  let threadId: string;

  beforeEach(async () => {
    test = await freshDatabase("postgres");
    db = await openDatabase(test.options);
    threadId = randomUUID();
    await insertThread(db.sql, threadId);
    const url = new URL(TEST_DATABASE_URL!);
    proxy = new HoldingProxy({ host: url.hostname, port: Number(url.port || 5432) });
    await proxy.start();
    url.hostname = "127.0.0.1";
    url.port = String(proxy.port);
    sql = postgres(url.toString(), { max: 1, onnotice: () => {}, connection: { search_path: test.options.schema! } });
    await sql`select 1`; // connected, and the statements below prepared once
    const store = new ThreadStore(sql);
    await store.pipelined((tx) => store.insertEvents(tx, threadId, [event(1)]), "atOnce");
  });
  afterEach(async () => {
    await sql.end({ timeout: 1 });
    await proxy.close();
    await db.close();
    await test.cleanup();
  });

  // BEGIN and COMMIT go as simple queries (their text each time); the statements were prepared above.
  const sentCommits = () => (proxy.sent.match(/commit\0/gi) ?? []).length;
  const sentBegins = () => (proxy.sent.match(/begin\0/gi) ?? []).length;

  it("'atOnce' sends BEGIN, the statements and COMMIT before any answer has come back: one round trip", async () => {
    const store = new ThreadStore(sql);
    const commitsBefore = sentCommits();
    proxy.hold = true;
    const done = store.pipelined((tx) => store.insertEvents(tx, threadId, [event(2)]), "atOnce");
    // Every answer is held: this ends only because COMMIT left without waiting for one.
    while (sentCommits() === commitsBefore) await new Promise((resolve) => setTimeout(resolve, 5));
    proxy.release();
    await done;
    expect((await db.sql`select seq from thread_events where thread_id = ${threadId} order by seq`).map((r) => Number(r.seq))).toEqual([1, 2]);
  });

  it("'awaited' sends COMMIT only once the statements are answered", async () => {
    const store = new ThreadStore(sql);
    const commitsBefore = sentCommits();
    const beginsBefore = sentBegins();
    proxy.hold = true;
    const done = store.pipelined((tx) => store.insertEvents(tx, threadId, [event(3)]), "awaited");
    while (sentBegins() === beginsBefore) await new Promise((resolve) => setTimeout(resolve, 5));
    for (let i = 0; i < 5; i++) await new Promise((resolve) => setTimeout(resolve, 5));
    expect(sentCommits(), "no COMMIT while the statement's answer is held").toBe(commitsBefore);
    proxy.release();
    await done;
    expect(sentCommits()).toBe(commitsBefore + 1);
  });

  it("a connection dropped after COMMIT went fails the transaction, and the pool goes on", async () => {
    const store = new ThreadStore(sql);
    proxy.hold = true;
    const commitsBefore = sentCommits();
    const done = store.pipelined((tx) => store.insertEvents(tx, threadId, [event(4)]), "atOnce");
    while (sentCommits() === commitsBefore) await new Promise((resolve) => setTimeout(resolve, 5));
    proxy.heldAnswers.length = 0;
    proxy.dropConnections();
    await expect(done).rejects.toBeTruthy();
    proxy.hold = false;
    // Committed or not, the client cannot tell; the next transaction gets a new connection.
    await store.pipelined((tx) => store.insertEvents(tx, threadId, [event(5)], { ifAbsent: true }), "atOnce");
    const seqs = (await db.sql`select seq from thread_events where thread_id = ${threadId} order by seq`).map((r) => Number(r.seq));
    expect(seqs).toContain(5);
  });
});
