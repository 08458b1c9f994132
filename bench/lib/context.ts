/**
 * What the benchmark groups share with bench/run.ts: the backend under test, the result rows the
 * report is built from, logging, and how to spawn the benched server.
 */
import type { Sql } from "postgres";
import type { ServerProcess } from "./proc.js";
import type { Summary } from "./stats.js";

export interface Backend {
  name: "postgres" | "pglite";
  home: string;
  databaseUrl?: string;
  /** Opens the server's database for seeding (PGlite: only while no server holds the dir). */
  openSeed(): Promise<{ sql: Sql; close(): Promise<void> }>;
  cleanup(): Promise<void>;
}

export interface LatencyRow {
  backend: string;
  metric: string;
  s: Summary;
  note?: string;
}

export interface MemRow {
  backend: string;
  metric: string;
  rss: Summary;
  hwm: Summary;
}

/** A free-form result table (statements per turn, load facts, …): one markdown table per title. */
export interface FactTable {
  title: string;
  columns: string[];
  rows: string[][];
  /** Lines printed under the table. */
  notes?: string[];
}

export interface SpawnExtra {
  /** Extra environment for the server process (mock provider URL, limits). */
  env?: Record<string, string>;
  /** Use this database URL instead of the backend's (e.g. a statement-counting proxy in front of it). */
  databaseUrl?: string;
  /** Another home directory (PGlite: another data dir). */
  home?: string;
}

export interface BenchContext {
  quick: boolean;
  latency: LatencyRow[];
  memory: MemRow[];
  tables: FactTable[];
  notes: string[];
  errors: string[];
  log(msg: string): void;
  /** Spawns the benched CLI (`serve`) for a backend; stop() it when done. */
  spawn(b: Backend, extra?: SpawnExtra): Promise<ServerProcess>;
}
