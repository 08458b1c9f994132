/**
 * Fresh databases for tests, on both backends. Postgres (when TEST_DATABASE_URL is set): a new
 * schema per test. PGlite: a new data directory per test, loaded from a blank template made once
 * per run (pglite-seed.ts; initdb costs seconds, loading a dump about half a second).
 */
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { randomBytes } from "node:crypto";
import type { OpenDatabaseOptions } from "../../src/store/database.js";
import { makeBlankTemplate, pgliteSeedPaths, readBlankTemplate } from "./pglite-seed.js";

export type Backend = "postgres" | "pglite";

export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL || undefined;

/** The backends this run covers: PGlite always, Postgres when TEST_DATABASE_URL is set. */
export const BACKENDS: Backend[] = TEST_DATABASE_URL ? ["pglite", "postgres"] : ["pglite"];

let template: Promise<Blob> | undefined;

/** The run's blank template (made once by the global setup), else one made by this worker. */
async function pgliteTemplate(): Promise<Blob> {
  template ??= (async () => readBlankTemplate(pgliteSeedPaths()) ?? (await makeBlankTemplate()))();
  return template;
}

export interface TestDatabase {
  /** Options for startServer()/openDatabase(): databaseUrl + schema, or dataDir + template. */
  options: Partial<OpenDatabaseOptions> & { databaseUrl?: string };
  /** Home directory for a server using this database. */
  home: string;
  cleanup(): Promise<void>;
}

export async function freshDatabase(backend: Backend): Promise<TestDatabase> {
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
    options: { dataDir: path.join(home, "pglite"), loadDataDir: await pgliteTemplate() },
    home,
    cleanup: () => rm(home, { recursive: true, force: true }),
  };
}
