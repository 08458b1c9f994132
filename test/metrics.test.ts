/** src/metrics.ts (prom-client): the Prometheus text exposition the server serves at /metrics. */
import { describe, expect, it } from "vitest";
import { cumulativeOnly, mergeSnapshots, Metrics, renderSnapshots, workersUpSnapshot, type MetricsSnapshot } from "../src/metrics.js";

describe("Metrics", () => {
  it("reports the process too (prom-client's defaults: memory, heap, event-loop lag, GC, handles), once per process", async () => {
    const [a, b] = [new Metrics(), new Metrics()];
    for (const m of [a, b]) {
      const text = await m.render();
      const rss = /^process_resident_memory_bytes (\d+)$/m.exec(text);
      expect(Number(rss?.[1])).toBeGreaterThan(1024 * 1024);
      expect(text).toMatch(/^nodejs_heap_size_used_bytes \d+/m);
      expect(text).toMatch(/^nodejs_eventloop_lag_seconds [\d.e-]+$/m);
      expect(text).toMatch(/^# TYPE nodejs_gc_duration_seconds histogram$/m);
      expect(text).toMatch(/^nodejs_active_handles_total \d+$/m);
      expect(text).toMatch(/^process_open_fds \d+$/m);
      expect(text.match(/^# TYPE process_resident_memory_bytes /gm)).toHaveLength(1);
    }
    // In a worker's snapshot too, so the primary's /metrics sums the workers' memory.
    expect((await a.snapshot()).some((m) => m.name === "process_resident_memory_bytes")).toBe(true);
  });

  it("renders counters, gauges and cumulative histograms in the exposition format", async () => {
    const m = new Metrics();
    let buffered = 7;
    m.trackOutbound(() => buffered);
    m.setConnections(3);
    m.turnStarted();
    m.turnStarted();
    m.turnEnded("completed");
    m.modelCall("openai", 0.3, "ok");
    m.modelCall("openai", 2, "rate_limit");
    m.tokens("anthropic", { inputTokens: 100, cachedInputTokens: 25, outputTokens: 9 } as never, "local");
    m.commitSeconds(0.002);
    m.commitSeconds(0.02);
    m.coalescedDeltas.inc();
    const text = await m.render();
    const lines = text.split("\n");
    expect(lines).toContain("# TYPE app_server_connections gauge");
    expect(lines).toContain("app_server_connections 3");
    expect(lines).toContain("app_server_active_turns 1");
    expect(lines).toContain('app_server_turns_total{status="completed"} 1');
    expect(lines).toContain('app_server_model_errors_total{provider="openai",kind="rate_limit"} 1');
    expect(lines).toContain('app_server_tokens_total{provider="anthropic",kind="cached"} 25');
    expect(lines).toContain('app_server_model_call_duration_seconds_bucket{le="0.5",provider="openai",outcome="ok"} 1');
    expect(lines).toContain('app_server_model_call_duration_seconds_bucket{le="1",provider="openai",outcome="error"} 0');
    expect(lines).toContain('app_server_model_call_duration_seconds_bucket{le="+Inf",provider="openai",outcome="error"} 1');
    expect(lines).toContain('app_server_cache_hit_ratio_bucket{le="0.25",provider="anthropic"} 1');
    expect(lines).toContain('app_server_db_commit_duration_seconds_bucket{le="0.001"} 0');
    expect(lines).toContain('app_server_db_commit_duration_seconds_bucket{le="0.0025"} 1');
    expect(lines).toContain('app_server_db_commit_duration_seconds_bucket{le="0.025"} 2');
    expect(lines).toContain("app_server_db_commit_duration_seconds_sum 0.022");
    expect(lines).toContain("app_server_db_commit_duration_seconds_count 2");
    expect(lines).toContain("app_server_coalesced_deltas_total 1");
    // Unlabelled series exist before anything happened; labelled ones only once seen.
    expect(lines).toContain("app_server_outbound_overflow_closes_total 0");
    expect(text).not.toMatch(/app_server_turns_total\{status="failed"/);
    // Gauges with a collector read it at scrape time.
    expect(lines).toContain("app_server_outbound_buffered_bytes 7");
    buffered = 9;
    expect((await m.render()).split("\n")).toContain("app_server_outbound_buffered_bytes 9");
    // Every sample line is `name{labels} value`.
    for (const l of lines.filter((x) => x && !x.startsWith("#"))) expect(l).toMatch(/^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[^}]*\})? [-+\dInfNa.e]+$/);
  });

  it("escapes label values", async () => {
    const m = new Metrics();
    m.turnEnded('a"b\\c\nd');
    expect(await m.render()).toContain('app_server_turns_total{status="a\\"b\\\\c\\nd"} 1');
  });

  it("aggregates workers' snapshots (--workers): counters, histograms and gauges summed; an exited worker keeps only its cumulative series", async () => {
    const a = new Metrics();
    const b = new Metrics();
    a.trackOutbound(() => 5);
    b.trackOutbound(() => 7);
    a.setConnections(2);
    b.setConnections(3);
    a.turnStarted();
    a.turnEnded("completed");
    b.turnStarted();
    b.turnEnded("completed");
    b.turnStarted();
    b.approvalsPending(1);
    a.modelCall("openai", 0.3, "ok");
    b.modelCall("openai", 0.4, "ok");
    b.modelCall("openai", 2, "rate_limit");
    // As they cross the IPC channel (JSON).
    const ipc = async (m: Metrics): Promise<MetricsSnapshot> => JSON.parse(JSON.stringify(await m.snapshot()));
    const [sa, sb] = [await ipc(a), await ipc(b)];
    const lines = (await renderSnapshots([sa, sb])).split("\n");
    expect(lines).toContain("# TYPE app_server_connections gauge");
    expect(lines).toContain("app_server_connections 5");
    expect(lines).toContain("app_server_active_turns 1");
    expect(lines).toContain("app_server_approvals_pending 1");
    expect(lines).toContain("app_server_outbound_buffered_bytes 12");
    expect(lines).toContain('app_server_turns_total{status="completed"} 2');
    expect(lines).toContain('app_server_model_errors_total{provider="openai",kind="rate_limit"} 1');
    expect(lines).toContain('app_server_model_call_duration_seconds_bucket{le="0.5",provider="openai",outcome="ok"} 2');
    expect(lines).toContain('app_server_model_call_duration_seconds_count{provider="openai",outcome="ok"} 2');
    expect(lines).toContain('app_server_model_call_duration_seconds_sum{provider="openai",outcome="ok"} 0.7');

    // Worker a exited: its turns and model calls stay counted, its connections do not.
    const retired = await mergeSnapshots([cumulativeOnly(sa)]);
    expect(retired.map((m) => m.name)).not.toContain("app_server_connections");
    const after = (await renderSnapshots([sb, retired, await workersUpSnapshot([{ worker: 1, up: true }, { worker: 2, up: false }])])).split("\n");
    expect(after).toContain("app_server_connections 3");
    expect(after).toContain("app_server_outbound_buffered_bytes 7");
    expect(after).toContain('app_server_turns_total{status="completed"} 2');
    expect(after).toContain('app_server_model_call_duration_seconds_count{provider="openai",outcome="ok"} 2');
    expect(after).toContain('app_server_worker_metrics_up{worker="1"} 1');
    expect(after).toContain('app_server_worker_metrics_up{worker="2"} 0');
    for (const l of after.filter((x) => x && !x.startsWith("#"))) expect(l).toMatch(/^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[^}]*\})? [-+\dInfNa.e]+$/);
  });
});
