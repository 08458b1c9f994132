/**
 * Applies migrations/*.sql in name order inside one transaction, recorded in
 * schema_migrations. A transaction-scoped advisory lock makes concurrent starters (two server
 * processes on one Postgres) apply each migration exactly once.
 */
import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { Sql } from "postgres";

export const MIGRATIONS_DIR = fileURLToPath(new URL("../../migrations/", import.meta.url));
const LOCK_KEY = 4_500_001; // any constant shared by every process of this server

export async function runMigrations(sql: Sql, dir = MIGRATIONS_DIR): Promise<string[]> {
  const files = (await readdir(dir)).filter((f) => f.endsWith(".sql")).sort();
  const applied: string[] = [];
  await sql.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(${LOCK_KEY})`;
    await tx`create table if not exists schema_migrations (name text primary key, applied_at_ms bigint not null)`;
    const done = new Set((await tx<{ name: string }[]>`select name from schema_migrations`).map((r) => r.name));
    for (const file of files) {
      if (done.has(file)) continue;
      const text = await readFile(path.join(dir, file), "utf8");
      await tx.unsafe(text);
      await tx`insert into schema_migrations (name, applied_at_ms) values (${file}, ${Date.now()})`;
      applied.push(file);
    }
  });
  return applied;
}
