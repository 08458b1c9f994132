/**
 * The pre-initialised PGlite data directory (issue 16, src/store/pglite-seed.ts): a fresh home
 * starts from the seed and has every migration; a seed older than the newest migration gets it at
 * open; a damaged or missing seed falls back to initdb with a log line (and still migrates).
 */
import { existsSync } from "node:fs";
import { copyFile, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { gzipSync } from "node:zlib";
import { afterAll, describe, expect, it } from "vitest";
import { createPgliteDump, openDatabase, type DatabaseLogger } from "../src/store/database.js";
import { MIGRATIONS_DIR } from "../src/store/migrate.js";
import { manifestFileOf, migrationsHash, packDataDir, pgliteVersion, readSeed, unpackSeed, writeSeed } from "../src/store/pglite-seed.js";
import { freshDatabase } from "./support/db.js";

const TIMEOUT = 240_000;
const tmp = await mkdtemp(path.join(os.tmpdir(), "aas-seed-test-"));
afterAll(() => rm(tmp, { recursive: true, force: true }));

const allMigrations = async () => (await readdir(MIGRATIONS_DIR)).filter((f) => f.endsWith(".sql")).sort();

/** A seed made like the build's, from `migrationsDir` (the blank test template instead of an initdb of its own). */
async function makeSeed(name: string, migrationsDir: string): Promise<string> {
  const fresh = await freshDatabase("pglite", { blank: true });
  try {
    const db = await openDatabase({ ...fresh.options, migrationsDir });
    try {
      const { names, hash } = await migrationsHash(migrationsDir);
      // The dump holds exactly these migrations (a seed "without the newest" must really lack it).
      expect((await db.sql<{ name: string }[]>`select name from schema_migrations order by name`).map((r) => r.name)).toEqual(names);
      const file = path.join(tmp, `${name}.tar.gz`);
      await writeSeed(file, await db.dumpDataDir!(), { pglite: pgliteVersion(), migrations: names, migrationsHash: hash });
      return file;
    } finally {
      await db.close();
    }
  } finally {
    await fresh.cleanup();
  }
}

function recordingLog(): DatabaseLogger & { lines: { obj: object; msg: string }[] } {
  const lines: { obj: object; msg: string }[] = [];
  return { lines, info: (obj, msg) => lines.push({ obj, msg }), warn: (obj, msg) => lines.push({ obj, msg }), error: (obj, msg) => lines.push({ obj, msg }) };
}

async function openFresh(seedFile: string, log: DatabaseLogger) {
  const dataDir = await mkdtemp(path.join(tmp, "home-"));
  const home = path.join(dataDir, "pglite");
  const db = await openDatabase({ dataDir: home, seedFile, log });
  const migrations = (await db.sql<{ name: string }[]>`select name from schema_migrations order by name`).map((r) => r.name);
  // The schema is there, not only its bookkeeping.
  expect((await db.sql<{ n: number }[]>`select count(*)::int as n from threads`)[0]!.n).toBe(0);
  return { db, migrations, home };
}

describe("PGlite seed", () => {
  it("a fresh home starts from the seed and has every migration", async () => {
    const seed = await makeSeed("full", MIGRATIONS_DIR);
    const log = recordingLog();
    const { db, migrations } = await openFresh(seed, log);
    try {
      expect(db.pgliteStart).toBe("seed");
      expect(migrations).toEqual(await allMigrations());
      expect(log.lines).toEqual([]);
    } finally {
      await db.close();
    }
  }, TIMEOUT);

  it("the build's seed (createPgliteDump) archives a stopped data directory, and a fresh home opens from it", async () => {
    const { dump, migrations } = await createPgliteDump(MIGRATIONS_DIR);
    const { names, hash } = await migrationsHash(MIGRATIONS_DIR);
    expect(migrations).toEqual(names);
    const file = path.join(tmp, "build.tar.gz");
    await writeSeed(file, dump, { pglite: pgliteVersion(), migrations, migrationsHash: hash });
    const seed = await readSeed(file);
    if (!seed.ok) throw new Error(seed.reason);
    const unpacked = path.join(tmp, "build-unpacked", "pgdata");
    await mkdir(path.dirname(unpacked));
    unpackSeed(seed.data, unpacked);
    // Archived after PGlite closed it: no server's pid file, so a fresh home needs no crash recovery.
    expect(existsSync(path.join(unpacked, "PG_VERSION"))).toBe(true);
    expect(existsSync(path.join(unpacked, "postmaster.pid"))).toBe(false);
    // Left out (issue 33 item 3): the template databases and the WAL's zeros. What a first start
    // decompresses and writes is less than one WAL segment (it was 41 MB with them).
    expect(seed.data.length).toBeLessThan(16 * 1024 * 1024);
    expect((await readdir(path.join(unpacked, "pg_wal"))).filter((f) => /^[0-9A-F]{24}$/.test(f))).toHaveLength(1);
    const log = recordingLog();
    const { db, migrations: applied, home } = await openFresh(file, log);
    try {
      expect(db.pgliteStart).toBe("seed");
      expect(applied).toEqual(await allMigrations());
      expect(log.lines).toEqual([]);
      expect((await db.sql<{ datname: string }[]>`select datname from pg_database`).map((r) => r.datname)).toEqual(["postgres"]);
      // A working database past the seed's WAL: writes, a checkpoint, and a reopen that finds them.
      await db.sql`insert into audit_log (at_ms, user_name, action) values (1, 'seed-test', 'written')`;
      await db.sql`checkpoint`;
    } finally {
      await db.close();
    }
    const again = await openDatabase({ dataDir: home, seedFile: file });
    try {
      expect(again.pgliteStart).toBe("existing");
      expect((await again.sql<{ action: string }[]>`select action from audit_log where user_name = 'seed-test'`).map((r) => r.action)).toEqual(["written"]);
    } finally {
      await again.close();
    }
  }, TIMEOUT);

  it("a seed without the newest migration: the home gets it at open", async () => {
    const files = await allMigrations();
    const older = path.join(tmp, "older-migrations");
    await mkdir(older);
    for (const f of files.slice(0, -1)) await copyFile(path.join(MIGRATIONS_DIR, f), path.join(older, f));
    const seed = await makeSeed("older", older);
    const read = await readSeed(seed);
    expect(read.ok && read.manifest.migrations).toEqual(files.slice(0, -1));
    const { db, migrations } = await openFresh(seed, recordingLog());
    try {
      expect(db.pgliteStart).toBe("seed");
      expect(migrations).toEqual(files);
    } finally {
      await db.close();
    }
  }, TIMEOUT);

  it("a damaged seed falls back to initdb with a log line, and the home is complete", async () => {
    const seed = await makeSeed("damaged", MIGRATIONS_DIR);
    // Cut the archive in half: gzip notices (its length and CRC).
    const bytes = await readFile(seed);
    await writeFile(seed, bytes.subarray(0, bytes.length >> 1));
    const log = recordingLog();
    const { db, migrations } = await openFresh(seed, log);
    try {
      expect(db.pgliteStart).toBe("initdb");
      expect(migrations).toEqual(await allMigrations());
      expect(log.lines.map((l) => l.msg)).toEqual([expect.stringMatching(/no usable PGlite seed: creating the database with initdb/)]);
      expect(JSON.stringify(log.lines[0]!.obj)).toMatch(/damaged seed/);
    } finally {
      await db.close();
    }
  }, TIMEOUT);

  it("a missing seed, a seed of another PGlite version, an archive escaping its directory: not used", async () => {
    const missing = await readSeed(path.join(tmp, "nothing.tar.gz"));
    expect(missing).toMatchObject({ ok: false, reason: expect.stringMatching(/no usable seed manifest/) });

    const other = path.join(tmp, "other.tar.gz");
    await writeFile(other, gzipSync(Buffer.alloc(1024)));
    await writeFile(manifestFileOf(other), JSON.stringify({ pglite: "0.0.1", migrations: [], migrationsHash: "" }));
    expect(await readSeed(other)).toMatchObject({ ok: false, reason: expect.stringMatching(/PGlite 0\.0\.1/) });

    // A tar entry named ../escape (checksum correct) is refused and nothing is left behind.
    const header = Buffer.alloc(512);
    header.write("../escape", 0);
    header.write("0000600\0", 100);
    header.write("00000000000\0", 124);
    header.write("0", 156);
    header.write("ustar\0", 257);
    let sum = 0;
    for (let i = 0; i < 512; i++) sum += i >= 148 && i < 156 ? 32 : header[i]!;
    header.write(sum.toString(8).padStart(6, "0") + "\0 ", 148);
    const target = path.join(tmp, "escape-test", "pgdata");
    await mkdir(path.dirname(target));
    expect(() => unpackSeed(Buffer.concat([header, Buffer.alloc(1024)]), target)).toThrow(/outside the directory/);
    expect(await readdir(path.dirname(target))).toEqual([]);
  });

  it("unpacking keeps every byte: files with zero pages (written as holes), trailing zeros, a short last page, empty files, nested directories", async () => {
    const page = (fill: number) => Buffer.alloc(8192, fill);
    const files: Record<string, Buffer> = {
      "base/5/1249": Buffer.concat([page(1), page(0), page(0), page(2), Buffer.from("tail")]),
      "pg_wal/000000010000000000000001": Buffer.concat([page(7), Buffer.alloc(5 * 8192)]), // zeros to the end
      "global/zeros": Buffer.alloc(3 * 8192 + 100),
      "PG_VERSION": Buffer.from("17\n"),
      "postmaster.opts": Buffer.alloc(0),
    };
    const entry = (name: string, data: Buffer, type: "0" | "5") => {
      const header = Buffer.alloc(512);
      header.write(name, 0);
      header.write(type === "5" ? "0000700\0" : "0000600\0", 100);
      header.write(data.length.toString(8).padStart(11, "0") + "\0", 124);
      header.write(type, 156);
      header.write("ustar\0", 257);
      let sum = 0;
      for (let i = 0; i < 512; i++) sum += i >= 148 && i < 156 ? 32 : header[i]!;
      header.write(sum.toString(8).padStart(6, "0") + "\0 ", 148);
      return Buffer.concat([header, data, Buffer.alloc((512 - (data.length % 512)) % 512)]);
    };
    const tar = Buffer.concat([
      entry("base/", Buffer.alloc(0), "5"),
      entry("base/5/", Buffer.alloc(0), "5"),
      ...Object.entries(files).map(([name, data]) => entry(name, data, "0")),
      Buffer.alloc(1024),
    ]);
    const target = path.join(tmp, "sparse-test", "pgdata");
    await mkdir(path.dirname(target));
    unpackSeed(tar, target);
    for (const [name, data] of Object.entries(files)) expect((await readFile(path.join(target, name))).equals(data), name).toBe(true);

    // packDataDir's archive of the same files: zero tails left out (a pax header gives the
    // length), every byte back after unpacking.
    const packed = packDataDir(target);
    expect(packed.length).toBeLessThan(tar.length);
    const again = path.join(tmp, "sparse-test", "again");
    unpackSeed(packed, again);
    for (const [name, data] of Object.entries(files)) expect((await readFile(path.join(again, name))).equals(data), name).toBe(true);
  });

  it("a pax header that is malformed or states a length below the stored bytes is refused, and nothing is left behind", async () => {
    const dir = path.join(tmp, "pax-src");
    await mkdir(path.join(dir, "pg_wal"), { recursive: true });
    await writeFile(path.join(dir, "pg_wal", "seg"), Buffer.concat([Buffer.alloc(100, 9), Buffer.alloc(8192 * 4)]));
    const good = packDataDir(dir);
    const text = good.toString("latin1");
    const record = /(\d+) AAS\.size=(\d+)\n/.exec(text)!;
    expect(Number(record[2])).toBe(100 + 8192 * 4);
    // Same-length edits keep the tar headers valid: only the pax record is wrong.
    const shorter = Buffer.from(text.replace(record[0], `${record[1]} AAS.size=${"9".padStart(record[2]!.length, "0")}\n`), "latin1");
    const garbled = Buffer.from(text.replace(record[0], "x".repeat(record[0].length)), "latin1");
    for (const [bad, message] of [
      [shorter, /shorter than the stored 100 bytes/],
      [garbled, /bad pax header record/],
    ] as const) {
      const target = path.join(tmp, "pax-test", "pgdata");
      await mkdir(path.dirname(target), { recursive: true });
      expect(() => unpackSeed(bad, target)).toThrow(message);
      expect(await readdir(path.dirname(target))).toEqual([]);
    }
  });
});
