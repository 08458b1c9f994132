// @needs-os-sandbox: the turns run shell commands in the OS sandbox of their process.
/**
 * The cluster under chaos (issue 31, item 7): three processes on one Postgres, each through its
 * own proxy, three threads over the three providers, and a seeded fault per round (a database link
 * cut past the lease TTL, a kill -9 and restart, a client dropped and resumed by afterSeq; a
 * process frozen past the TTL with CHAOS_FAULTS=…,freeze). The
 * invariants are checked from the database and from every client's record (test/support/chaos.ts):
 * one stored ending per turn and every client saw it, commands at most once, received = stored.
 * CHAOS_SEED picks one seed (2 and 31 by default); bench/cluster-chaos.ts runs longer ones.
 */
import { describe, expect, it } from "vitest";
import { TEST_DATABASE_URL } from "./support/db.js";
import { freshPostgresDatabase } from "./support/durability.js";
import { startMockModelServer } from "./support/mock-model-server.js";
import { ALL_FAULTS, runChaos, type ChaosFault } from "./support/chaos.js";

/**
 * Seed 2 draws kill, client drop, kill, cut, kill: every kind of fault, the same in every run (the
 * faults have their own random stream). Seed 31 draws kill, cut, drop, cut, kill on one process
 * and its client; it found two defects of issue 31 item 4, each in about one run of two before
 * its fix: a turn's first events reached the dropped client twice (its retried turn/start
 * subscribed it before its resume replayed them), and a resume on a process whose link had been
 * cut replayed only up to what that process had delivered, so the turns it missed were never seen.
 * CHAOS_SEED=n runs one seed instead.
 */
const SEEDS = process.env.CHAOS_SEED ? [Number(process.env.CHAOS_SEED)] : [2, 31];
/** CHAOS_FAULTS=kill,client (say) narrows the draw; every kind by default. */
const FAULTS: ReadonlyArray<ChaosFault> = process.env.CHAOS_FAULTS ? (process.env.CHAOS_FAULTS.split(",") as ChaosFault[]) : ALL_FAULTS;

describe.skipIf(!TEST_DATABASE_URL)("the cluster under chaos", () => {
  it.each(SEEDS)("holds every invariant through seeded faults (seed %i)", async (seed) => {
    const mock = await startMockModelServer();
    const database = await freshPostgresDatabase(TEST_DATABASE_URL!);
    try {
      const report = await runChaos({ seed, processes: 3, threads: 3, rounds: Number(process.env.CHAOS_ROUNDS ?? 5), databaseUrl: database.url, mock, faults: FAULTS, log: (l) => console.log(`chaos: ${l}`) });
      expect(report.violations, report.faults.join("\n")).toEqual([]);
      expect(report.turns).toBe(3 * Number(process.env.CHAOS_ROUNDS ?? 5));
      // Every turn's command ran, or its turn was cut short before it could: never twice.
      expect(report.commands.ran).toBeGreaterThanOrEqual(report.commands.stored);
    } finally {
      await mock.close();
      await database.drop();
    }
  }, 600_000);
});
