/**
 * `app-server serve --workers N|auto` (issue 16): more than one core. A primary process forks N
 * workers with node:cluster; each worker is a complete server process (its own database pool,
 * runtime and provider streams) and they share the listening socket (the primary accepts and
 * hands connections out round-robin). Workers cooperate exactly as separate `serve` processes on
 * one PostgreSQL do (issue 12): a turn runs on the process its client reached, under that
 * thread's lease, and clients of the thread on other workers get its events through NOTIFY
 * fan-out. Hence PostgreSQL only: embedded PGlite belongs to one process.
 *
 * Processes rather than worker threads owning the provider streams: every delta would otherwise
 * cross a thread boundary (postMessage: structured clone plus a wake-up of the receiving event
 * loop) before the owning thread could write it to its sockets — the cost the issue asks to
 * remove. bench/worker-threads-delta.ts measures it; bench/RESULTS.md has the numbers.
 *
 * The primary serves nothing itself: it starts the workers, restarts one that dies (bounded),
 * forwards SIGTERM/SIGINT for a graceful stop, and exits non-zero when workers cannot start.
 */
import cluster, { type Worker } from "node:cluster";
import type { Logger } from "./log.js";

/** Restarts allowed within RESTART_WINDOW_MS before the primary gives up (a crash loop). */
export const MAX_RESTARTS = 5;
export const RESTART_WINDOW_MS = 60_000;
/** A stopping worker that takes longer is killed (its turns are then recovered by lease). */
const STOP_TIMEOUT_MS = 30_000;

interface ReadyMessage {
  type: "app-server:ready";
  url: string;
}

const isReady = (m: unknown): m is ReadyMessage => typeof m === "object" && m !== null && (m as ReadyMessage).type === "app-server:ready";

export const isWorkerProcess = (): boolean => cluster.isWorker;

/** Worker side: tell the primary this worker serves (after its store and cluster links are up). */
export function notifyReady(url: string): void {
  process.send?.({ type: "app-server:ready", url } satisfies ReadyMessage);
}

/** Worker side: a primary that went away (killed) leaves no orphans: the worker stops too. */
export function stopWhenPrimaryGone(stop: (reason: string) => void): void {
  process.once("disconnect", () => stop("primary process gone"));
}

/** Primary side: runs `count` workers until SIGTERM/SIGINT; resolves with the exit code. */
export function runPrimary(count: number, log: Logger): Promise<number> {
  const workers = new Map<number, { worker: Worker; index: number; ready: boolean }>();
  const restarts: number[] = [];
  let stopping = false;
  let started = false;
  let exitCode = 0;
  let resolveDone!: (code: number) => void;
  const done = new Promise<number>((r) => (resolveDone = r));

  const fork = (index: number) => {
    // The worker runs this same command line (cluster re-executes process.argv); APP_SERVER_WORKER
    // numbers it in its log lines.
    const worker = cluster.fork({ APP_SERVER_WORKER: String(index) });
    workers.set(worker.id, { worker, index, ready: false });
    worker.on("message", (m: unknown) => {
      if (!isReady(m)) return;
      const w = workers.get(worker.id);
      if (!w) return;
      w.ready = true;
      log.info({ worker: index, workerPid: worker.process.pid }, "worker ready");
      if (!started && [...workers.values()].filter((x) => x.ready).length === count) {
        started = true;
        log.info({ url: m.url, workers: count }, "listening");
      }
    });
  };

  const stopAll = (reason: string, code: number) => {
    if (stopping) return;
    stopping = true;
    exitCode = code;
    log.info({ reason, workers: workers.size }, "shutting down");
    if (workers.size === 0) return resolveDone(exitCode);
    for (const { worker } of workers.values()) {
      worker.process.kill("SIGTERM");
      const timer = setTimeout(() => worker.process.kill("SIGKILL"), STOP_TIMEOUT_MS);
      timer.unref();
      worker.once("exit", () => clearTimeout(timer));
    }
  };

  cluster.on("exit", (worker, code, signal) => {
    const w = workers.get(worker.id);
    workers.delete(worker.id);
    if (!w) return;
    if (stopping) {
      // A worker that could not stop cleanly makes the whole stop unclean.
      if (code !== 0 && exitCode === 0) exitCode = 1;
      log.info({ worker: w.index, workerPid: worker.process.pid, code, signal }, "worker stopped");
      if (workers.size === 0) {
        log.info({}, "stopped");
        resolveDone(exitCode);
      }
      return;
    }
    if (!w.ready && !started) {
      // A worker that dies before it ever served: configuration or database problem, which the
      // others would hit too (its own log lines say what failed).
      log.error({ worker: w.index, workerPid: worker.process.pid, code, signal }, "a worker could not start");
      stopAll("a worker could not start", 1);
      return;
    }
    const now = Date.now();
    while (restarts.length > 0 && now - restarts[0]! > RESTART_WINDOW_MS) restarts.shift();
    if (restarts.length >= MAX_RESTARTS) {
      log.error({ worker: w.index, workerPid: worker.process.pid, code, signal, restarts: restarts.length, windowMs: RESTART_WINDOW_MS }, "worker exited again: too many restarts, stopping");
      stopAll("too many worker restarts", 1);
      return;
    }
    restarts.push(now);
    log.warn({ worker: w.index, workerPid: worker.process.pid, code, signal, restart: restarts.length, of: MAX_RESTARTS }, "worker exited unexpectedly: restarting it");
    fork(w.index);
  });

  process.once("SIGTERM", () => stopAll("SIGTERM", 0));
  process.once("SIGINT", () => stopAll("SIGINT", 0));
  log.info({ workers: count }, "starting workers");
  for (let i = 1; i <= count; i++) fork(i);
  return done;
}
