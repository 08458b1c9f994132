/**
 * Issue 31, item 7: the seeded chaos run (test/support/chaos.ts) with longer seeds than CI's.
 * Three `app-server serve` processes on a fresh Postgres, each through its own TCP proxy; three
 * threads over the three providers; per round one seeded fault (a database link cut past the lease
 * TTL, kill -9 and restart, a client dropped and resumed). Prints per seed: the faults, turns,
 * violations of the invariants, and turn/start → stored ending p50/p99.
 * Run: TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx bench/cluster-chaos.ts [--seeds=1,2,3] [--rounds=20] [--faults=cut,freeze,slow]
 * Only 127.0.0.1 traffic; every wait is bounded.
 */
import { startMockModelServer } from "../test/support/mock-model-server.js";
import { freshPostgresDatabase } from "../test/support/durability.js";
import { runChaos, type ChaosFault } from "../test/support/chaos.js";

const url = process.env.TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
const arg = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const SEEDS = (arg("seeds") ?? "1,2,3").split(",").map(Number);
const ROUNDS = Number(arg("rounds") ?? 20);
/** --faults=none,cut,kill,client,freeze,slow (default: ALL_FAULTS; freeze is SIGSTOP past the TTL, slow delays one link). */
const FAULTS = arg("faults")?.split(",") as ChaosFault[] | undefined;
const pct = (xs: number[], p: number) => (xs.length ? [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((xs.length * p) / 100))]! : NaN);

let failed = false;
for (const seed of SEEDS) {
  const mock = await startMockModelServer();
  const db = await freshPostgresDatabase(url);
  const t0 = performance.now();
  try {
    const r = await runChaos({ seed, processes: 3, threads: 3, rounds: ROUNDS, databaseUrl: db.url, mock, ...(FAULTS ? { faults: FAULTS } : {}) });
    const faults = r.faults.map((f) => f.replace(/^round \d+: /, "").replace(/ for \d+ ms/, "").replace(/\d+/g, "N"));
    const kinds = [...new Set(faults)].map((k) => `${faults.filter((f) => f === k).length}× ${k}`).join(", ");
    console.log(
      `seed ${seed}: ${ROUNDS} rounds, ${r.turns} turns in ${((performance.now() - t0) / 1000).toFixed(0)} s; faults: ${kinds}; ` +
        `commands stored completed ${r.commands.stored}, ran ${r.commands.ran}; turn started→ended (stored times) p50 ${pct(r.turnMs, 50).toFixed(0)} ms, p99 ${pct(r.turnMs, 99).toFixed(0)} ms; ` +
        `endings: ${JSON.stringify(r.endings)}; unanswered requests: ${r.unanswered.join(", ") || "none"}; violations: ${r.violations.length}`,
    );
    for (const e of new Set(r.errors)) console.log(`  failed turns' error: ${e} (×${r.errors.filter((x) => x === e).length})`);
    for (const v of r.violations) console.log(`  violation: ${v}`);
    if (r.violations.length) failed = true;
  } finally {
    await mock.close();
    await db.drop();
  }
}
console.log(`rss ${(process.memoryUsage().rss / 2 ** 20).toFixed(0)} MiB (bench process)`);
process.exit(failed ? 1 : 0);
