/**
 * Several real `app-server serve` processes on one fresh Postgres database (issue 12): each with
 * its own home, all providers pointed at one mock, short lease TTL and sweep interval so that a
 * killed owner is taken over quickly.
 */
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import postgres from "postgres";
import { afterEach, beforeEach } from "vitest";
import { TestClient } from "./client.js";
import { TEST_DATABASE_URL } from "./db.js";
import { freshPostgresDatabase } from "./durability.js";
import { startMockModelServer, type MockModelServer } from "./mock-model-server.js";
import { spawnCli, type CliProcess } from "./process.js";

export interface Node {
  proc: CliProcess;
  url: string;
  home: string;
}

export class Cluster {
  readonly nodes: Node[] = [];
  readonly clients: TestClient[] = [];
  constructor(
    private readonly databaseUrl: string,
    private readonly mock: MockModelServer,
    private readonly env: Record<string, string> = {},
  ) {}

  async spawn(extraEnv: Record<string, string> = {}): Promise<Node> {
    const home = await mkdtemp(path.join(os.tmpdir(), "aas-cluster-"));
    const proc = spawnCli(["serve", "--listen", "ws://127.0.0.1:0", "--home", home, "--database-url", this.databaseUrl], {
      env: {
        OPENAI_BASE_URL: this.mock.openaiBaseUrl,
        OPENAI_API_KEY: "test",
        ANTHROPIC_BASE_URL: this.mock.anthropicBaseUrl,
        ANTHROPIC_API_KEY: "test",
        APP_SERVER_MODEL_PROVIDER: "openai",
        APP_SERVER_MODEL: "mock-model",
        APP_SERVER_LEASE_TTL_MS: "1500",
        APP_SERVER_SWEEP_INTERVAL_MS: "250",
        ...this.env,
        ...extraEnv,
      },
    });
    const node = { proc, url: "", home };
    this.nodes.push(node);
    node.url = await proc.listening();
    return node;
  }

  async connect(node: Node): Promise<TestClient> {
    const c = await TestClient.initialized(node.url);
    this.clients.push(c);
    return c;
  }

  /** Two processes, A and B, each with a connected client. */
  async pair(extraEnv: Record<string, string> = {}): Promise<{ a: Node; b: Node; ca: TestClient; cb: TestClient }> {
    const a = await this.spawn(extraEnv);
    const b = await this.spawn(extraEnv);
    return { a, b, ca: await this.connect(a), cb: await this.connect(b) };
  }

  async close(): Promise<void> {
    for (const c of this.clients) await c.close().catch(() => {});
    for (const n of this.nodes) {
      await n.proc.kill().catch(() => {});
      await rm(n.home, { recursive: true, force: true });
    }
  }
}

/** Polls `check` until it returns a value (bounded by attempts, not by a wall-clock limit in the test). */
export async function eventually<T>(check: () => Promise<T | undefined | null | false>, attempts = 200, pauseMs = 50, what = "the condition"): Promise<T> {
  for (let i = 0; i < attempts; i++) {
    const v = await check();
    if (v) return v;
    await new Promise((r) => setTimeout(r, pauseMs));
  }
  throw new Error(`${what} was not reached in ${attempts} checks ${pauseMs} ms apart`);
}

/** What each test of a cluster file gets (useCluster): fresh for every test, closed after it. */
export interface ClusterFixture {
  mock: MockModelServer;
  database: { url: string; drop(): Promise<void> };
  cluster: Cluster;
  /** A client of the test's database, for reading what the processes stored. */
  sql: postgres.Sql;
  /** Gates to open after the test (a turn held mid-stream must not outlive it). */
  gates: Array<() => void>;
}

/**
 * Registers beforeEach/afterEach that give each test a mock model, a fresh Postgres database on
 * TEST_DATABASE_URL and a Cluster of processes on it started with `env`; the returned object's
 * fields are the current test's.
 */
export function useCluster(env: Record<string, string> = {}): ClusterFixture {
  const f = {} as ClusterFixture;
  beforeEach(async () => {
    f.mock = await startMockModelServer();
    if (!TEST_DATABASE_URL) throw new Error("TEST_DATABASE_URL is not set");
    f.database = await freshPostgresDatabase(TEST_DATABASE_URL);
    f.cluster = new Cluster(f.database.url, f.mock, env);
    f.sql = postgres(f.database.url, { max: 2, onnotice: () => {} });
    f.gates = [];
  });
  afterEach(async () => {
    for (const open of f.gates) open();
    await f.cluster.close();
    await f.sql.end();
    await f.mock.close();
    await f.database.drop();
  });
  return f;
}
