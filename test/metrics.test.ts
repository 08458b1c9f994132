/** src/metrics.ts (prom-client): the Prometheus text exposition the server serves at /metrics. */
import { describe, expect, it } from "vitest";
import { Metrics } from "../src/metrics.js";

describe("Metrics", () => {
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
    m.tokens("anthropic", { inputTokens: 100, cachedInputTokens: 25, outputTokens: 9 } as never);
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
    for (const l of lines.filter((x) => x && !x.startsWith("#"))) expect(l).toMatch(/^[a-z_]+(\{[^}]*\})? [-+\dInfNa.e]+$/);
  });

  it("escapes label values", async () => {
    const m = new Metrics();
    m.turnEnded('a"b\\c\nd');
    expect(await m.render()).toContain('app_server_turns_total{status="a\\"b\\\\c\\nd"} 1');
  });
});
