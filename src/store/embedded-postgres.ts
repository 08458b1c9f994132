/**
 * The embedded database as the server's thread sees it: PGlite runs in a worker thread
 * (pglite-worker.js) and serves the Postgres wire protocol on a Unix socket, which postgres.js
 * connects to like to any Postgres.
 *
 * - Off the event loop: PGlite executes queries synchronously in WebAssembly. In the server's
 *   thread a 300 ms ANALYZE or a slow search stopped every WebSocket meanwhile.
 * - Its start overlaps the server's: the worker compiles PGlite and opens the data directory while
 *   the server loads its modules and binds its port (issue 33 item 3).
 * - A Unix socket in the home's own directory (0700) instead of a loopback TCP port: the socket
 *   has no password, and any local user could connect to a port.
 * - Revived: a worker that dies (a WebAssembly trap, an out-of-memory abort) is started again on
 *   the same directory, which Postgres recovers like after a crash; postgres.js reconnects.
 */
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { Worker } from "node:worker_threads";
import type { DatabaseLogger } from "./database.js";

export interface EmbeddedPostgresOptions {
  /** The data directory (PGlite's `dataDir`). */
  pgdata: string;
  /** Where the socket goes: a directory only this user can enter (the home's `pglite/`). */
  socketDir: string;
  /** Postgres settings (`-c name=value` pairs), after PGlite's defaults. */
  startParams: string[];
  /** A data-directory archive to start a new directory from (PGlite's loadDataDir; tests). */
  loadDataDir?: Blob;
  /** Stops a start in progress (the worker is terminated: as safe as a kill). */
  signal?: AbortSignal;
  /** Told when the worker died and when it is being started again. */
  log?: Pick<DatabaseLogger, "warn" | "error">;
}

/** Longest Unix socket path Linux and macOS take (sun_path: 108 and 104 bytes, with the NUL). */
const MAX_SOCKET_PATH = 100;
/** Restarts of a worker that keeps dying back off up to this. */
const MAX_RESTART_DELAY_MS = 10_000;
const WORKER_FILE = new URL("./pglite-worker.js", import.meta.url);

export class EmbeddedPostgres {
  /** The Unix socket postgres.js connects to. */
  readonly socketPath: string;
  private worker: Worker;
  private closing = false;
  /** Failed or pending restarts since the thread last ran: the back-off's exponent. */
  private restartsInARow = 0;
  private failureCount = 0;
  private restartTimer: NodeJS.Timeout | null = null;
  private restarting: Promise<void> | null = null;
  private nextDumpId = 0;

  private constructor(
    private readonly opts: EmbeddedPostgresOptions,
    socketPath: string,
    private readonly ownSocketDir: string | null,
    worker: Worker,
  ) {
    this.socketPath = socketPath;
    this.worker = worker;
    this.watch(worker);
  }

  /** Starts PGlite in its thread; resolves once the socket takes connections. */
  static async start(opts: EmbeddedPostgresOptions): Promise<EmbeddedPostgres> {
    opts.signal?.throwIfAborted();
    let socketPath = path.join(opts.socketDir, ".s.PGSQL.embedded");
    let ownSocketDir: string | null = null;
    if (Buffer.byteLength(socketPath) > MAX_SOCKET_PATH) {
      // A deep home: a private directory of its own under the temp dir (mkdtemp makes it 0700).
      ownSocketDir = mkdtempSync(path.join(os.tmpdir(), "aas-pglite-"));
      socketPath = path.join(ownSocketDir, ".s.PGSQL.embedded");
    }
    try {
      const worker = await startWorker(opts, socketPath, opts.loadDataDir);
      return new EmbeddedPostgres(opts, socketPath, ownSocketDir, worker);
    } catch (err) {
      if (ownSocketDir) rmSync(ownSocketDir, { recursive: true, force: true });
      throw err;
    }
  }

  /** An archive of the data directory (PGlite's dumpDataDir, uncompressed). */
  dump(): Promise<Blob> {
    const id = this.nextDumpId++;
    const worker = this.worker;
    return new Promise<Blob>((resolve, reject) => {
      const onMessage = (msg: { type: string; id?: number; data?: Blob; error?: string }) => {
        if (msg.type !== "dump" || msg.id !== id) return;
        done();
        if (msg.data) resolve(msg.data);
        else reject(new Error(`could not dump the embedded database: ${msg.error}`));
      };
      const onExit = () => {
        done();
        reject(new Error("the embedded database stopped during a dump"));
      };
      const done = () => {
        worker.off("message", onMessage);
        worker.off("exit", onExit);
      };
      worker.on("message", onMessage);
      worker.on("exit", onExit);
      worker.postMessage({ type: "dump", id });
    });
  }

