/** The store: migrations, data that outlives a server, seq numbers across restarts, the PGlite lock. */
import { mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { randomBytes } from "node:crypto";
import postgres from "postgres";
import { describe, expect, it } from "vitest";
import { openDatabase } from "../src/store/database.js";
import { DirectoryLockedError } from "../src/store/dir-lock.js";
import { MIGRATIONS_DIR, runMigrations } from "../src/store/migrate.js";
import { TestClient } from "./support/client.js";
import { BACKENDS, freshDatabase, TEST_DATABASE_URL, type TestDatabase } from "./support/db.js";
import { startServerOn } from "./support/server.js";

const migrationFiles = async () => (await readdir(MIGRATIONS_DIR)).filter((f) => f.endsWith(".sql")).sort();

async function withDatabase<T>(db: TestDatabase, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } finally {
    await db.cleanup();
  }
}

describe.each(BACKENDS)("migrations (%s)", (backend) => {
  it("apply every migration once; running them again applies nothing", async () => {
    const test = await freshDatabase(backend, { blank: true });
    await withDatabase(test, async () => {
      const db = await openDatabase({ ...test.options, migrate: false });
      try {
        const files = await migrationFiles();
        expect(files.length).toBeGreaterThan(0);
        expect(await runMigrations(db.sql)).toEqual(files);
        expect(await runMigrations(db.sql)).toEqual([]);
        const rows = await db.sql<{ name: string }[]>`select name from schema_migrations order by name`;
        expect(rows.map((r) => r.name)).toEqual(files);
        // The schema is really there.
        const [{ n }] = await db.sql<{ n: number }[]>`select count(*)::int as n from threads`;
        expect(n).toBe(0);
      } finally {
        await db.close();
      }
      // Opening the store again (which migrates) applies nothing either.
      const again = await openDatabase({ ...test.options, loadDataDir: undefined });
      try {
        expect(await runMigrations(again.sql)).toEqual([]);
        expect((await again.sql`select name from schema_migrations`).length).toBe((await migrationFiles()).length);
      } finally {
        await again.close();
      }
    });
  });

  it("a failing migration leaves nothing behind: not its own statements, not the ones before it", async () => {
    const test = await freshDatabase(backend, { blank: true });
    const dir = await mkdtemp(path.join(os.tmpdir(), "aas-migrations-"));
    await withDatabase(test, async () => {
      await writeFile(path.join(dir, "001_ok.sql"), "create table first_table (id int);");
      await writeFile(path.join(dir, "002_bad.sql"), "create table second_table (id int);\ncreate tablez oops;");
      const db = await openDatabase({ ...test.options, migrate: false });
      try {
        await expect(runMigrations(db.sql, dir)).rejects.toThrow(/syntax error/);
        const tables = await db.sql<{ name: string }[]>`
          select table_name as name from information_schema.tables
          where table_schema = current_schema() and table_name in ('first_table', 'second_table', 'schema_migrations')`;
        expect(tables).toEqual([]);
        // Fixed, it applies both.
        await writeFile(path.join(dir, "002_bad.sql"), "create table second_table (id int);");
        expect(await runMigrations(db.sql, dir)).toEqual(["001_ok.sql", "002_bad.sql"]);
      } finally {
        await db.close();
        await rm(dir, { recursive: true, force: true });
      }
    });
  });
});

// Concurrency across connections only means something on a real server (PGlite is one session).
if (TEST_DATABASE_URL) {
  describe("migrations on Postgres, concurrently", () => {
    it("four concurrent runMigrations on one schema apply each migration exactly once", async () => {
      const schema = `t_${randomBytes(6).toString("hex")}`;
      const admin = postgres(TEST_DATABASE_URL!, { max: 1, onnotice: () => {} });
      await admin`create schema ${admin(schema)}`;
      const clients = Array.from({ length: 4 }, () => postgres(TEST_DATABASE_URL!, { max: 1, onnotice: () => {}, connection: { search_path: schema } }));
      try {
        const results = await Promise.all(clients.map((sql) => runMigrations(sql)));
        const files = await migrationFiles();
        expect(results.flat().sort()).toEqual(files);
        expect(results.filter((r) => r.length > 0)).toHaveLength(1);
        const rows = await admin`select name from ${admin(schema)}.schema_migrations order by name`;
        expect(rows.map((r) => r.name)).toEqual(files);
      } finally {
        await Promise.all(clients.map((c) => c.end()));
        await admin`drop schema if exists ${admin(schema)} cascade`;
        await admin.end();
      }
    });
  });
}

