/**
 * Opens the system of record: a real Postgres through postgres.js when a URL is given, otherwise
 * embedded PGlite (data under the home directory, run in a thread of its own: embedded-postgres.ts)
 * reached over the Postgres wire protocol (pglite-wire.js), so that the same postgres.js code and SQL
 * serve both (DESIGN.md §6).
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import postgres, { type Sql } from "postgres";
import { lockDirectory } from "./dir-lock.js";
import { EmbeddedPostgres } from "./embedded-postgres.js";
import { MIGRATIONS_DIR, runMigrations } from "./migrate.js";
import { packDataDir, readSeed, SEED_FILE, unpackSeed } from "./pglite-seed.js";
import { unlessAborted } from "../abortable.js";
import { makeDirectory } from "../make-directory.js";

export interface Database {
  readonly kind: "postgres" | "pglite";
  readonly sql: Sql;
  /** PGlite: how a new data directory was made ("seed" or "initdb"); "existing" otherwise. */
  readonly pgliteStart?: "existing" | "seed" | "initdb" | "loadDataDir";
  /** PGlite only: the thread it runs in (embedded-postgres.ts). */
  readonly embedded?: EmbeddedPostgres;
  /** PGlite only: a dump of the data directory (the build writes the seed with it). */
  dumpDataDir?(): Promise<Blob>;
  close(): Promise<void>;
}

export interface DatabaseLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export interface OpenDatabaseOptions {
  /** postgres:// URL; absent means embedded PGlite. */
  databaseUrl?: string;
  /** PGlite data directory (required when databaseUrl is absent). */
  dataDir?: string;
  /** PGlite only: start from this data-dir dump instead of running initdb (test fixtures). */
  loadDataDir?: Blob;
  /**
   * PGlite only: a new data directory starts from this pre-initialised, migrated dump (default
   * dist/pglite-seed.tar.gz, written by `npm run build`); false: run initdb. Not used with
   * `migrate: false` (the seed is migrated) or with loadDataDir.
   */
  seedFile?: string | false;
  /** Where the seed's fallback (initdb) is reported; default: a process warning. */
  log?: DatabaseLogger;
  /** The migrations to apply (default migrations/ of this installation). */
  migrationsDir?: string;
  /** Postgres only: use this schema (created if missing). Tests give each case its own. */
  schema?: string;
  /** Postgres pool size. */
  maxConnections?: number;
  /**
   * Postgres only: the server ends a session of ours that sits in an open transaction this long
   * (`idle_in_transaction_session_timeout`). Our transactions hold no one waiting on anything
   * but the database, so this only happens to a process that froze or whose network path hangs
   * mid-transaction: its row locks (a thread's fence) would otherwise keep other processes from
   * taking over its threads for as long as TCP keeps the dead path open. The server passes the
   * lease TTL: locks go when the leases do.
   */
  idleInTransactionTimeoutMs?: number;
  /** Postgres only: the sessions' `application_name` (lease-store.ts sessionNameOf). */
  applicationName?: string;
  /**
   * PGlite only: its shared_buffers (PostgreSQL's `16MB`/`512kB`/`1GB` form; default 16MB).
   * PGlite's own default, 128MB, is touched at start: +110 MiB of RSS and ~30 % more start-up
   * CPU for a single-session database whose files the OS caches anyway.
   */
  pgliteSharedBuffers?: string;
  /** PGlite only: how often tables are checked for growth since their last ANALYZE (default PGLITE_ANALYZE_CHECK_MS). */
  pgliteAnalyzeCheckMs?: number;
  migrate?: boolean;
  /**
   * PGlite only: stops the opening (SIGTERM during start-up) between its steps; a PGlite still
   * starting is abandoned (the process is about to exit: as safe as a kill, which the data directory
   * survives), an initdb child is killed and its half-made directory removed.
   */
  signal?: AbortSignal;
}

const execFileAsync = promisify(execFile);

// Rows come back camelCased (created_at_ms → createdAtMs) so records map 1:1 to TS types.
const quiet = { onnotice: () => {}, transform: { column: { from: postgres.toCamel } } };
const types = {
  // bigint columns hold millisecond timestamps and sequence numbers, all < 2^53.
  bigint: { to: 20, from: [20], serialize: (v: number) => String(v), parse: (v: string) => Number(v) },
};

