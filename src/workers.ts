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
 *
 * GET /metrics reports the whole server (a scrape reaches one worker, chosen by the primary's
 * round robin). The worker that got it sends its own snapshot to the primary and waits; the
 * primary asks every other ready worker for theirs (each wait bounded by
 * APP_SERVER_METRICS_WORKER_TIMEOUT_MS, default 3 s; a worker that exits is not waited for),
 * aggregates them with prom-client's AggregatorRegistry and sends the text back. Not prom-client's clusterMetrics(): it is all-or-nothing (one slow worker fails the
 * whole scrape after a fixed 5 s, and an error reply leaves the request behind), and it would
 * answer in the primary, which serves no HTTP. Here, per worker:
 * - it answered: its numbers are used, and remembered (IPC keeps each worker's messages in order,
 *   so the remembered answer is always its latest);
 * - it did not answer in time (or is still starting): its last answer stands in for it, the scrape
 *   says so (app_server_worker_metrics_up{worker} 0) and the primary logs it. Counters stay
 *   monotonic (a stale value is never above a fresh one); its gauges are as old as that answer.
 * - it exited: its last answer's counters and histograms are kept (retired) and added to every
 *   later scrape, so a crash and restart do not make totals go backwards (Prometheus would read
 *   that as a counter reset and count the survivors' totals again in rate()). What it counted
 *   after its last answer is lost: a crash loses at most one scrape interval of that worker.
 */
import cluster, { type Worker } from "node:cluster";
import type { Logger } from "./log.js";
import { cumulativeOnly, mergeSnapshots, renderSnapshots, workersUpSnapshot, type Metrics, type MetricsSnapshot } from "./metrics.js";
import { listeningBanner } from "./playground-address.js";

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

/** How long the primary waits for each worker's metrics in a scrape (APP_SERVER_METRICS_WORKER_TIMEOUT_MS). */
export const DEFAULT_METRICS_TIMEOUT_MS = 3000;
/** A worker waits this much longer for the primary's answer than the primary waits for workers. */
const METRICS_PRIMARY_MARGIN_MS = 5000;

export function metricsTimeoutMs(env: NodeJS.ProcessEnv): number {
  const n = Number(env.APP_SERVER_METRICS_WORKER_TIMEOUT_MS);
  return Number.isSafeInteger(n) && n > 0 ? n : DEFAULT_METRICS_TIMEOUT_MS;
}

/** Worker → primary: a scrape arrived here; aggregate with everyone else's. */
interface ScrapeMessage {
  type: "app-server:metrics-scrape";
  id: number;
  own: MetricsSnapshot;
}
/** Primary → worker: the scrape's text (or why there is none). */
interface ScrapedMessage {
  type: "app-server:metrics-scraped";
  id: number;
  text?: string;
  error?: string;
}
/** Primary → worker: send your snapshot. */
interface AskMessage {
  type: "app-server:metrics-ask";
  id: number;
}
/** Worker → primary: my snapshot. */
interface AnswerMessage {
  type: "app-server:metrics-answer";
  id: number;
  metrics?: MetricsSnapshot;
  error?: string;
}
const isMessage =
  <T extends { type: string }>(type: T["type"]) =>
  (m: unknown): m is T =>
    typeof m === "object" && m !== null && (m as T).type === type;
const isScrape = isMessage<ScrapeMessage>("app-server:metrics-scrape");
const isScraped = isMessage<ScrapedMessage>("app-server:metrics-scraped");
const isAsk = isMessage<AskMessage>("app-server:metrics-ask");
const isAnswer = isMessage<AnswerMessage>("app-server:metrics-answer");

export const isWorkerProcess = (): boolean => cluster.isWorker;

/**
 * Worker side: answers the primary's requests for this worker's metrics, and returns what GET
 * /metrics serves here — the whole server's metrics, aggregated by the primary. A primary that
 * does not answer within its own bound plus a margin fails the scrape (500) rather than serve
 * this worker's numbers alone as if they were the server's.
 */
export function clusterMetrics(metrics: Metrics, env: NodeJS.ProcessEnv = process.env): () => Promise<string> {
  const waiting = new Map<number, (reply: ScrapedMessage | Error) => void>();
  let nextId = 0;
  const send = (message: unknown, onError: (err: Error) => void) => {
    try {
      process.send!(message, undefined, {}, (err: Error | null) => err && onError(err));
    } catch (err) {
      onError(err as Error);
    }
  };
  process.on("message", (m: unknown) => {
    if (isAsk(m)) {
      metrics.snapshot().then(
        (snapshot) => send({ type: "app-server:metrics-answer", id: m.id, metrics: snapshot } satisfies AnswerMessage, () => {}),
        (err: unknown) => send({ type: "app-server:metrics-answer", id: m.id, error: String(err) } satisfies AnswerMessage, () => {}),
      );
    } else if (isScraped(m)) waiting.get(m.id)?.(m);
  });
  const boundMs = metricsTimeoutMs(env) + METRICS_PRIMARY_MARGIN_MS;
  return async () => {
    const id = ++nextId;
    const own = await metrics.snapshot();
    return new Promise<string>((resolve, reject) => {
      const settle = (reply: ScrapedMessage | Error) => {
        if (!waiting.delete(id)) return;
        clearTimeout(timer);
        if (reply instanceof Error) reject(reply);
        else if (reply.text !== undefined) resolve(reply.text);
        else reject(new Error(`the primary process could not aggregate the workers' metrics: ${reply.error ?? "no reason given"}`));
      };
      const timer = setTimeout(() => settle(new Error(`the primary process did not answer the metrics request within ${boundMs} ms`)), boundMs);
      waiting.set(id, settle);
      send({ type: "app-server:metrics-scrape", id, own } satisfies ScrapeMessage, (err) => settle(new Error(`could not ask the primary process for the workers' metrics: ${err.message}`)));
    });
  };
}

interface WorkerEntry {
  worker: Worker;
  index: number;
  ready: boolean;
}

/** Primary side: every worker's last metrics, the retired workers' totals, and the scrapes in flight. */
class ServerMetrics {
  /** Last snapshot of each live worker, by cluster worker id. */
  private readonly last = new Map<number, MetricsSnapshot>();
  /** Counters and histograms of workers that exited (compacted into one snapshot when idle). */
  private readonly retired: MetricsSnapshot[] = [];
  private compacting = false;
  /** Asks waiting for a worker's answer, by worker id then ask id. */
  private readonly asks = new Map<number, Map<number, (answer: MetricsSnapshot | undefined, reason: string) => void>>();
  private nextAsk = 0;

  constructor(
    private readonly workers: Map<number, WorkerEntry>,
    private readonly timeoutMs: number,
    private readonly log: Logger,
  ) {}

  /** A scrape that reached worker `from`, which sent its own snapshot: the whole server's text. */
  async scrape(from: number, own: MetricsSnapshot): Promise<string> {
    if (this.workers.has(from)) this.last.set(from, own);
    const others = [...this.workers.values()].filter((w) => w.worker.id !== from);
    const answered = new Set<number>([from]);
    await Promise.all(
      others.map(async (w) => {
        if (!w.ready) return; // starting: no connections or turns yet, and maybe not listening for asks
        const reason = await this.ask(w);
        if (reason === null) answered.add(w.worker.id);
        else this.log.warn({ worker: w.index, workerPid: w.worker.process.pid, reason, timeoutMs: this.timeoutMs }, "a worker's metrics are missing from a scrape: its last numbers were used");
      }),
    );
    // Read after every ask settled, in one synchronous step: a worker that exited meanwhile is in
    // `retired` (exited() moved it there), not in both or neither.
    const live = [...this.workers.values()].sort((a, b) => a.index - b.index);
    const parts = live.map((w) => this.last.get(w.worker.id)).filter((s): s is MetricsSnapshot => s !== undefined);
    const up = live.map((w) => ({ worker: w.index, up: answered.has(w.worker.id) }));
    return renderSnapshots([...parts, ...this.retired, await workersUpSnapshot(up)]);
  }

  /** Resolves null once the worker answered (its snapshot stored), else with why not. */
  private ask(w: WorkerEntry): Promise<string | null> {
    const id = ++this.nextAsk;
    const pending = this.asks.get(w.worker.id) ?? new Map();
    this.asks.set(w.worker.id, pending);
    return new Promise((resolve) => {
      const settle = (answer: MetricsSnapshot | undefined, reason: string) => {
        if (!pending.delete(id)) return;
        clearTimeout(timer);
        if (answer && this.workers.has(w.worker.id)) {
          this.last.set(w.worker.id, answer);
          resolve(null);
        } else resolve(reason);
      };
      const timer = setTimeout(() => settle(undefined, `no answer within ${this.timeoutMs} ms`), this.timeoutMs);
      pending.set(id, settle);
      try {
        w.worker.send({ type: "app-server:metrics-ask", id } satisfies AskMessage, undefined, (err: Error | null) => err && settle(undefined, `could not ask: ${err.message}`));
      } catch (err) {
        settle(undefined, `could not ask: ${(err as Error).message}`);
      }
    });
  }

  answered(workerId: number, m: AnswerMessage): void {
    this.asks.get(workerId)?.get(m.id)?.(m.metrics, m.error ? `it failed: ${m.error}` : "empty answer");
  }

  /** A worker exited: its totals stay counted; scrapes waiting for it stop waiting. */
  exited(workerId: number): void {
    const last = this.last.get(workerId);
    this.last.delete(workerId);
    if (last) this.retired.push(cumulativeOnly(last));
    for (const settle of [...(this.asks.get(workerId)?.values() ?? [])]) settle(undefined, "it exited");
    this.asks.delete(workerId);
    void this.compact();
  }

  /** Retired snapshots merged into one, replaced in one step (a scrape never sees a part twice or not at all). */
  private async compact(): Promise<void> {
    if (this.compacting || this.retired.length < 2) return;
    this.compacting = true;
    try {
      const parts = this.retired.slice();
      const merged = await mergeSnapshots(parts);
      this.retired.splice(0, parts.length, merged);
    } catch (err) {
      this.log.warn({ err }, "could not merge the metrics of exited workers");
    } finally {
      this.compacting = false;
    }
    if (this.retired.length >= 2) void this.compact();
  }
}

/** Worker side: tell the primary this worker serves (after its store and cluster links are up). */
export function notifyReady(url: string): void {
  process.send?.({ type: "app-server:ready", url } satisfies ReadyMessage);
}

/** Worker side: a primary that went away (killed) leaves no orphans: the worker stops too. */
export function stopWhenPrimaryGone(stop: (reason: string) => void): void {
  process.once("disconnect", () => stop("primary process gone"));
}

/**
 * Primary side: runs `count` workers until SIGTERM/SIGINT; resolves with the exit code. `banner`
 * gives the line printed once every worker listens (serve's, with the playground's address).
 */
export function runPrimary(count: number, log: Logger, banner: (url: string) => string | null = listeningBanner): Promise<number> {
  const primary = new Primary(count, log, banner);
  cluster.on("exit", (worker, code, signal) => primary.exited(worker, code, signal));
  // Kept after the first (stopAll runs once): under npm start one Ctrl-C arrives twice.
  process.on("SIGTERM", () => primary.stopAll("SIGTERM", 0));
  process.on("SIGINT", () => primary.stopAll("SIGINT", 0));
  log.info({ workers: count }, "starting workers");
  for (let i = 1; i <= count; i++) primary.fork(i);
  return primary.done;
}

/** The primary's workers: forked, answered, restarted (bounded) and stopped. */
class Primary {
  private readonly workers = new Map<number, WorkerEntry>();
  private readonly serverMetrics: ServerMetrics;
  private readonly restarts: number[] = [];
  private stopping = false;
  private started = false;
  private exitCode = 0;
  private resolveDone!: (code: number) => void;
  readonly done = new Promise<number>((r) => (this.resolveDone = r));

  constructor(
    private readonly count: number,
    private readonly log: Logger,
    private readonly banner: (url: string) => string | null,
  ) {
    this.serverMetrics = new ServerMetrics(this.workers, metricsTimeoutMs(process.env), log);
  }

  fork(index: number): void {
    // The worker runs this same command line (cluster re-executes process.argv); APP_SERVER_WORKER
    // numbers it in its log lines.
    const worker = cluster.fork({ APP_SERVER_WORKER: String(index) });
    this.workers.set(worker.id, { worker, index, ready: false });
    worker.on("message", (m: unknown) => {
      if (isScrape(m)) return this.answerScrape(worker, index, m);
      if (isAnswer(m)) return this.serverMetrics.answered(worker.id, m);
      if (isReady(m)) this.ready(worker, index, m.url);
    });
  }

  private answerScrape(worker: Worker, index: number, m: ScrapeMessage): void {
    const reply = (message: ScrapedMessage) => {
      try {
        worker.send(message, undefined, () => {}); // a worker gone meanwhile: nobody to answer
      } catch {
        // Same: the channel closed.
      }
    };
    this.serverMetrics.scrape(worker.id, m.own).then(
      (text) => reply({ type: "app-server:metrics-scraped", id: m.id, text }),
      (err: unknown) => {
        this.log.error({ err, worker: index }, "could not aggregate the workers' metrics");
        reply({ type: "app-server:metrics-scraped", id: m.id, error: String(err) });
      },
    );
  }

  private ready(worker: Worker, index: number, url: string): void {
    const w = this.workers.get(worker.id);
    if (!w) return;
    w.ready = true;
    this.log.info({ worker: index, workerPid: worker.process.pid }, "worker ready");
    if (!this.started && [...this.workers.values()].filter((x) => x.ready).length === this.count) {
      this.started = true;
      this.log.info({ url, workers: this.count }, "listening");
      const line = this.banner(url);
      if (line) process.stdout.write(line);
    }
  }

  stopAll(reason: string, code: number): void {
    if (this.stopping) return;
    this.stopping = true;
    this.exitCode = code;
    this.log.info({ reason, workers: this.workers.size }, "shutting down");
    if (this.workers.size === 0) return this.resolveDone(this.exitCode);
    for (const { worker } of this.workers.values()) {
      worker.process.kill("SIGTERM");
      const timer = setTimeout(() => worker.process.kill("SIGKILL"), STOP_TIMEOUT_MS);
      timer.unref();
      worker.once("exit", () => clearTimeout(timer));
    }
  }

  exited(worker: Worker, code: number, signal: string): void {
    const log = this.log;
    const w = this.workers.get(worker.id);
    this.workers.delete(worker.id);
    this.serverMetrics.exited(worker.id);
    if (!w) return;
    if (this.stopping) {
      // A worker that could not stop cleanly makes the whole stop unclean.
      if (code !== 0 && this.exitCode === 0) this.exitCode = 1;
      log.info({ worker: w.index, workerPid: worker.process.pid, code, signal }, "worker stopped");
      if (this.workers.size === 0) {
        log.info({}, "stopped");
        this.resolveDone(this.exitCode);
      }
      return;
    }
    if (!w.ready && !this.started) {
      // A worker that dies before it ever served: configuration or database problem, which the
      // others would hit too (its own log lines say what failed).
      log.error({ worker: w.index, workerPid: worker.process.pid, code, signal }, "a worker could not start");
      this.stopAll("a worker could not start", 1);
      return;
    }
    const restarts = this.restarts;
    const now = Date.now();
    while (restarts.length > 0 && now - restarts[0]! > RESTART_WINDOW_MS) restarts.shift();
    if (restarts.length >= MAX_RESTARTS) {
      log.error({ worker: w.index, workerPid: worker.process.pid, code, signal, restarts: restarts.length, windowMs: RESTART_WINDOW_MS }, "worker exited again: too many restarts, stopping");
      this.stopAll("too many worker restarts", 1);
      return;
    }
    restarts.push(now);
    log.warn({ worker: w.index, workerPid: worker.process.pid, code, signal, restart: restarts.length, of: MAX_RESTARTS }, "worker exited unexpectedly: restarting it");
    this.fork(w.index);
  }
}
