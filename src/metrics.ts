/**
 * Prometheus metrics, served at GET /metrics in the text exposition format (version 0.0.4). The
 * runtime reports through the small TurnObserver interface.
 *
 * Plain counters, gauges and histograms kept here rather than prom-client: the client library
 * cost ~25–45 ms of start-up and a few MB for nine series that only a scrape reads (issue 16).
 */
import type { Usage } from "./agent/messages.js";

/** What the turn runner reports. */
export interface TurnObserver {
  turnStarted(): void;
  turnEnded(status: string): void;
  modelCall(provider: string, seconds: number, outcome: "ok" | string): void;
  tokens(provider: string, usage: Usage): void;
  approvalsPending(delta: number): void;
  commitSeconds(seconds: number): void;
}

type Labels = Record<string, string>;

/** Label values escaped as the exposition format wants (backslash, quote, newline). */
const escapeLabel = (v: string) => v.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
const labelText = (labels: Labels, extra?: [string, string]) => {
  const pairs = Object.entries(labels);
  if (extra) pairs.push(extra);
  return pairs.length ? `{${pairs.map(([k, v]) => `${k}="${escapeLabel(v)}"`).join(",")}}` : "";
};
/** Numbers as Prometheus writes them (+Inf, -Inf, NaN). */
const num = (v: number) => (Number.isNaN(v) ? "NaN" : v === Infinity ? "+Inf" : v === -Infinity ? "-Inf" : String(v));

abstract class Metric<S> {
  /** One series per label set, in the order first seen; the key is the labels' JSON. */
  protected readonly series = new Map<string, { labels: Labels; state: S }>();
  constructor(
    readonly name: string,
    readonly help: string,
    readonly type: "counter" | "gauge" | "histogram",
    private readonly unlabelled: boolean,
  ) {}
  protected abstract fresh(): S;
  protected abstract lines(labels: Labels, state: S): string[];
  protected of(labels: Labels = {}): S {
    const key = JSON.stringify(labels);
    let s = this.series.get(key);
    if (!s) this.series.set(key, (s = { labels, state: this.fresh() }));
    return s.state;
  }
  render(): string {
    // An unlabelled metric reports 0 before its first observation, as prom-client does.
    if (this.unlabelled) this.of();
    const body = [...this.series.values()].flatMap((s) => this.lines(s.labels, s.state));
    return [`# HELP ${this.name} ${this.help.replace(/\\/g, "\\\\").replace(/\n/g, "\\n")}`, `# TYPE ${this.name} ${this.type}`, ...body].join("\n");
  }
}

class Counter extends Metric<{ v: number }> {
  constructor(name: string, help: string, unlabelled = true) {
    super(name, help, "counter", unlabelled);
  }
  protected fresh() {
    return { v: 0 };
  }
  protected lines(labels: Labels, s: { v: number }) {
    return [`${this.name}${labelText(labels)} ${num(s.v)}`];
  }
  inc(labels?: Labels, by = 1): void {
    this.of(labels).v += by;
  }
}

class Gauge extends Metric<{ v: number }> {
  constructor(
    name: string,
    help: string,
    private readonly collect?: () => number,
  ) {
    super(name, help, "gauge", true);
  }
  protected fresh() {
    return { v: 0 };
  }
  protected lines(labels: Labels, s: { v: number }) {
    return [`${this.name}${labelText(labels)} ${num(s.v)}`];
  }
  set(v: number): void {
    this.of().v = v;
  }
  inc(by = 1): void {
    this.of().v += by;
  }
  override render(): string {
    if (this.collect) this.set(this.collect());
    return super.render();
  }
}

interface HistogramState {
  counts: number[];
  sum: number;
  count: number;
}

