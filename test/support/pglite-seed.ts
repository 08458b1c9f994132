/**
 * The embedded databases of a test run start from two things made once per run by the global
 * setup, instead of once per test file (each file runs in its own worker process, and PGlite's
 * initdb costs seconds of CPU — ~50 files × ~3.5 s was a large part of the suite):
 *
 *  - a blank template (a dump of an initdb'd data directory), for the tests of migrations;
 *  - the same with every migration applied, which freshDatabase("pglite") loads into each test's
 *    new data directory (opening it still runs the migrations, which then find nothing to do);
 *  - a migrated data directory that seededHome() copies for the servers the tests spawn.
 *
 * Both live in the run's temporary directory, so the teardown removes them.
 */
import { readFileSync } from "node:fs";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";

export interface PgliteSeedPaths {
  /** The blank template: a tar dump of an initdb'd data directory. */
  template: string;
  /** The blank template with every migration applied. */
  migratedTemplate: string;
  /** A home's `pglite` directory with every migration applied. */
  migrated: string;
}

/** Where the run's seeds go (under its temporary directory); undefined outside a configured run. */
export function pgliteSeedPaths(): PgliteSeedPaths | undefined {
  const run = process.env.AAS_TEST_RUN_TMPDIR;
  if (!run) return undefined;
  return {
    template: path.join(run, "pglite-template.tar"),
    migratedTemplate: path.join(run, "pglite-template-migrated.tar"),
    migrated: path.join(run, "pglite-seed", "pglite"),
  };
}

export async function makeBlankTemplate(): Promise<Blob> {
  const { PGlite } = await import("@electric-sql/pglite");
  const dir = await mkdtemp(path.join(os.tmpdir(), "aas-template-"));
  try {
    const pg = await PGlite.create(path.join(dir, "pgdata"));
    const dump = await pg.dumpDataDir("none");
    await pg.close();
    return dump;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Global setup: writes both templates and the migrated directory. */
export async function preparePgliteSeeds(paths: PgliteSeedPaths): Promise<void> {
  const template = await makeBlankTemplate();
  await writeFile(paths.template, Buffer.from(await template.arrayBuffer()));
  await mkdir(path.dirname(paths.migrated), { recursive: true });
  const migrated = await migrateInto(paths.migrated, template);
  await writeFile(paths.migratedTemplate, Buffer.from(await migrated.arrayBuffer()));
}

/** Loads `blank` into `dataDir`, applies every migration, and returns a dump of the result. */
export async function migrateInto(dataDir: string, blank: Blob): Promise<Blob> {
  const { openDatabase } = await import("../../src/store/database.js");
  const db = await openDatabase({ dataDir, loadDataDir: blank });
  try {
    return await db.dumpDataDir!();
  } finally {
    await db.close();
  }
}

/** One of the run's templates, if the global setup made it. */
export function readTemplate(file: string | undefined): Blob | undefined {
  if (!file) return undefined;
  try {
    return new Blob([readFileSync(file)]);
  } catch {
    return undefined;
  }
}
