/**
 * Side writes (src/store/side-writes.ts), on both backends: an audit row rides the next
 * transaction that boards it and commits in it (same transaction id), a carrier that fails loses
 * none of its riders, a rider that fails costs its carrier nothing and only itself, and rows keep
 * the order they were added in. The wait is an hour unless a test is about it, so a write can only
 * be in the database because it rode or was flushed.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { openDatabase, type Database } from "../src/store/database.js";
import { AuditStore, type NewAuditEntry } from "../src/store/audit-store.js";
import { SideWrites } from "../src/store/side-writes.js";
import { inIssueOrder } from "../src/store/transaction.js";
import { BACKENDS, freshDatabase, type TestDatabase } from "./support/db.js";

const HOUR = 3_600_000;

const row = (action: string): NewAuditEntry => ({
  userId: "u1",
  userName: "ada",
  admin: false,
  action,
  threadId: null,
  detail: {},
  connection: null,
  remote: null,
  client: null,
});

describe.each(BACKENDS)("side writes (%s)", (backend) => {
  let test: TestDatabase;
  let db: Database;
  let audit: AuditStore;

  beforeEach(async () => {
    test = await freshDatabase(backend);
    db = await openDatabase(test.options);
    audit = new AuditStore(db.sql);
  });
  afterEach(async () => {
    await db.close();
    await test.cleanup();
  });

  const actions = async () => (await db.sql<{ action: string }[]>`select action from audit_log order by id`).map((r) => r.action);

  it("a waiting write commits inside the next transaction that boards it", async () => {
    const writes = new SideWrites(db.sql, HOUR);
    const written = writes.add((q) => audit.add(row("thread.created"), q));
    expect(await actions()).toEqual([]);

    await db.sql.begin(async (tx) => {
      const ride = writes.board(tx);
      expect(ride).not.toBeNull();
      await tx`insert into audit_log (at_ms, user_name, admin, action, detail) values (0, 'carrier', false, 'carrier.own', '{}')`;
      await inIssueOrder(ride!.statements);
      ride!.landed();
    });
    await written;
    // One transaction wrote both rows: the carrier's and the rider.
    const xids = await db.sql<{ action: string; xid: string }[]>`select action, xmin::text as xid from audit_log order by id`;
    expect(xids.map((r) => r.action).sort()).toEqual(["carrier.own", "thread.created"]);
    expect(new Set(xids.map((r) => r.xid)).size).toBe(1);
    // Nothing is left to board.
    await db.sql.begin(async (tx) => expect(writes.board(tx)).toBeNull());
  });

  it("the riders of a carrier that rolls back commit alone, once", async () => {
    const writes = new SideWrites(db.sql, HOUR);
    const written = [writes.add((q) => audit.add(row("a"), q)), writes.add((q) => audit.add(row("b"), q))];
    let ride: ReturnType<SideWrites["board"]> = null;
    await expect(
      db.sql.begin(async (tx) => {
        ride = writes.board(tx);
        await inIssueOrder(ride!.statements);
        throw new Error("the carrier's own failure");
      }),
    ).rejects.toThrow("the carrier's own failure");
    ride!.missed();
    await Promise.all(written);
    expect(await actions()).toEqual(["a", "b"]);
  });

  it("a rider that fails is told to its carrier, which commits without it; the other riders are written", async () => {
    const writes = new SideWrites(db.sql, HOUR);
    const good = writes.add((q) => audit.add(row("good"), q));
    // Violates audit_log's not-null action: fails in SQL, as a real bad write would.
    const bad = writes.add((q) => audit.add({ ...row("x"), action: null as unknown as string }, q));
    const later = writes.add((q) => audit.add(row("later"), q));

    const carrier = async (board: boolean) => {
      const boarded: { ride: ReturnType<SideWrites["board"]> } = { ride: null };
      try {
        await db.sql.begin(async (tx) => {
          const own = tx`insert into audit_log (at_ms, user_name, admin, action, detail) values (0, 'carrier', false, 'carrier.own', '{}')`;
          boarded.ride = board ? writes.board(tx) : null;
          await inIssueOrder([own, ...(boarded.ride?.statements ?? [])]);
        });
        boarded.ride?.landed();
        return "committed";
      } catch (err) {
        boarded.ride?.missed();
        return boarded.ride?.caused(err) ? "rider failed" : "own failure";
      }
    };
    expect(await carrier(true)).toBe("rider failed");
    // What the event log does then: the same transaction again, without riders.
    expect(await carrier(false)).toBe("committed");

    await expect(bad).rejects.toThrow(/action/);
    await good;
    await later;
    // The riders went alone while the carrier was tried again: either may have committed first.
    expect((await actions()).sort()).toEqual(["carrier.own", "good", "later"]);
  });

  it("a carrier's own failure is not blamed on its riders", async () => {
    const writes = new SideWrites(db.sql, HOUR);
    const written = writes.add((q) => audit.add(row("rider"), q));
    const ride: { it: ReturnType<SideWrites["board"]> } = { it: null };
    const err = await db.sql
      .begin(async (tx) => {
        const own = tx`insert into no_such_table values (1)`;
        ride.it = writes.board(tx);
        await inIssueOrder([own, ...ride.it!.statements]);
      })
      .catch((e: unknown) => e);
    expect(ride.it!.caused(err)).toBe(false);
    ride.it!.missed();
    await written;
    expect(await actions()).toEqual(["rider"]);
  });

  it("one batch is under way at a time, and rows keep the order they were added in", async () => {
    const writes = new SideWrites(db.sql, HOUR);
    const first = writes.add((q) => audit.add(row("1"), q));
    const tx1 = db.sql.begin(async (tx) => {
      const ride = writes.board(tx)!;
      // Added while the first batch is under way: they wait for it.
      const second = writes.add((q) => audit.add(row("2"), q));
      const third = writes.add((q) => audit.add(row("3"), q));
      // No other transaction takes them meanwhile (asked on this one: PGlite has one connection).
      expect(writes.board(tx)).toBeNull();
      await inIssueOrder(ride.statements);
      return { ride, rest: [second, third] };
    });
    const { ride, rest } = await tx1;
    ride.landed();
    await first;
    // Nothing comes along within the (hour-long) wait: flush sends them now, in one transaction.
    await writes.flush();
    await Promise.all(rest);
    const rows = await db.sql<{ action: string; xid: string }[]>`select action, xmin::text as xid from audit_log order by id`;
    expect(rows.map((r) => r.action)).toEqual(["1", "2", "3"]);
    expect(rows[1]!.xid).toBe(rows[2]!.xid);
    expect(rows[0]!.xid).not.toBe(rows[1]!.xid);
  });

  it("with no transaction coming, a write commits alone once its wait is over", async () => {
    const writes = new SideWrites(db.sql, 20);
    await writes.add((q) => audit.add(row("quiet"), q));
    expect(await actions()).toEqual(["quiet"]);
    // flush with nothing waiting resolves at once.
    await writes.flush();
  });
});