/**
 * postgres.js waits 3^retries/100 s (up to 20 s) between reconnects, counted over the whole pool:
 * after a short outage every query (heartbeats included) then hung for up to 20 s past the
 * database's return, long enough for other processes to judge this one dead. Retry at most every
 * second instead (issue 12, Postgres outages; an embedded database being revived likewise).
 */
const reconnectBackoff = (retries: number) => Math.min(0.05 * 2 ** retries, 1);

export async function openDatabase(opts: OpenDatabaseOptions): Promise<Database> {
  const opened = opts.databaseUrl ? await openPostgres(opts.databaseUrl, opts) : await openPglite(opts);
  // Closing twice is closing once: the CLI and startServer may both close a store opened early.
  let closing: Promise<void> | undefined;
  const db: Database = { ...opened, close: () => (closing ??= opened.close()) };
  if (opts.migrate !== false) {
    try {
      await runMigrations(db.sql, opts.migrationsDir ?? MIGRATIONS_DIR);
    } catch (err) {
      await db.close();
      throw err;
    }
  }
  return db;
}

async function openPostgres(url: string, opts: OpenDatabaseOptions): Promise<Database> {
  if (opts.schema) {
    const admin = postgres(url, { max: 1, ...quiet });
    try {
      await admin`create schema if not exists ${admin(opts.schema)}`;
    } finally {
      await admin.end();
    }
  }
  const sql = postgres(url, {
    max: opts.maxConnections ?? 10,
    // postgres.js waits 3^retries/100 s (up to 20 s) between reconnects, counted over the whole
    // pool: after a short outage every query (heartbeats included) then hung for up to 20 s past
    // the database's return, long enough for other processes to judge this one dead. Retry
    // at most every second instead (issue 12, Postgres outages).
    backoff: reconnectBackoff,
    ...quiet,
    types,
    connection: {
      ...(opts.schema ? { search_path: opts.schema } : {}),
      ...(opts.idleInTransactionTimeoutMs ? { idle_in_transaction_session_timeout: opts.idleInTransactionTimeoutMs } : {}),
      ...(opts.applicationName ? { application_name: opts.applicationName } : {}),
    },
  });
  await sql`select 1`; // fail fast on a bad URL instead of at the first request
  return { kind: "postgres", sql, close: () => sql.end({ timeout: 5 }) };
}

/** How a missing data directory is made: the caller's dump, the seed, or initdb. */
async function initialData(pgdata: string, opts: OpenDatabaseOptions): Promise<{ how: "existing" | "seed" | "initdb" | "loadDataDir"; data?: Blob }> {
  // A crash while a seed was being unpacked leaves only pgdata.unpacking (removed by the next unpack).
  if (existsSync(path.join(pgdata, "PG_VERSION"))) return { how: "existing" };
  if (opts.loadDataDir) return { how: "loadDataDir", data: opts.loadDataDir };
  const seedFile = opts.seedFile ?? SEED_FILE;
  if (seedFile === false || opts.migrate === false) return { how: "initdb" };
  const seed = await readSeed(seedFile);
  if (seed.ok) {
    // Something in a directory without PG_VERSION is not ours to replace: PGlite decides, as before.
    if ((await readdir(pgdata).catch(() => [])).length > 0) return { how: "initdb" };
    try {
      await rm(pgdata, { recursive: true, force: true });
      unpackSeed(seed.data, pgdata);
      return { how: "seed" };
    } catch (err) {
      warn(opts, { seedFile, reason: (err as Error).message }, "the PGlite seed could not be unpacked: creating the database with initdb (a few seconds, once)");
      return { how: "initdb" };
    }
  }
  warn(opts, { seedFile, reason: seed.reason }, "no usable PGlite seed: creating the database with initdb (a few seconds, once)");
  return { how: "initdb" };
}

/**
 * initdb in a short-lived child process. PGlite runs initdb in a second WASM instance, and a process
 * that ran it kept ~800 MB RSS for its whole life (closing and reopening PGlite in-process still
 * left ~650 MB: V8 does not give the old WASM memories back); the server then opens the finished
 * directory like any existing home (~300 MB). If the child cannot run, PGlite runs initdb here.
 */
