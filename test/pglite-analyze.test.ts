/**
 * Issue 33 item 5: PGlite has no autovacuum, and a prepared statement keeps the generic plan it
 * got while its tables were small. The embedded database analyzes tables that grew, which
 * refreshes their statistics and makes cached plans replan.
 */
import { describe, expect, it } from "vitest";
import { openDatabase } from "../src/store/database.js";
import { eventually } from "./support/cluster.js";
import { freshDatabase } from "./support/db.js";

describe("PGlite: tables that grew are analyzed", () => {
  it("a grown table gets statistics, and a statement planned while it was small replans", async () => {
    const test = await freshDatabase("pglite");
    const db = await openDatabase({ ...test.options, migrate: false, pgliteAnalyzeCheckMs: 50 });
    try {
      const { sql } = db;
      await sql`create table grow (id int primary key, k text not null, v text not null)`;
      await sql`create index grow_by_k on grow (k)`;
      // As on a new home: the server's ANALYZE after start sees a few rows.
      await sql`insert into grow values (1, 'k1', 'v'), (2, 'k2', 'v')`;
      await sql`analyze grow`;
      // PGlite is one session: a statement PREPAREd here stays for the next ones (as postgres.js's do).
      await sql.unsafe("prepare by_k(text) as select * from grow where k = $1");
      // From the 6th execution on, Postgres keeps a generic plan: a seq scan of the one page.
      for (let i = 0; i < 6; i++) await sql.unsafe("execute by_k('x')");
      expect((await sql.unsafe<Record<string, string>[]>("explain execute by_k('k7')")).map((r) => Object.values(r)[0]).join("\n")).toMatch(/Seq Scan/);
      await sql`insert into grow select g, 'k' || (g % 5000), repeat('v', 100) from generate_series(3, 20000) g`;
      const [stats] = await eventually(async () => {
        const rows = await sql<{ reltuples: number }[]>`select reltuples::float8 as reltuples from pg_class where relname = 'grow'`;
        return rows[0]!.reltuples > 10000 ? rows : null;
      }, 400, 50, "an ANALYZE of the grown table");
      expect(stats!.reltuples).toBeGreaterThan(10000);
      // 4 of 20 000 rows match: replanned with the new statistics, the index.
      const plan = (await sql.unsafe<Record<string, string>[]>("explain execute by_k('k7')")).map((r) => Object.values(r)[0]).join("\n");
      expect(plan).toMatch(/Index Scan|Bitmap Index Scan/);
      expect(plan).not.toMatch(/Seq Scan/);
    } finally {
      await db.close();
      await test.cleanup();
    }
  });
});
