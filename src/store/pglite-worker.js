// @ts-check
/**
 * The embedded database's thread (store/embedded-postgres.ts starts it): PGlite and the server
 * that speaks the Postgres wire protocol for it (pglite-wire.js), on a Unix socket in the home's
 * 0700 directory. PGlite runs Postgres in WebAssembly, synchronously: on the server's
 * own thread every query, ANALYZE and checkpoint stopped all sockets while it ran, and its start
 * (~400 ms) could not overlap with the server's own (issue 33 items 3 and 5).
 *
 * Plain JavaScript, importing only PGlite and its sibling: the same file runs from src/ (tests),
 * dist/ and under the bundle, with nothing to compile.
 *
 * workerData: { pgdata, socketPath, startParams: string[], loadDataDir?: Blob }.
 * Messages in: { type: "dump", id } → { type: "dump", id, data: Blob }; { type: "close" } →
 * { type: "closed" }, after which the thread ends. Out: { type: "ready" } once clients can connect.
 * A failure to start is thrown (the parent's "error" event), and so is PGlite throwing while it
 * runs (a trap or an abort): the thread ends, and the parent starts it again.
 */
import { chmodSync, rmSync } from "node:fs";
import { parentPort, workerData } from "node:worker_threads";
import { PgliteWireServer } from "./pglite-wire.js";

const { PGlite } = await import("@electric-sql/pglite");
const port = /** @type {import("node:worker_threads").MessagePort} */ (parentPort);

const pg = await PGlite.create(workerData.pgdata, {
  startParams: [...PGlite.defaultStartParams, ...workerData.startParams],
  ...(workerData.loadDataDir ? { loadDataDir: workerData.loadDataDir } : {}),
});
// A socket file left by a process that was killed: the home's lock (dir-lock.ts) says nobody else uses it.
rmSync(workerData.socketPath, { force: true });
// One postgres.js connection and one spare slot: PGlite is a single session.
const server = new PgliteWireServer(pg, {
  maxConnections: 2,
  onBroken: (err) => {
    // Thrown from a timer, so it ends this thread: a PGlite that trapped cannot be trusted again.
    setImmediate(() => {
      throw err;
    });
  },
});
await server.listen(workerData.socketPath);
// Only this user may connect (the directory is 0700 too): the protocol asks for no password.
chmodSync(workerData.socketPath, 0o600);
port.postMessage({ type: "ready" });

port.on("message", async (msg) => {
  if (msg.type === "dump") {
    try {
      port.postMessage({ type: "dump", id: msg.id, data: await pg.dumpDataDir("none") });
    } catch (err) {
      port.postMessage({ type: "dump", id: msg.id, error: err instanceof Error ? err.message : String(err) });
    }
  } else if (msg.type === "close") {
    await server.close();
    await pg.close().catch(() => {});
    rmSync(workerData.socketPath, { force: true });
    port.postMessage({ type: "closed" });
    port.close();
  }
});
