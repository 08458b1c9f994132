/**
 * Prometheus metrics (prom-client), served at GET /metrics. The runtime reports through the
 * small TurnObserver interface; only this module knows prom-client.
 *
 * With `serve --workers` each worker process has its own Metrics, and /metrics reports the sum of
 * all of them (workers.ts gathers their snapshots; mergeSnapshots/renderSnapshots below aggregate
 * with prom-client's AggregatorRegistry). Counters and histograms are summed (prom-client's
 * default). Every gauge says how it aggregates (`aggregator`) and why, next to its definition.
 */
import { AggregatorRegistry, collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";
import type { Usage } from "./agent/messages.js";

/** What the turn runner reports. */
export interface TurnObserver {
  turnStarted(): void;
  turnEnded(status: string): void;
  modelCall(provider: string, seconds: number, outcome: "ok" | string): void;
  /** `userId`: the thread's owner, whose daily tokens the call counts for (docs/teams.md). */
  tokens(provider: string, usage: Usage, userId: string): void;
  approvalsPending(delta: number): void;
  commitSeconds(seconds: number): void;
}

/** What trackLoadedThreads reports. */
export interface LoadedThreadStats {
  loaded: number;
  withHistory: number;
  historyBytes: number;
  evictions: number;
}

let processRegistry: Registry | null = null;

/**
 * The process's own metrics, prom-client's defaults: CPU, resident memory, heap by space, event-loop
 * lag, GC durations, open handles and file descriptors. Collected once per process (each collection
 * starts its own GC observer and event-loop monitor, which nothing stops) and reported with every
 * Metrics of the process.
 */
function processMetrics(): Registry {
  if (!processRegistry) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry });
  }
  return processRegistry;
}

export class Metrics implements TurnObserver {
  readonly registry = new Registry();
  // From the first Metrics on, so GC durations and event-loop lag cover the process's whole life.
  private readonly process = processMetrics();
  // Gauges, with --workers: a connection belongs to the one worker that accepted it, and a turn
  // runs on one worker (under its thread's lease; a worker relaying it to its clients does not
  // count it), so the server's numbers are the workers' sums.
  private readonly connections = new Gauge({ name: "app_server_connections", help: "Open WebSocket connections", aggregator: "sum", registers: [this.registry] });
  private readonly activeTurns = new Gauge({ name: "app_server_active_turns", help: "Turns running now", aggregator: "sum", registers: [this.registry] });
  private readonly turns = new Counter({ name: "app_server_turns_total", help: "Turns ended, by final status", labelNames: ["status"], registers: [this.registry] });
  private readonly modelLatency = new Histogram({
    name: "app_server_model_call_duration_seconds",
    help: "Model call duration (request to final event), by provider and outcome",
    labelNames: ["provider", "outcome"],
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
    registers: [this.registry],
  });
  private readonly modelErrors = new Counter({ name: "app_server_model_errors_total", help: "Failed model calls, by provider and error kind", labelNames: ["provider", "kind"], registers: [this.registry] });
  private readonly tokenCounter = new Counter({ name: "app_server_tokens_total", help: "Tokens reported by providers, by kind (input includes cached)", labelNames: ["provider", "kind"], registers: [this.registry] });
  private readonly cacheHit = new Histogram({
    name: "app_server_cache_hit_ratio",
    help: "Cached share of input tokens per model call",
    labelNames: ["provider"],
    buckets: [0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 1],
    registers: [this.registry],
  });
  // Counted by the worker running the turn that asks (runtime/approvals.ts), not by workers that
  // relay the request to their clients: summed.
  private readonly approvals = new Gauge({ name: "app_server_approvals_pending", help: "Approval requests waiting for an answer", aggregator: "sum", registers: [this.registry] });
  private readonly dbCommit = new Histogram({
    name: "app_server_db_commit_duration_seconds",
    help: "Duration of record-before-publish transactions",
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
    registers: [this.registry],
  });
  // Per user (docs/teams.md): labelled by name, so one series per user of the server.
  private readonly userTokenCounter = new Counter({ name: "app_server_user_tokens_total", help: "Model tokens reported by providers, by user (the thread's owner) and kind", labelNames: ["user", "kind"], registers: [this.registry] });
  /** Also told every model call's tokens with the thread's owner (the per-user quotas count them). */
  perUser: ((userId: string, usage: Usage) => void) | null = null;
  readonly coalescedDeltas = new Counter({ name: "app_server_coalesced_deltas_total", help: "Delta notifications merged for slow readers", registers: [this.registry] });
  readonly overflowCloses = new Counter({ name: "app_server_outbound_overflow_closes_total", help: "Connections closed (1013) because they stopped reading", registers: [this.registry] });

  /** Bytes waiting for slow readers, summed over connections at scrape time. */
  trackOutbound(total: () => number): void {
    new Gauge({
      name: "app_server_outbound_buffered_bytes",
      help: "Bytes queued or buffered for clients, all connections",
      // Each worker's own connections' bytes (the memory they hold): all connections = the sum.
      aggregator: "sum",
      registers: [this.registry],
      collect() {
        this.set(total());
      },
    });
  }

