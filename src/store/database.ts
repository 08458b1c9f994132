/**
 * Opens the system of record: a real Postgres through postgres.js when a URL is given, otherwise
 * embedded PGlite (data under the home directory) reached through pglite-socket, so that the
 * same postgres.js code and SQL serve both (DESIGN.md §6).
 */
import { mkdir } from "node:fs/promises";
import path from "node:path";
import postgres, { type Sql } from "postgres";
import { lockDirectory } from "./dir-lock.js";
import { runMigrations } from "./migrate.js";

export interface Database {
  readonly kind: "postgres" | "pglite";
  readonly sql: Sql;
  close(): Promise<void>;
}

export interface OpenDatabaseOptions {
  /** postgres:// URL; absent means embedded PGlite. */
  databaseUrl?: string;
  /** PGlite data directory (required when databaseUrl is absent). */
  dataDir?: string;
  /** PGlite only: start from this data-dir dump instead of running initdb (test fixtures). */
  loadDataDir?: Blob;
  /** Postgres only: use this schema (created if missing). Tests give each case its own. */
  schema?: string;
  /** Postgres pool size. */
  maxConnections?: number;
  migrate?: boolean;
}

// Rows come back camelCased (created_at_ms → createdAtMs) so records map 1:1 to TS types.
const quiet = { onnotice: () => {}, transform: { column: { from: postgres.toCamel } } };
const types = {
  // bigint columns hold millisecond timestamps and sequence numbers, all < 2^53.
  bigint: { to: 20, from: [20], serialize: (v: number) => String(v), parse: (v: string) => Number(v) },
};

export async function openDatabase(opts: OpenDatabaseOptions): Promise<Database> {
  const db = opts.databaseUrl ? await openPostgres(opts.databaseUrl, opts) : await openPglite(opts);
  if (opts.migrate !== false) {
    try {
      await runMigrations(db.sql);
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
    backoff: (retries: number) => Math.min(0.05 * 2 ** retries, 1),
    ...quiet,
    types,
    connection: opts.schema ? { search_path: opts.schema } : {},
  });
  await sql`select 1`; // fail fast on a bad URL instead of at the first request
  return { kind: "postgres", sql, close: () => sql.end({ timeout: 5 }) };
}

async function openPglite(opts: OpenDatabaseOptions): Promise<Database> {
  if (!opts.dataDir) throw new Error("embedded database needs a data directory");
  await mkdir(opts.dataDir, { recursive: true, mode: 0o700 });
  const unlock = lockDirectory(opts.dataDir);
  try {
    // Loaded lazily: the WASM module costs start-up time and memory that Postgres users never need.
    const { PGlite } = await import("@electric-sql/pglite");
    const { PGLiteSocketServer } = await import("@electric-sql/pglite-socket");
    const pgdata = path.join(opts.dataDir, "pgdata");
    const pg = await PGlite.create(pgdata, opts.loadDataDir ? { loadDataDir: opts.loadDataDir } : {});
    // PGlite is a single session: one postgres.js connection (max 1) and one spare socket slot.
    // It listens on loopback on a random port; nothing else on the machine knows the port.
    const server = new PGLiteSocketServer({ db: pg, host: "127.0.0.1", port: 0, maxConnections: 2 });
    await server.start();
    const [host, port] = server.getServerConn().split(":");
    const sql = postgres({ host, port: Number(port), user: "postgres", database: "postgres", max: 1, ...quiet, types });
    return {
      kind: "pglite",
      sql,
      close: async () => {
        await sql.end({ timeout: 5 }).catch(() => {});
        await server.stop().catch(() => {});
        await pg.close().catch(() => {});
        unlock();
      },
    };
  } catch (err) {
    unlock();
    throw err;
  }
}