class Histogram extends Metric<HistogramState> {
  constructor(
    name: string,
    help: string,
    private readonly buckets: number[],
    unlabelled = true,
  ) {
    super(name, help, "histogram", unlabelled);
  }
  protected fresh(): HistogramState {
    return { counts: this.buckets.map(() => 0), sum: 0, count: 0 };
  }
  protected lines(labels: Labels, s: HistogramState) {
    // Buckets are cumulative: each counts the observations ≤ its bound.
    const out = this.buckets.map((b, i) => `${this.name}_bucket${labelText(labels, ["le", num(b)])} ${s.counts[i]}`);
    out.push(`${this.name}_bucket${labelText(labels, ["le", "+Inf"])} ${s.count}`);
    out.push(`${this.name}_sum${labelText(labels)} ${num(s.sum)}`, `${this.name}_count${labelText(labels)} ${s.count}`);
    return out;
  }
  observe(labels: Labels | undefined, v: number): void {
    const s = this.of(labels);
    for (let i = 0; i < this.buckets.length; i++) if (v <= this.buckets[i]!) s.counts[i]! += 1;
    s.sum += v;
    s.count += 1;
  }
}

export class Metrics implements TurnObserver {
  private readonly all: Metric<unknown>[] = [];
  private add<M extends Metric<any>>(m: M): M {
    this.all.push(m);
    return m;
  }
  private readonly connections = this.add(new Gauge("app_server_connections", "Open WebSocket connections"));
  private readonly activeTurns = this.add(new Gauge("app_server_active_turns", "Turns running now"));
  private readonly turns = this.add(new Counter("app_server_turns_total", "Turns ended, by final status", false));
  private readonly modelLatency = this.add(
    new Histogram(
      "app_server_model_call_duration_seconds",
      "Model call duration (request to final event), by provider and outcome",
      [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
      false,
    ),
  );
  private readonly modelErrors = this.add(new Counter("app_server_model_errors_total", "Failed model calls, by provider and error kind", false));
  private readonly tokenCounter = this.add(new Counter("app_server_tokens_total", "Tokens reported by providers, by kind (input includes cached)", false));
  private readonly cacheHit = this.add(
    new Histogram("app_server_cache_hit_ratio", "Cached share of input tokens per model call", [0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 1], false),
  );
  private readonly approvals = this.add(new Gauge("app_server_approvals_pending", "Approval requests waiting for an answer"));
  private readonly dbCommit = this.add(
    new Histogram("app_server_db_commit_duration_seconds", "Duration of record-before-publish transactions", [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1]),
  );
  readonly coalescedDeltas = this.add(new Counter("app_server_coalesced_deltas_total", "Delta notifications merged for slow readers"));
  readonly overflowCloses = this.add(new Counter("app_server_outbound_overflow_closes_total", "Connections closed (1013) because they stopped reading"));

  /** Bytes waiting for slow readers, summed over connections at scrape time. */
  trackOutbound(total: () => number): void {
    this.add(new Gauge("app_server_outbound_buffered_bytes", "Bytes queued or buffered for clients, all connections", total));
  }

  setConnections(n: number): void {
    this.connections.set(n);
  }
  turnStarted(): void {
    this.activeTurns.inc();
  }
  turnEnded(status: string): void {
    this.activeTurns.inc(-1);
    this.turns.inc({ status });
  }
  modelCall(provider: string, seconds: number, outcome: string): void {
    this.modelLatency.observe({ provider, outcome: outcome === "ok" ? "ok" : "error" }, seconds);
    if (outcome !== "ok") this.modelErrors.inc({ provider, kind: outcome });
  }
  tokens(provider: string, usage: Usage): void {
    this.tokenCounter.inc({ provider, kind: "input" }, usage.inputTokens);
    this.tokenCounter.inc({ provider, kind: "cached" }, usage.cachedInputTokens);
    this.tokenCounter.inc({ provider, kind: "output" }, usage.outputTokens);
    if (usage.inputTokens > 0) this.cacheHit.observe({ provider }, usage.cachedInputTokens / usage.inputTokens);
  }
  approvalsPending(delta: number): void {
    this.approvals.inc(delta);
  }
  commitSeconds(seconds: number): void {
    this.dbCommit.observe(undefined, seconds);
  }

  render(): Promise<string> {
    return Promise.resolve(this.all.map((m) => m.render()).join("\n\n") + "\n");
  }
}