  /** Shuts PGlite down cleanly (a checkpoint) and ends its thread. */
  async close(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    if (this.restartTimer) clearTimeout(this.restartTimer);
    await this.restarting; // a revival under way finishes first, then is closed like any worker
    await closeWorker(this.worker);
    if (this.ownSocketDir) rmSync(this.ownSocketDir, { recursive: true, force: true });
  }

  /** How many times the thread died unasked (each is followed by a restart). */
  get failures(): number {
    return this.failureCount;
  }

  /** The thread PGlite runs in now (tests end it to check the revival). */
  get thread(): Worker {
    return this.worker;
  }

  private watch(worker: Worker): void {
    let failure: Error | undefined;
    worker.on("error", (err) => (failure = err));
    worker.once("exit", (code) => {
      if (this.closing || worker !== this.worker) return;
      this.failureCount++;
      this.opts.log?.error({ exitCode: code, error: failure?.message }, "the embedded database stopped: starting it again");
      this.scheduleRestart();
    });
  }

  private restart(): void {
    this.restartTimer = null;
    if (this.closing) return;
    this.restarting = startWorker({ ...this.opts, signal: undefined }, this.socketPath, undefined).then(
      (worker) => {
        this.worker = worker;
        this.restartsInARow = 0;
        this.restarting = null;
        if (this.closing) return; // close() ends it
        this.watch(worker);
        this.opts.log?.warn({}, "the embedded database is back");
      },
      (err: Error) => {
        this.restarting = null;
        if (this.closing) return;
        this.opts.log?.error({ error: err.message }, "the embedded database could not be started again");
        this.scheduleRestart();
      },
    );
  }

  private scheduleRestart(): void {
    const delayMs = Math.min(250 * 2 ** this.restartsInARow, MAX_RESTART_DELAY_MS);
    this.restartsInARow++;
    this.restartTimer = setTimeout(() => this.restart(), delayMs);
  }
}

/** Asks a worker to shut PGlite down and waits for its thread to end (terminated if it hangs). */
async function closeWorker(worker: Worker): Promise<void> {
  // threadId is -1 once the thread has ended (a worker that died and was not revived).
  if (worker.threadId === -1) return;
  const ended = new Promise<void>((resolve) => worker.once("exit", () => resolve()));
  const closed = new Promise<void>((resolve) => {
    worker.on("message", (msg: { type: string }) => msg.type === "closed" && resolve());
    void ended.then(resolve);
  });
  worker.postMessage({ type: "close" });
  await closed;
  // The thread ends by itself once its port closes; a PGlite that hangs in shutdown does not hold the process.
  const grace = setTimeout(() => void worker.terminate(), 5_000);
  await ended;
  clearTimeout(grace);
}

/** A worker whose PGlite is ready; a failure to start rejects (with the worker ended). */
function startWorker(opts: EmbeddedPostgresOptions, socketPath: string, loadDataDir: Blob | undefined): Promise<Worker> {
  const worker = new Worker(WORKER_FILE, {
    workerData: { pgdata: opts.pgdata, socketPath, startParams: opts.startParams, ...(loadDataDir ? { loadDataDir } : {}) },
    // The server's --import hooks and heap flags are not the database's business.
    execArgv: [],
    // Anything PGlite prints goes to stderr: over stdio (and ACP) the process's stdout is the
    // protocol, and a worker's console writes to it directly, past the main thread's console.
    stdout: true,
  });
  worker.stdout.pipe(process.stderr, { end: false });
  return new Promise<Worker>((resolve, reject) => {
    let failure: Error | undefined;
    const onAbort = () => void worker.terminate();
    const settle = () => {
      opts.signal?.removeEventListener("abort", onAbort);
      worker.off("message", onMessage);
      worker.off("error", onError);
      worker.off("exit", onExit);
    };
    const onMessage = (msg: { type: string }) => {
      if (msg.type !== "ready") return;
      settle();
      resolve(worker);
    };
    const onError = (err: Error) => (failure = err);
    const onExit = (code: number) => {
      settle();
      if (opts.signal?.aborted) reject(opts.signal.reason);
      else reject(failure ?? new Error(`the embedded database stopped while starting (exit code ${code})`));
    };
    worker.on("message", onMessage);
    worker.on("error", onError);
    worker.on("exit", onExit);
    opts.signal?.addEventListener("abort", onAbort, { once: true });
  });
}
