/**
 * Prometheus metrics (prom-client), served at GET /metrics. The runtime reports through the
 * small TurnObserver interface; only this module knows prom-client.
 */
import { Counter, Gauge, Histogram, Registry } from "prom-client";
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

export class Metrics implements TurnObserver {
  readonly registry = new Registry();
  private readonly connections = new Gauge({ name: "app_server_connections", help: "Open WebSocket connections", registers: [this.registry] });
  private readonly activeTurns = new Gauge({ name: "app_server_active_turns", help: "Turns running now", registers: [this.registry] });
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
  private readonly approvals = new Gauge({ name: "app_server_approvals_pending", help: "Approval requests waiting for an answer", registers: [this.registry] });
  private readonly dbCommit = new Histogram({
    name: "app_server_db_commit_duration_seconds",
    help: "Duration of record-before-publish transactions",
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
    registers: [this.registry],
  });
  readonly coalescedDeltas = new Counter({ name: "app_server_coalesced_deltas_total", help: "Delta notifications merged for slow readers", registers: [this.registry] });
  readonly overflowCloses = new Counter({ name: "app_server_outbound_overflow_closes_total", help: "Connections closed (1013) because they stopped reading", registers: [this.registry] });

  /** Bytes waiting for slow readers, summed over connections at scrape time. */
  trackOutbound(total: () => number): void {
    new Gauge({
      name: "app_server_outbound_buffered_bytes",
      help: "Bytes queued or buffered for clients, all connections",
      registers: [this.registry],
      collect() {
        this.set(total());
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
    this.dbCommit.observe(seconds);
  }

  render(): Promise<string> {
    return this.registry.metrics();
  }
}
