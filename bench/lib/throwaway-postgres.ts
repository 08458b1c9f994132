/**
 * What a standalone bench script (memory-after-turns.ts, loaded-threads-memory.ts, turn-cpu.ts)
 * runs its server on: a fresh Postgres database and a fresh home directory, both removed by `drop`.
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import postgres from "postgres";

/** BENCH_DATABASE_URL, or the machine's Postgres as the postgres user. */
export const PG_ADMIN_URL = process.env.BENCH_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";

export interface ThrowawayPostgres {
  databaseUrl: string;
  home: string;
  drop(): Promise<void>;
}

export async function throwawayPostgres(homePrefix: string): Promise<ThrowawayPostgres> {
  const admin = postgres(PG_ADMIN_URL, { max: 1, onnotice: () => {} });
  const dbName = `aas_bench_${randomBytes(4).toString("hex")}`;
  await admin.unsafe(`create database ${dbName}`);
  const home = await mkdtemp(path.join(os.tmpdir(), homePrefix));
  const url = new URL(PG_ADMIN_URL);
  url.pathname = `/${dbName}`;
  return {
    databaseUrl: url.toString(),
    home,
    drop: async () => {
      await admin.unsafe(`drop database ${dbName} with (force)`);
      await admin.end();
      await rm(home, { recursive: true, force: true });
    },
  };
}
