/**
 * The server's store, opened with the server's settings. The CLI calls this before it loads the
 * server's modules, so that an embedded database starts in its thread while they load (issue 33
 * item 3: on two cores the two compete for the CPU and ready did not get shorter, bench/RESULTS.md;
 * with a core to spare they overlap); startServer calls it itself otherwise. Imports only the
 * store's own modules, for that reason.
 */
import path from "node:path";
import { unlessAborted } from "./abortable.js";
import { leaseTtlFromEnv } from "./runtime/lease-ttl.js";
import { openDatabase, type Database, type OpenDatabaseOptions } from "./store/database.js";
import { sessionNameOf } from "./store/lease-store.js";

export interface StoreSettings {
  /** postgres:// URL; absent: the embedded database under `home`. */
  databaseUrl?: string;
  home: string;
  /** Extra store options (tests: schema per test, PGlite fixtures; the CLI: its log and schema). */
  database?: Partial<OpenDatabaseOptions>;
}

/** A store whose opening began before startServer ran (the CLI's early start). */
export interface StoreOpening {
  /** The cluster's id of this process: its database sessions carry it. */
  readonly processId: string;
  readonly db: Promise<Database>;
}

/** Opens (and migrates) the store; stops at once, having closed it, when the start is aborted. */
export async function openStore(settings: StoreSettings, processId: string, signal: AbortSignal | undefined): Promise<Database> {
  signal?.throwIfAborted();
  const poolMax = Number(process.env.APP_SERVER_DB_POOL_MAX ?? 10);
  const opening = openDatabase({
    databaseUrl: settings.databaseUrl,
    dataDir: path.join(settings.home, "pglite"),
    maxConnections: Number.isSafeInteger(poolMax) && poolMax > 0 ? poolMax : 10,
    // A session stuck in a transaction ends with this process's leases (database.ts says why).
    idleInTransactionTimeoutMs: leaseTtlFromEnv(process.env),
    applicationName: sessionNameOf(processId),
    ...(process.env.APP_SERVER_PGLITE_SHARED_BUFFERS ? { pgliteSharedBuffers: process.env.APP_SERVER_PGLITE_SHARED_BUFFERS } : {}),
    ...(signal ? { signal } : {}),
    ...settings.database,
  });
  // A Postgres connection (30 s to time out against an address that does not answer) is
  // abandoned on abort; PGlite stops between its steps itself (openDatabase's signal).
  const db = settings.databaseUrl ? await unlessAborted(opening, signal, (late) => late.close()) : await opening;
  if (signal?.aborted) {
    await db.close();
    signal.throwIfAborted();
  }
  return db;
}
