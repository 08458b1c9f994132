/** Summary statistics over latency samples (milliseconds). Percentiles are nearest-rank. */
export interface Summary {
  n: number;
  p50: number;
  p99: number;
  mean: number;
  min: number;
  max: number;
}

export function summarize(samples: number[]): Summary {
  if (samples.length === 0) return { n: 0, p50: NaN, p99: NaN, mean: NaN, min: NaN, max: NaN };
  const s = [...samples].sort((a, b) => a - b);
  const rank = (p: number) => s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!;
  return {
    n: s.length,
    p50: rank(50),
    p99: rank(99),
    mean: s.reduce((a, b) => a + b, 0) / s.length,
    min: s[0]!,
    max: s[s.length - 1]!,
  };
}

/** 1.23 / 12.3 / 123: three significant-ish digits, milliseconds. */
export function fmtMs(v: number): string {
  if (!Number.isFinite(v)) return "-";
  if (v < 10) return v.toFixed(2);
  if (v < 100) return v.toFixed(1);
  return v.toFixed(0);
}