describe.each(BACKENDS)("data across a server restart (%s)", (backend) => {
  it("threads, names, archive state and settings survive a restart on the same home/schema; ephemeral threads do not", async () => {
    const test = await freshDatabase(backend);
    await withDatabase(test, async () => {
      let ts = await startServerOn(test);
      let c = await TestClient.initialized(ts.url);
      const a = (await c.request("thread/start", { cwd: "/work/a", model: "m-a", modelProvider: "anthropic", approvalPolicy: "never", sandbox: "read-only" })).thread;
      const b = (await c.request("thread/start", { cwd: "/work/b" })).thread;
      const eph = (await c.request("thread/start", { ephemeral: true })).thread;
      await c.request("thread/name/set", { threadId: a.id, name: "Survivor" });
      await c.request("thread/archive", { threadId: b.id });
      const beforeA = (await c.request("thread/read", { threadId: a.id })).thread;
      await c.close();
      await ts.close();

      ts = await startServerOn(test, {}, true);
      c = await TestClient.initialized(ts.url);
      try {
        const afterA = (await c.request("thread/read", { threadId: a.id })).thread;
        expect(afterA).toEqual({ ...beforeA, status: { type: "notLoaded" } });
        expect(afterA).toMatchObject({ name: "Survivor", cwd: "/work/a", model: "m-a", modelProvider: "anthropic" });
        expect((await c.request("thread/list", {})).data.map((t: { id: string }) => t.id)).toEqual([a.id]);
        expect((await c.request("thread/list", { archived: true })).data.map((t: { id: string }) => t.id)).toEqual([b.id]);
        const gone = await c.requestRaw("thread/read", { threadId: eph.id });
        expect(gone.error).toEqual({ code: -32600, message: `thread not found: ${eph.id}` });
      } finally {
        await c.close();
        await ts.close();
      }
    });
  });

  it("seq keeps increasing across restarts: notifications after a restart number above everything before", async () => {
    const test = await freshDatabase(backend);
    await withDatabase(test, async () => {
      let ts = await startServerOn(test);
      let c = await TestClient.initialized(ts.url);
      const id = (await c.request("thread/start", {})).thread.id;
      await c.request("thread/name/set", { threadId: id, name: "one" });
      const before = await c.waitForNotification("thread/name/updated", (p) => p.threadName === "one");
      const seqsBefore = c.notifications().map((f) => f.params.seq);
      expect(seqsBefore).toEqual([1, 2]);
      expect(before.params.seq).toBe(2);
      await c.close();
      await ts.close();

      const seen: number[] = [...seqsBefore];
      for (const round of ["two", "three"]) {
        ts = await startServerOn(test, {}, true);
        c = await TestClient.initialized(ts.url);
        try {
          await c.request("thread/name/set", { threadId: id, name: round });
          const renamed = await c.waitForNotification("thread/name/updated", (p) => p.threadName === round);
          await c.request("thread/archive", { threadId: id });
          const archived = await c.waitForNotification("thread/archived", (p) => p.threadId === id);
          await c.request("thread/unarchive", { threadId: id });
          const unarchived = await c.waitForNotification("thread/unarchived", (p) => p.threadId === id);
          for (const n of [renamed, archived, unarchived]) {
            expect(n.params.seq).toBeGreaterThan(Math.max(...seen));
            seen.push(n.params.seq);
          }
        } finally {
          await c.close();
          await ts.close();
        }
      }

      // The event log holds every recorded notification once, under the seq it was sent with.
      const db = await openDatabase({ ...test.options, loadDataDir: undefined });
      try {
        const rows = await db.sql<{ seq: number; method: string }[]>`select seq, method from thread_events where thread_id = ${id} order by seq`;
        expect(rows.map((r) => r.seq)).toEqual(seen);
        expect(rows.map((r) => r.method)).toEqual([
          "thread/started",
          "thread/name/updated",
          ...["two", "three"].flatMap(() => ["thread/name/updated", "thread/archived", "thread/unarchived"]),
        ]);
        const [thread] = await db.sql<{ seqReserved: number }[]>`select seq_reserved from threads where id = ${id}`;
        expect(thread!.seqReserved).toBeGreaterThanOrEqual(Math.max(...seen));
      } finally {
        await db.close();
      }
    });
  });
});

describe("the PGlite data directory lock", () => {
  it("refuses a second open of the same data directory in use, and allows it after close", async () => {
    const test = await freshDatabase("pglite");
    await withDatabase(test, async () => {
      const first = await openDatabase(test.options);
      try {
        const err = await openDatabase({ ...test.options, loadDataDir: undefined }).then(
          async (db) => {
            await db.close();
            return null;
          },
          (e: unknown) => e,
        );
        expect(err).toBeInstanceOf(DirectoryLockedError);
        expect((err as Error).message).toMatch(/is in use by process \d+/);
        // The first handle is unaffected.
        await first.sql`insert into schema_migrations (name, applied_at_ms) values ('lock-probe', 0)`;
        expect((await first.sql`select name from schema_migrations where name = 'lock-probe'`).length).toBe(1);
      } finally {
        await first.close();
      }
      const second = await openDatabase({ ...test.options, loadDataDir: undefined });
      try {
        expect((await second.sql`select name from schema_migrations where name = 'lock-probe'`).length).toBe(1);
      } finally {
        await second.close();
      }
    });
  });
});

describe("PGlite's shared_buffers", () => {
  it("is 16MB unless configured; a configured size is used; a bad one is refused before PGlite starts, naming the setting", async () => {
    const test = await freshDatabase("pglite");
    await withDatabase(test, async () => {
      const first = await openDatabase(test.options);
      try {
        expect((await first.sql<{ sharedBuffers: string }[]>`show shared_buffers`)[0]!.sharedBuffers).toBe("16MB");
      } finally {
        await first.close();
      }
      const second = await openDatabase({ ...test.options, loadDataDir: undefined, pgliteSharedBuffers: "48MB" });
      try {
        expect((await second.sql<{ sharedBuffers: string }[]>`show shared_buffers`)[0]!.sharedBuffers).toBe("48MB");
      } finally {
        await second.close();
      }
      for (const bad of ["lots", "16", "64kB", "3GB"]) {
        await expect(openDatabase({ ...test.options, loadDataDir: undefined, pgliteSharedBuffers: bad })).rejects.toThrow(/APP_SERVER_PGLITE_SHARED_BUFFERS/);
      }
      // Refused before anything was opened: the directory is not left locked.
      const third = await openDatabase({ ...test.options, loadDataDir: undefined });
      await third.close();
    });
  });
});
