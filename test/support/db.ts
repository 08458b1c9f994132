/**
 * Fresh databases for tests, on both backends. Postgres (when TEST_DATABASE_URL is set): a new
 * schema per test. PGlite: a new data directory per test, loaded from a migrated template made once
 * per run (pglite-seed.ts; initdb costs seconds, the migrations most of a second, loading a dump
 * about half a second).
 */
import { copyFile, mkdtemp, readdir, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { randomBytes } from "node:crypto";
import type { Sql } from "postgres";
import { openDatabase, type OpenDatabaseOptions } from "../../src/store/database.js";
import { MIGRATIONS_DIR } from "../../src/store/migrate.js";
import { makeBlankTemplate, migrateInto, pgliteSeedPaths, readTemplate } from "./pglite-seed.js";

export type Backend = "postgres" | "pglite";

export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL || undefined;

/** The backends this run covers: PGlite always, Postgres when TEST_DATABASE_URL is set. */
export const BACKENDS: Backend[] = TEST_DATABASE_URL ? ["pglite", "postgres"] : ["pglite"];

const templates: { blank?: Promise<Blob>; migrated?: Promise<Blob> } = {};

/**
 * The run's templates (made once by the global setup, pglite-seed.ts), else ones made by this
 * worker: `migrated` has every migration applied, `blank` none (for the tests of migrations).
 */
function pgliteTemplate(kind: "blank" | "migrated"): Promise<Blob> {
  const paths = pgliteSeedPaths();
  templates[kind] ??= (async () => {
    const made = readTemplate(kind === "blank" ? paths?.template : paths?.migratedTemplate);
    if (made) return made;
    const blank = await makeBlankTemplate();
    if (kind === "blank") return blank;
    const dir = await mkdtemp(path.join(os.tmpdir(), "aas-template-"));
    try {
      return await migrateInto(path.join(dir, "pglite"), blank);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  })();
  return templates[kind]!;
}

export interface TestDatabase {
  /** Options for startServer()/openDatabase(): databaseUrl + schema, or dataDir + template. */
  options: Partial<OpenDatabaseOptions> & { databaseUrl?: string };
  /** Home directory for a server using this database. */
  home: string;
  cleanup(): Promise<void>;
}

/**
 * `blank`: PGlite without the migrations applied (a Postgres schema is always empty), for the
 * tests of migrations themselves; otherwise PGlite starts migrated, as a server leaves it.
 */
export async function freshDatabase(backend: Backend, opts: { blank?: boolean } = {}): Promise<TestDatabase> {
  const home = await mkdtemp(path.join(os.tmpdir(), "aas-home-"));
  if (backend === "postgres") {
    if (!TEST_DATABASE_URL) throw new Error("TEST_DATABASE_URL is not set");
    const schema = `t_${randomBytes(6).toString("hex")}`;
    return {
      options: { databaseUrl: TEST_DATABASE_URL, schema },
      home,
      cleanup: async () => {
        const postgres = (await import("postgres")).default;
        const sql = postgres(TEST_DATABASE_URL, { max: 1, onnotice: () => {} });
        await sql`drop schema if exists ${sql(schema)} cascade`.catch(() => {});
        await sql.end();
        await rm(home, { recursive: true, force: true });
      },
    };
  }
  return {
    options: { dataDir: path.join(home, "pglite"), loadDataDir: await pgliteTemplate(opts.blank ? "blank" : "migrated") },
    home,
    cleanup: () => rm(home, { recursive: true, force: true }),
  };
}

/**
 * For upgrade tests: a fresh database migrated up to, not including, `migration` (a file name in
 * migrations/). `run` gets its sql and the names of the migrations still to apply, in order.
 */
export async function withDatabaseBefore(backend: Backend, migration: string, run: (sql: Sql, pending: string[]) => Promise<void>): Promise<void> {
  const test = await freshDatabase(backend, { blank: true });
  const before = await mkdtemp(path.join(os.tmpdir(), "aas-migrations-"));
  try {
    const files = (await readdir(MIGRATIONS_DIR)).filter((f) => f.endsWith(".sql")).sort();
    const at = files.indexOf(migration);
    if (at <= 0) throw new Error(`${migration} is not a migration after the first`);
    for (const f of files.slice(0, at)) await copyFile(path.join(MIGRATIONS_DIR, f), path.join(before, f));
    const db = await openDatabase({ ...test.options, migrationsDir: before });
    try {
      await run(db.sql as Sql, files.slice(at));
    } finally {
      await db.close();
    }
  } finally {
    await rm(before, { recursive: true, force: true });
    await test.cleanup();
  }
}