async function initdbInChild(pgdata: string, opts: OpenDatabaseOptions): Promise<void> {
  const entry = createRequire(import.meta.url).resolve("@electric-sql/pglite");
  const code = `require(${JSON.stringify(entry)}).PGlite.create(${JSON.stringify(pgdata)}).then((pg) => pg.close()).then(() => process.exit(0), (e) => { process.stderr.write(String(e && e.message || e)); process.exit(1); })`;
  try {
    await execFileAsync(process.execPath, ["-e", code], { env: { ...process.env, NODE_OPTIONS: "" }, maxBuffer: 1 << 20, ...(opts.signal ? { signal: opts.signal } : {}) });
  } catch (err) {
    if (opts.signal?.aborted) {
      // Killed half-way: what it wrote would pass for a database at the next start.
      await rm(pgdata, { recursive: true, force: true });
      throw opts.signal.reason;
    }
    warn(opts, { error: (err as { stderr?: string }).stderr || (err as Error).message }, "initdb in a child process failed: running it in this process");
    await rm(pgdata, { recursive: true, force: true });
  }
}

function warn(opts: OpenDatabaseOptions, obj: object, msg: string): void {
  if (opts.log) opts.log.warn(obj, msg);
  else process.emitWarning(`${msg}: ${JSON.stringify(obj)}`);
}

export const DEFAULT_PGLITE_SHARED_BUFFERS = "16MB";

/** The configured shared_buffers, checked here: PGlite would only fail to start, without saying why. */
function sharedBuffersOf(opts: OpenDatabaseOptions): string {
  const value = (opts.pgliteSharedBuffers ?? DEFAULT_PGLITE_SHARED_BUFFERS).trim();
  const m = /^(\d+)(kB|MB|GB)$/.exec(value);
  const kb = m ? Number(m[1]) * { kB: 1, MB: 1024, GB: 1024 * 1024 }[m[2] as "kB" | "MB" | "GB"] : NaN;
  // PostgreSQL's floor is 128kB; above a few GB an embedded database makes no sense in WASM memory.
  if (!(kb >= 128 && kb <= 2 * 1024 * 1024)) {
    throw new Error(`invalid PGlite shared_buffers ${JSON.stringify(value)} (APP_SERVER_PGLITE_SHARED_BUFFERS): expected a size such as 16MB, between 128kB and 2GB`);
  }
  return value;
}

async function openPglite(opts: OpenDatabaseOptions): Promise<Database> {
  if (!opts.dataDir) throw new Error("embedded database needs a data directory");
  // Not Node's recursive mkdir: it spins forever under /proc (make-directory.ts).
  await makeDirectory(opts.dataDir, 0o700);
  const unlock = lockDirectory(opts.dataDir);
  const signal = opts.signal;
  try {
    const pgdata = path.join(opts.dataDir, "pgdata");
    // A fresh home's seed is read and decompressed (zlib, on the thread pool) before PGlite starts.
    let start = await initialData(pgdata, opts);
    signal?.throwIfAborted();
    if (start.how === "initdb") await initdbInChild(pgdata, opts);
    signal?.throwIfAborted();
    const launch = { pgdata, socketDir: opts.dataDir, startParams: ["-c", `shared_buffers=${sharedBuffersOf(opts)}`], ...(signal ? { signal } : {}), ...(opts.log ? { log: opts.log } : {}) };
    let embedded: EmbeddedPostgres;
    try {
      embedded = await EmbeddedPostgres.start({ ...launch, ...(start.data ? { loadDataDir: start.data } : {}) });
    } catch (err) {
      if (start.how !== "seed" || signal?.aborted) throw err;
      // The directory did not exist before (no PG_VERSION): what the failed load left is ours to remove.
      warn(opts, { error: (err as Error).message }, "the PGlite seed could not be loaded: creating the database with initdb (a few seconds, once)");
      await rm(pgdata, { recursive: true, force: true });
      start = { how: "initdb" };
      await initdbInChild(pgdata, opts);
      embedded = await EmbeddedPostgres.start(launch);
    }
    const sql = postgres({ path: embedded.socketPath, user: "postgres", database: "postgres", max: 1, backoff: reconnectBackoff, ...quiet, types });
    const stopAnalyzing = analyzeGrowingTables(sql, opts);
    return {
      kind: "pglite",
      sql,
      pgliteStart: start.how,
      embedded,
      dumpDataDir: () => embedded.dump(),
      close: async () => {
        stopAnalyzing();
        await sql.end({ timeout: 5 }).catch(() => {});
        await embedded.close().catch(() => {});
        unlock();
      },
    };
  } catch (err) {
    unlock();
    throw err;
  }
}

/** How often the embedded database's tables are checked for growth since their last ANALYZE. */
export const PGLITE_ANALYZE_CHECK_MS = 10_000;

