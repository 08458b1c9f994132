/**
 * Issue 25: what saved approval rules cost. A shell call reads the rules only when a question is
 * due (an escalation, untrusted's question, the offer after a denial), then matches its command
 * line against them. Measured:
 *
 *  1. matching (rulesCover + proposeRule) of a typical 3-part command line against 0 / 100 /
 *     1 000 / 10 000 rules, in process;
 *  2. reading the rules (ExecPolicyStore.list, the query every such call makes) on PGlite and on
 *     Postgres with 10 / 1 000 rules saved.
 *
 * Run: npx tsx bench/approval-rules.ts [--pg-url=postgres://postgres@127.0.0.1:5432/postgres]
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { openDatabase, type Database } from "../src/store/database.js";
import { ExecPolicyStore } from "../src/store/execpolicy-store.js";
import { proposeRule, rulesCover } from "../src/tools/execpolicy.js";
import { fmtMs, summarize } from "./lib/stats.js";

const COMMAND = "cd web && npm run build -- --mode production | tee build.log";
const pgUrl = process.argv.find((a) => a.startsWith("--pg-url="))?.slice(9) ?? process.env.BENCH_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";

function rules(n: number): string[][] {
  // Never matching but sharing first words with the command, so every rule is compared.
  return Array.from({ length: n }, (_, i) => [["cd", "npm", "tee"][i % 3]!, `other-${i}`]);
}

function timeIt(fn: () => void, n: number): number[] {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    fn();
    out.push(performance.now() - t);
  }
  return out;
}

console.log(`# matching "${COMMAND}" (ms per call)`);
for (const n of [0, 100, 1_000, 10_000]) {
  const saved = rules(n);
  timeIt(() => rulesCover(COMMAND, saved), 200);
  const s = summarize(timeIt(() => (rulesCover(COMMAND, saved), proposeRule(COMMAND, ["npm", "run", "build"], saved)), 2_000));
  console.log(`| ${n} rules | p50 ${fmtMs(s.p50)} | p99 ${fmtMs(s.p99)} |`);
}

async function listing(label: string, open: () => Promise<{ db: Database; cleanup(): Promise<void> }>): Promise<void> {
  const { db, cleanup } = await open();
  try {
    const store = new ExecPolicyStore(db.sql);
    let saved = 0;
    for (const n of [10, 1_000]) {
      for (; saved < n; saved++) await store.add(["bench", `rule-${saved}`], null, "local");
      for (let i = 0; i < 50; i++) await store.list("local");
      const samples: number[] = [];
      for (let i = 0; i < 300; i++) {
        const t = performance.now();
        await store.list("local");
        samples.push(performance.now() - t);
      }
      const s = summarize(samples);
      console.log(`| ${label} | ${n} rules | list p50 ${fmtMs(s.p50)} ms | p99 ${fmtMs(s.p99)} ms |`);
    }
  } finally {
    await db.close();
    await cleanup();
  }
}

console.log("# reading the rules (ExecPolicyStore.list)");
await listing("PGlite", async () => {
  const home = await mkdtemp(path.join(os.tmpdir(), "aas-bench-rules-"));
  const db = await openDatabase({ dataDir: path.join(home, "pglite") });
  return { db, cleanup: () => rm(home, { recursive: true, force: true }) };
});
const schema = `bench_rules_${randomBytes(4).toString("hex")}`;
await listing("Postgres", async () => {
  const db = await openDatabase({ databaseUrl: pgUrl, schema });
  return {
    db,
    cleanup: async () => {
      const postgres = (await import("postgres")).default;
      const sql = postgres(pgUrl, { max: 1, onnotice: () => {} });
      await sql`drop schema if exists ${sql(schema)} cascade`;
      await sql.end();
    },
  };
}).catch((err) => console.log(`| Postgres | skipped: ${(err as Error).message} |`));
console.log(`load average: ${os.loadavg().map((l) => l.toFixed(2)).join(" ")}`);
