/**
 * Issue 33's target table, one row per figure, read off what a run measured (the phases that ran;
 * a row whose phase did not run says so). `--baseline=REF` runs the same phases on REF first and
 * keeps its rows (`--json`), so one run prints before and after side by side.
 */
import type { LatencyRow, MemRow } from "./context.js";
import { fmtMs } from "./stats.js";
import { overheadRows, statementRows, streamRows } from "../groups/turns.js";
import { soakRuns } from "../groups/soak.js";
import { MEMORY_AFTER_TURNS, MEMORY_IDLE } from "../groups/memory.js";

export interface TargetRow {
  figure: string;
  target: string;
  /** The number compared with the target (null: not measured in this run). */
  value: number | null;
  /** How the value reads, with what it came from. */
  measured: string;
  met: boolean | null;
}

/** Phases whose rows make the table (the `--only` list for a complete one). */
export const ISSUE33_PHASES = ["ready", "turns", "memory", "search", "soak"];

const fmt = (v: number, unit: string) => `${v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2)} ${unit}`;

export function issue33Rows(latency: LatencyRow[], memory: MemRow[]): TargetRow[] {
  const rows: TargetRow[] = [];
  const add = (figure: string, target: string, limit: number, value: number | undefined | null, unit: string, from: string) =>
    rows.push({
      figure,
      target,
      value: value ?? null,
      measured: value == null ? `not run (${from})` : `${fmt(value, unit)}${from ? ` (${from})` : ""}`,
      met: value == null ? null : value <= limit,
    });
  const lat = (backend: string, prefix: string) => latency.find((r) => r.backend === backend && r.metric.startsWith(prefix));
  const mem = (backend: string, prefix: string) => memory.find((r) => r.backend === backend && r.metric.startsWith(prefix));

  for (const n of [100, 500]) {
    const s = streamRows.find((r) => r.backend === "postgres" && r.streams === n && r.deltas > 0);
    add(`server CPU per streamed delta, ${n} streams`, "≤ 50 µs", 50, s ? (s.cpuS * 1e6) / s.deltas : null, "µs", s ? `${s.cpuS.toFixed(2)} s CPU / ${s.deltas} deltas, postgres` : "turns");
  }
  const d500 = latency.find((r) => r.backend === "postgres" && r.metric.startsWith("delta latency:") && r.metric.includes(", 500 concurrent"));
  add("500 streams, delta p99", "≤ 50 ms", 50, d500?.s.p99, "ms", d500 ? `p50 ${fmtMs(d500.s.p50)} ms, postgres` : "turns");
  const o = lat("postgres", "turn overhead:");
  add("turn overhead p50 (instant model)", "≤ 5 ms", 5, o?.s.p50, "ms", o ? `p99 ${fmtMs(o.s.p99)} ms, postgres` : "turns");
  const st = statementRows.find((r) => r.backend === "postgres" && r.chunks === 10);
  const ov = overheadRows.find((r) => r.backend === "postgres");
  add(
    "commits per message-only turn",
    "≤ 2",
    2,
    st?.commitsPerTurn ?? st?.transactionsPerTurn,
    "",
    st ? `durable commits (COMMITs + autocommit writes; ${st.transactionsPerTurn.toFixed(1)} of them transactions), ${st.perTurn.toFixed(1)} statements on the wire; /metrics: ${ov ? ov.commitsPerTurn.toFixed(2) : "?"} record-before-publish transactions/turn incl. thread/start` : "turns",
  );
  const ready = lat("postgres", "ready: restart (migrated db)");
  add("ready (spawn → /readyz), Postgres", "≤ 150 ms", 150, ready?.s.p50, "ms", ready ? `p50 of ${ready.s.n}, p99 ${fmtMs(ready.s.p99)} ms` : "ready");
  const idle = mem("postgres", MEMORY_IDLE) ?? mem("postgres", "idle RSS after ready: restart (migrated db)");
  add("idle RSS (Postgres)", "≤ 60 MiB", 60, idle?.rss.p50, "MiB", idle ? `p50 of ${idle.rss.n}` : "memory");
  const after = mem("postgres", MEMORY_AFTER_TURNS);
  add("RSS after 20 turns (Postgres)", "≤ 78 MiB", 78, after?.rss.p50, "MiB", after ? `p50 of ${after.rss.n}` : "memory");
  const fresh = lat("pglite", "ready: fresh home");
  add("PGlite first start (fresh home)", "≤ 1 s", 1000, fresh?.s.p50, "ms", fresh ? `p50 of ${fresh.s.n}` : "ready, pglite");
  for (const b of ["postgres", "pglite"]) {
    const s = lat(b, "search: thread/search frequent word @1M messages");
    add(`thread/search, frequent word, 1M messages (${b})`, "≤ 20 ms", 20, s?.s.p50, "ms", s ? `p50, p99 ${fmtMs(s.s.p99)} ms` : "search");
  }
  const soak = soakRuns.find((r) => r.backend === "pglite" && !r.label && r.minutes.length > 1);
  if (soak) {
    const first = soak.minutes[0]!;
    const last = soak.minutes[soak.minutes.length - 1]!;
    const ops = ["thread/fork", "thread/resume", "thread/list", "turn: shell"] as const;
    const worst = Math.max(...ops.map((op) => last.p50[op] / first.p50[op]));
    add(
      `PGlite, minute ${last.minute} vs minute 0 of a steady loop (worst of fork, resume, list, turn p50)`,
      "≤ 1.1×",
      1.1,
      worst,
      "×",
      `${ops.map((op) => `${op} ${(last.p50[op] / first.p50[op]).toFixed(2)}×`).join(", ")}${last.minute < 7 ? `; only ${last.minute + 1} minutes ran (the target is minute 7: --minutes=8)` : ""}`,
    );
  } else add("PGlite, minute 7 vs minute 0 of a steady loop", "≤ 1.1×", 1.1, null, "×", "soak --backend=pglite --minutes=8");
  return rows;
}

/** The table as text lines: with a baseline, before | after per row. */
export function issue33Text(after: TargetRow[], before: TargetRow[] | null, baselineLabel: string): string[] {
  const verdict = (r: TargetRow) => (r.met === null ? "–" : r.met ? "met" : "MISSED");
  const out = [`Issue 33 targets${before ? ` (before = ${baselineLabel}, after = this tree)` : ""}:`];
  for (const r of after) {
    const b = before?.find((x) => x.figure === r.figure);
    out.push(`  ${verdict(r).padEnd(6)}  ${r.figure} ${r.target}: ${before ? `before ${b?.measured ?? "not run"} → after ` : ""}${r.measured}`);
  }
  return out;
}

export function issue33Markdown(after: TargetRow[], before: TargetRow[] | null, baselineLabel: string): string[] {
  const cell = (r: TargetRow | undefined) => (r ? r.measured.replace(/\|/g, "\\|") : "not run");
  const md = [`Issue 33 targets${before ? ` (before = ${baselineLabel}, after = the benched tree; same machine, one run)` : ""}:`, ""];
  if (before) {
    md.push("| figure | target | before | after | |", "|---|---|---|---|---|");
    for (const r of after) md.push(`| ${r.figure} | ${r.target} | ${cell(before.find((x) => x.figure === r.figure))} | ${cell(r)} | ${r.met === null ? "–" : r.met ? "met" : "**missed**"} |`);
  } else {
    md.push("| figure | target | measured | |", "|---|---|---|---|");
    for (const r of after) md.push(`| ${r.figure} | ${r.target} | ${cell(r)} | ${r.met === null ? "–" : r.met ? "met" : "**missed**"} |`);
  }
  return md;
}
