/**
 * The fencing rules of issue 31 item 1, at the store (both backends): a process whose own
 * registration has expired takes no lease until it has renewed it, and a turn ends once — a
 * second ending (a sweeper's and the owner's, or two owners') fails and takes its transaction's
 * events with it.
 */
import { randomUUID } from "node:crypto";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { LeaseManager } from "../src/runtime/leases.js";
import { openDatabase, type Database } from "../src/store/database.js";
import { LeaseStore } from "../src/store/lease-store.js";
import { TurnAlreadyEndedError, TurnStore } from "../src/store/turn-store.js";
import { BACKENDS, freshDatabase, type TestDatabase } from "./support/db.js";

const silent = { info() {}, warn() {}, error() {}, debug() {} };

describe.each(BACKENDS)("lease fencing (%s)", (backend) => {
  let test: TestDatabase;
  let db: Database;
  let threadId: string;

  beforeEach(async () => {
    test = await freshDatabase(backend);
    db = await openDatabase(test.options);
    threadId = randomUUID();
    await db.sql`
      insert into threads (id, session_id, model_provider, model, cwd, approval_policy, sandbox, cli_version, source, created_at_ms, updated_at_ms)
      values (${threadId}, ${threadId}, 'openai', 'm', '/tmp', ${db.sql.json("never")}, 'read-only', 'test', 'cli', 0, 0)`;
  });
  afterEach(async () => {
    await db.close();
    await test.cleanup();
  });

  it("a process whose registration expired takes no lease until it renewed it", async () => {
    const store = new LeaseStore(db.sql);
    const me = randomUUID();
    await store.register(me, null, 60_000);
    // Expired, as after a database cut longer than the TTL: others may be sweeping its threads.
    await db.sql`update processes set expires_at = now() - interval '1 second' where id = ${me}`;
    expect(await store.acquire(threadId, me)).toBe("unregistered");
    expect((await db.sql`select owner_id from threads where id = ${threadId}`)[0]!.ownerId).toBeNull();

    // The manager renews its registration first, then takes the lease.
    const manager = new LeaseManager(store, { ttlMs: 60_000, nodeId: null }, silent);
    await manager.start();
    await db.sql`update processes set expires_at = now() - interval '1 second' where id = ${manager.processId}`;
    const row = await manager.acquire(threadId);
    expect(row.leaseEpoch).toBe(1);
    const [owner] = await db.sql`select owner_id, (select expires_at > now() from processes where id = ${manager.processId}) as alive from threads where id = ${threadId}`;
    expect(owner).toEqual({ ownerId: manager.processId, alive: true });
    await manager.stop();
  });

  it("a claim of a thread a live process holds with no turn asks that process to give it back, once, and takes it when it does", async () => {
    const store = new LeaseStore(db.sql);
    const owner = new LeaseManager(store, { ttlMs: 60_000, nodeId: null }, silent);
    const claimer = new LeaseManager(store, { ttlMs: 60_000, nodeId: null }, silent);
    await owner.start();
    await claimer.start();
    try {
      // The owner keeps the lease between turns (thread-leases.ts): no turn in progress.
      const held = await owner.acquire(threadId);
      const asked: string[] = [];
      claimer.onIdleHeld = (id) => {
        asked.push(id);
        // What the owner does on the request (cluster.ts "release"): gives the idle lease back.
        void owner.release(id, held.leaseEpoch);
      };
      const row = await claimer.acquire(threadId);
      expect(asked).toEqual([threadId]);
      expect(row.leaseEpoch).toBe(held.leaseEpoch + 1);
      expect((await db.sql`select owner_id from threads where id = ${threadId}`)[0]!.ownerId).toBe(claimer.processId);
    } finally {
      await owner.stop();
      await claimer.stop();
    }
  });

  it("a turn ends once: a second ending fails and its transaction stores nothing", async () => {
    const turns = new TurnStore(db.sql);
    const turnId = randomUUID();
    await turns.insertTurn(db.sql, { id: turnId, threadId, ordinal: 0, status: "inProgress", clientUserMessageId: null, startedAtMs: 1 });
    // The sweeper's ending (recovery.ts closes an orphaned turn as interrupted).
    await db.sql.begin((tx) => turns.finishTurn(tx, turnId, { status: "interrupted", stopReason: "interrupted", error: null, completedAtMs: 2 }));
    // The former owner's ending, written with an event in the same transaction, as turn-end.ts does.
    const second = db.sql.begin(async (tx) => {
      await tx`insert into thread_events (thread_id, seq, method, params, emitted_at_ms) values (${threadId}, 1, 'turn/completed', ${tx.json({ seq: 1 })}, 3)`;
      await turns.finishTurn(tx, turnId, { status: "completed", stopReason: "finalAnswer", error: null, completedAtMs: 3 });
    });
    await expect(second).rejects.toBeInstanceOf(TurnAlreadyEndedError);
    expect((await db.sql`select status, completed_at_ms from turns where id = ${turnId}`)[0]).toEqual({ status: "interrupted", completedAtMs: 2 });
    expect(await db.sql`select seq from thread_events where thread_id = ${threadId}`).toEqual([]);
  });
});