/**
 * PGlite's stand-in for autovacuum's ANALYZE (issue 33 item 5). PGlite runs no autovacuum, so
 * nothing refreshed the planner's statistics while the server ran (it analyzes once, 1 s after
 * start: src/server.ts). postgres.js prepares every statement, and from its 6th execution on
 * Postgres keeps a generic plan, made from the statistics of that moment, until something
 * invalidates it: on a new home, plans made for one-page tables (seq scans of turns, items,
 * model_messages) stayed for the life of the process while the tables grew, and a steady loop of
 * thread/start, turns, fork, resume, read and list slowed 3× within 7 minutes (server CPU per loop
 * +51 %) until a restart (bench/RESULTS.md, "Issue 33 item 5").
 *
 * Every PGLITE_ANALYZE_CHECK_MS this analyzes the table of the current schema that grew most, if
 * it grew by more than 10 % + 8 pages since its last ANALYZE (autovacuum's rule is 10 % + 50
 * changed rows; size is what made the old plans wrong, and it needs no statistics collector). The
 * ANALYZE makes the cached plans that read it replan. It holds the only session meanwhile: one
 * table at a time keeps most of these stalls short (10–340 ms in the soak, under load 6–10; the
 * worst, threads with its expression indexes, 0.85 s), where all grown tables at once took
 * 0.1–0.6 s every time. Returns the stop function.
 */
function analyzeGrowingTables(sql: Sql, opts: OpenDatabaseOptions): () => void {
  let running = false;
  let stopped = false;
  const timer = setInterval(() => {
    if (running) return;
    running = true;
    void (async () => {
      const grown = await sql<{ name: string }[]>`
        select format('%I.%I', n.nspname, c.relname) as name
        from pg_class c join pg_namespace n on n.oid = c.relnamespace
        where c.relkind = 'r' and n.nspname = current_schema()
          and pg_relation_size(c.oid) / current_setting('block_size')::int > greatest(c.relpages, 0) * 1.1 + 8
        order by pg_relation_size(c.oid)::float8 / (greatest(c.relpages, 0) + 8) desc
        limit 1`;
      if (grown.length) await sql.unsafe(`analyze ${grown.map((g) => g.name).join(", ")}`);
    })()
      // Closing ends the connection under a check in progress: not worth a warning.
      .catch((err: Error) => stopped || warn(opts, { error: err.message }, "could not analyze the embedded database's grown tables"))
      .finally(() => (running = false));
  }, opts.pgliteAnalyzeCheckMs ?? PGLITE_ANALYZE_CHECK_MS);
  timer.unref();
  return () => {
    stopped = true;
    clearInterval(timer);
  };
}

/**
 * What a fresh home does not need, so that every first start unpacks and writes less (issue 33
 * item 3: 41 MB of the seed's 41 MB were unpacked before, ~9 MB now):
 *   - the template databases (template0, template1: 7 MB each). They serve CREATE DATABASE only,
 *     and an embedded server has its one database; PGlite itself opens `postgres`.
 *   - the WAL of initdb and the migrations. After a switch to a new segment and a checkpoint, the
 *     old segment is deleted (not recycled with its contents: wal_recycle off, for this session),
 *     and the new one holds a checkpoint record and zeros, which the archive leaves out.
 */
async function leaveOutOfSeed(sql: Sql): Promise<void> {
  for (const template of ["template0", "template1"]) {
    await sql.unsafe(`alter database ${template} is_template false`);
    await sql.unsafe(`drop database ${template}`);
  }
  await sql`set wal_recycle = off`;
  await sql`select pg_switch_wal()`;
  await sql`checkpoint`;
}

/**
 * A dump of a new data directory with every migration (of `migrationsDir`) applied: the seed
 * `npm run build` ships (scripts/pglite-seed.mjs). The directory is archived after PGlite closed
 * it, shut down cleanly: PGlite's own dumpDataDir archives a running database, and every fresh
 * home then started with crash recovery and an end-of-recovery checkpoint (~100–150 ms of its
 * first start, issue 33 item 3).
 */
export async function createPgliteDump(migrationsDir = MIGRATIONS_DIR): Promise<{ dump: Blob; migrations: string[] }> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "aas-seed-"));
  try {
    const db = await openDatabase({ dataDir: dir, seedFile: false, migrate: false });
    let migrations: string[];
    try {
      migrations = await runMigrations(db.sql, migrationsDir);
      await leaveOutOfSeed(db.sql);
    } finally {
      await db.close();
    }
    return { dump: new Blob([new Uint8Array(packDataDir(path.join(dir, "pgdata")))]), migrations };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
