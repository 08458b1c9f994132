/**
 * Issue 12: delta latency seen by a client on a non-owner process vs one on the owner. Two real
 * `app-server serve` processes on a fresh Postgres database; the mock streams deltas 5 ms apart;
 * each delta's arrival time at both clients is compared by seq (same machine clock).
 * Run: TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx bench/cluster-latency.ts
 */
import { startMockModelServer } from "../test/support/mock-model-server.js";
import { freshPostgresDatabase } from "../test/support/durability.js";
import { Cluster } from "../test/support/cluster.js";
import { text, turnCompleted } from "../test/support/turns.js";

const url = process.env.TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
const mock = await startMockModelServer();
const db = await freshPostgresDatabase(url);
const cluster = new Cluster(db.url, mock, { APP_SERVER_LEASE_TTL_MS: "30000" });
const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((xs.length * p) / 100))]!;
try {
  const [a, b] = [await cluster.spawn(), await cluster.spawn()];
  const ca = await cluster.connect(a);
  const cb = await cluster.connect(b);
  const arrivals = new Map<string, Map<number, number>>([["a", new Map()], ["b", new Map()]]);
  for (const [name, c] of [["a", ca], ["b", cb]] as const) {
    c.ws.on("message", (data) => {
      const at = performance.now();
      const f = JSON.parse(String(data));
      if (f.method === "item/agentMessage/delta") arrivals.get(name)!.set(f.params.seq, at);
    });
  }
  const threadId = (await ca.request("thread/start", {})).thread.id;
  await cb.request("thread/resume", { threadId });
  const diffs: number[] = [];
  for (let turn = 0; turn < 10; turn++) {
    mock.enqueue({ text: Array.from({ length: 100 }, (_, i) => `w${i} `), chunkDelayMs: 5 });
    const t = (await ca.request("turn/start", { threadId, input: text(`go ${turn}`) })).turn;
    await turnCompleted(ca, t.id, 60_000);
    await turnCompleted(cb, t.id, 60_000);
  }
  for (const [seq, atA] of arrivals.get("a")!) {
    const atB = arrivals.get("b")!.get(seq);
    if (atB !== undefined) diffs.push(atB - atA);
  }
  const missing = arrivals.get("a")!.size - diffs.length;
  console.log(JSON.stringify({ deltas: diffs.length, missingOnB: missing, addedMs: { p50: pct(diffs, 50).toFixed(1), p90: pct(diffs, 90).toFixed(1), p99: pct(diffs, 99).toFixed(1), max: Math.max(...diffs).toFixed(1) } }));
} finally {
  await cluster.close();
  await mock.close();
  await db.drop();
}