  /**
   * The loaded threads and the history budget (runtime/history-budget.ts), read at scrape time.
   * With --workers each worker loads its own threads (one followed from two workers counts twice:
   * each holds it in memory): summed.
   */
  trackLoadedThreads(stats: () => LoadedThreadStats): void {
    const registers = [this.registry];
    const gauge = (name: string, help: string, value: (s: LoadedThreadStats) => number) =>
      new Gauge({
        name,
        help,
        aggregator: "sum",
        registers,
        collect() {
          this.set(value(stats()));
        },
      });
    gauge("app_server_loaded_threads", "Threads loaded in memory", (s) => s.loaded);
    gauge("app_server_loaded_threads_with_history", "Loaded threads whose history log is in memory", (s) => s.withHistory);
    gauge("app_server_loaded_history_bytes", "Estimated bytes of the loaded threads' histories in memory", (s) => s.historyBytes);
    let counted = 0;
    new Counter({
      name: "app_server_loaded_history_evictions_total",
      help: "Histories of idle loaded threads dropped to stay within APP_SERVER_LOADED_HISTORY_MAX_BYTES",
      registers,
      collect() {
        const n = stats().evictions;
        if (n > counted) this.inc(n - counted);
        counted = n;
      },
    });
  }

  /** The embedded database's thread dying (store/embedded-postgres.ts starts it again), read at scrape time. */
  trackEmbeddedDatabase(failures: () => number): void {
    let counted = 0;
    new Counter({
      name: "app_server_embedded_database_failures_total",
      help: "Times the embedded database's thread died (each time it is started again on the same directory)",
      registers: [this.registry],
      collect() {
        const n = failures();
        if (n > counted) this.inc(n - counted);
        counted = n;
      },
    });
  }

  setConnections(n: number): void {
    this.connections.set(n);
  }
  turnStarted(): void {
    this.activeTurns.inc();
  }
  turnEnded(status: string): void {
    this.activeTurns.dec();
    this.turns.inc({ status });
  }
  modelCall(provider: string, seconds: number, outcome: string): void {
    this.modelLatency.observe({ provider, outcome: outcome === "ok" ? "ok" : "error" }, seconds);
    if (outcome !== "ok") this.modelErrors.inc({ provider, kind: outcome });
  }
  tokens(provider: string, usage: Usage, userId: string): void {
    this.perUser?.(userId, usage);
    this.tokenCounter.inc({ provider, kind: "input" }, usage.inputTokens);
    this.tokenCounter.inc({ provider, kind: "cached" }, usage.cachedInputTokens);
    this.tokenCounter.inc({ provider, kind: "output" }, usage.outputTokens);
    if (usage.inputTokens > 0) this.cacheHit.observe({ provider }, usage.cachedInputTokens / usage.inputTokens);
  }
  /** A model call's tokens for a user (by name), for app_server_user_tokens_total. */
  userTokens(user: string, usage: Usage): void {
    this.userTokenCounter.inc({ user, kind: "input" }, usage.inputTokens);
    this.userTokenCounter.inc({ user, kind: "output" }, usage.outputTokens);
  }
  approvalsPending(delta: number): void {
    this.approvals.inc(delta);
  }
  commitSeconds(seconds: number): void {
    this.dbCommit.observe(seconds);
  }

  render(): Promise<string> {
    return Registry.merge([this.registry, this.process]).metrics();
  }

  /** This process's metrics as plain data: what a worker sends the primary over IPC. */
  async snapshot(): Promise<MetricsSnapshot> {
    return [...(await this.registry.getMetricsAsJSON()), ...(await this.process.getMetricsAsJSON())];
  }
}

/** One registry's metrics as JSON-safe data (prom-client's getMetricsAsJSON). */
export type MetricsSnapshot = Awaited<ReturnType<Registry["getMetricsAsJSON"]>>;

const CUMULATIVE = new Set(["counter", "histogram"]);

/**
 * What a worker that exited still contributes to the server's totals: its counters and histograms
 * (what happened stays counted, so totals never go backwards), not its gauges (its connections and
 * turns ended with it).
 */
export function cumulativeOnly(snapshot: MetricsSnapshot): MetricsSnapshot {
  return snapshot.filter((m) => CUMULATIVE.has(String(m.type)));
}

/** Several snapshots as one, each metric aggregated by its `aggregator` (sum unless it says otherwise). */
export function mergeSnapshots(parts: MetricsSnapshot[]): Promise<MetricsSnapshot> {
  return AggregatorRegistry.aggregate(parts).getMetricsAsJSON();
}

/** The Prometheus text of several snapshots aggregated (the same format as Metrics.render). */
export function renderSnapshots(parts: MetricsSnapshot[]): Promise<string> {
  return AggregatorRegistry.aggregate(parts).metrics();
}

/**
 * `app_server_worker_metrics_up{worker="i"}`: 1 when the scrape has worker i's current numbers, 0
 * when it did not answer in time or is still starting (its last answer, if any, stands in for it).
 * Per worker because the point is to say which one is missing.
 */
export async function workersUpSnapshot(workers: Array<{ worker: number; up: boolean }>): Promise<MetricsSnapshot> {
  const registry = new Registry();
  const up = new Gauge({
    name: "app_server_worker_metrics_up",
    help: "1 if this scrape has the worker's current metrics, 0 if it did not answer in time or is starting (its last numbers are used)",
    labelNames: ["worker"],
    registers: [registry],
  });
  for (const w of workers) up.set({ worker: String(w.worker) }, w.up ? 1 : 0);
  return registry.getMetricsAsJSON();
}
