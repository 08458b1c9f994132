/**
 * GET /metrics with `serve --workers 2` (src/workers.ts): a real spawned primary with two workers
 * on a fresh PostgreSQL database. Turns run on both workers (proved by their leases: two
 * different owners while both are held); every scrape — each a new TCP connection, so they reach
 * both workers in turn — reports the sum of both. A killed worker's counts stay counted after its
 * restart, and counters never go backwards across all scrapes. A worker that does not answer (a
 * stopped process) does not hang the scrape: its last numbers are used, and the scrape and the
 * primary's log say which worker is missing. With a token, /metrics needs it as without workers;
 * a stopped primary fails the scrape (500) rather than let a worker serve its own numbers alone.
 */
import http from "node:http";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import postgres from "postgres";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { TEST_DATABASE_URL } from "./support/db.js";
import { TestClient } from "./support/client.js";
import { startMockModelServer, type MockModelServer } from "./support/mock-model-server.js";
import { text, turnCompleted } from "./support/turns.js";
import { afterFirstTextDelta } from "./support/wire.js";
import { deferred, freshPostgresDatabase } from "./support/durability.js";
import { eventually } from "./support/cluster.js";
import { parseJson, spawnCli, type CliProcess } from "./support/process.js";

const TIMEOUT = 240_000;

if (!TEST_DATABASE_URL) console.warn("[skipped] test/workers-metrics.e2e.test.ts: --workers needs PostgreSQL and TEST_DATABASE_URL is not set");

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
};

/**
 * One scrape, on a new connection unless an agent is given (without keep-alive: a pooled
 * connection would stay on one worker).
 */
function scrape(url: string, opts: { agent?: http.Agent; headers?: Record<string, string> } = {}): Promise<{ status: number; body: string }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const headers = { ...(opts.agent ? {} : { connection: "close" }), ...opts.headers };
    const req = http.get({ host: hostname, port, path: "/metrics", agent: opts.agent ?? false, headers }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => (body += c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      res.on("error", reject);
    });
    req.on("error", reject);
  });
}

/** Sample lines as `name{labels}` → value; `cumulative` holds the series of counters and histograms (by their TYPE). */
function samples(body: string): Map<string, number> & { cumulative: Set<string> } {
  const out = Object.assign(new Map<string, number>(), { cumulative: new Set<string>() });
  const cumulativeNames = new Set<string>();
  for (const line of body.split("\n")) {
    const type = /^# TYPE (\S+) (counter|histogram)$/.exec(line);
    if (type) cumulativeNames.add(type[1]!);
    if (!line || line.startsWith("#")) continue;
    const at = line.lastIndexOf(" ");
    const series = line.slice(0, at);
    out.set(series, Number(line.slice(at + 1)));
    // A histogram's series are NAME_bucket, NAME_count and NAME_sum. (Not the name's suffix alone:
    // Node's nodejs_active_handles_total is a gauge.)
    const name = series.replace(/\{.*$/, "");
    if (cumulativeNames.has(name) || cumulativeNames.has(name.replace(/_(bucket|count|sum)$/, ""))) out.cumulative.add(series);
  }
  return out;
}

/** Every counter and histogram series of `later` is at least its value in `earlier`. */
function expectMonotonic(earlier: Map<string, number> & { cumulative: Set<string> }, later: Map<string, number>, what: string) {
  // Told apart by TYPE: an unlabelled counter is there from the start; Node's handle count is a gauge.
  expect(earlier.cumulative.has("app_server_outbound_overflow_closes_total")).toBe(true);
  expect(earlier.cumulative.has("nodejs_active_handles_total")).toBe(false);
  for (const [series, value] of earlier) {
    if (!earlier.cumulative.has(series)) continue;
    expect(later.get(series) ?? 0, `${series} went backwards ${what}`).toBeGreaterThanOrEqual(value);
  }
}

describe.skipIf(!TEST_DATABASE_URL)("/metrics with serve --workers 2", () => {
  let mock: MockModelServer;
  let database: { url: string; drop(): Promise<void> };
  let sql: postgres.Sql;
  let home: string;
  let primary: CliProcess | undefined;
  const clients: TestClient[] = [];
  const gates: Array<() => void> = [];
  const stopped = new Set<number>();

  beforeEach(async () => {
    mock = await startMockModelServer();
    database = await freshPostgresDatabase(TEST_DATABASE_URL!);
    sql = postgres(database.url, { max: 2, onnotice: () => {} });
    home = await mkdtemp(path.join(os.tmpdir(), "aas-workers-metrics-"));
  });
  afterEach(async () => {
    for (const pid of stopped) if (alive(pid)) process.kill(pid, "SIGCONT");
    stopped.clear();
    for (const open of gates.splice(0)) open();
    for (const c of clients.splice(0)) await c.close().catch(() => {});
    if (primary && !primary.exit) {
      // Workers first (the primary would restart them), then the primary.
      for (const { pid } of readyWorkers(primary)) if (alive(pid)) process.kill(pid, "SIGKILL");
      await primary.kill();
    }
    primary = undefined;
    await sql.end();
    await mock.close();
    await database.drop();
    await rm(home, { recursive: true, force: true });
  });

  /** Workers the primary reported ready, in order: their pid and number. */
  const readyWorkers = (p: CliProcess) =>
    p.stderrLines
      .map(parseJson)
      .filter((l) => l?.msg === "worker ready")
      .map((l) => ({ pid: l.workerPid as number, index: l.worker as number }));

  async function start(env: Record<string, string>): Promise<string> {
    primary = spawnCli(["serve", "--listen", "ws://127.0.0.1:0", "--home", home, "--database-url", database.url, "--workers", "2"], {
      env: { OPENAI_BASE_URL: mock.openaiBaseUrl, OPENAI_API_KEY: "test", APP_SERVER_MODEL_PROVIDER: "openai", APP_SERVER_MODEL: "mock-model", ...env },
    });
    const line = await primary.waitForLine("stderr", (l) => {
      const j = parseJson(l);
      return j?.msg === "listening" && j.workers === 2;
    });
    expect(readyWorkers(primary)).toHaveLength(2);
    return JSON.parse(line).url;
  }

  const connect = async (url: string) => {
    const c = await TestClient.initialized(url);
    clients.push(c);
    return c;
  };

  /** One completed turn on a new thread of `c`. */
  async function runTurn(c: TestClient, reply: string): Promise<void> {
    const threadId = (await c.request("thread/start", {})).thread.id;
    mock.enqueue({ text: reply });
    const t = (await c.request("turn/start", { threadId, input: text(reply) })).turn;
    expect((await turnCompleted(c, t.id, 60_000)).params.turn.status).toBe("completed");
  }

  /**
   * Two new connections (consecutive connections go to different workers: the primary's round
   * robin), a turn on each, held open until both run: their leases name two different processes.
   * Returns the clients and the two owners.
   */
  async function turnOnEachWorker(url: string): Promise<{ ca: TestClient; cb: TestClient; owners: string[] }> {
    const ca = await connect(url);
    const cb = await connect(url);
    const held: Array<{ c: TestClient; turnId: string; open: () => void; threadId: string }> = [];
    for (const [c, name] of [[ca, "a"], [cb, "b"]] as const) {
      const threadId = (await c.request("thread/start", {})).thread.id;
      const gate = deferred();
      gates.push(gate.open);
      mock.enqueue({ text: [`${name} one `, `${name} two`], gate: { afterEvents: afterFirstTextDelta("openai"), wait: gate.promise } });
      const turnId = (await c.request("turn/start", { threadId, input: text(name) })).turn.id;
      await c.waitForNotification("item/agentMessage/delta", (p) => p.turnId === turnId);
      held.push({ c, turnId, open: gate.open, threadId });
    }
    const rows = await sql<{ ownerId: string | null }[]>`select owner_id as "ownerId" from threads where id in (${held[0]!.threadId}, ${held[1]!.threadId})`;
    const owners = rows.map((r) => r.ownerId!);
    expect(owners.every(Boolean)).toBe(true);
    expect(new Set(owners).size, "the two turns ran on two different workers").toBe(2);
    for (const h of held) h.open();
    for (const h of held) expect((await turnCompleted(h.c, h.turnId, 60_000)).params.turn.status).toBe("completed");
    return { ca, cb, owners };
  }

  const completed = (s: Map<string, number>) => s.get('app_server_turns_total{status="completed"}') ?? 0;
  const modelCalls = (s: Map<string, number>) => s.get('app_server_model_call_duration_seconds_count{provider="openai",outcome="ok"}') ?? 0;

  it("every scrape reports both workers' sum; a killed and restarted worker's counts stay counted; counters never go backwards", async () => {
    // The primary's wait for a worker is far beyond anything here: every scrape has both workers.
    const url = await start({ APP_SERVER_METRICS_WORKER_TIMEOUT_MS: "120000" });
    const seen: ReturnType<typeof samples>[] = [];
    const scrapeAll = async (n: number, check: (s: Map<string, number>) => void) => {
      for (let i = 0; i < n; i++) {
        const r = await scrape(url);
        expect(r.status).toBe(200);
        const s = samples(r.body);
        check(s);
        if (seen.length > 0) expectMonotonic(seen.at(-1)!, s, `(scrape ${seen.length + 1})`);
        seen.push(s);
      }
    };
    const workersUp = (s: Map<string, number>) => [1, 2].map((w) => s.get(`app_server_worker_metrics_up{worker="${w}"}`));

    await scrapeAll(2, (s) => {
      expect(completed(s)).toBe(0);
      expect(workersUp(s)).toEqual([1, 1]);
    });

    // 2 turns on different workers, then 3 more on A's and 1 more on B's: 4 and 2, 6 in all
    // (a single worker's numbers could not be mistaken for the total).
    const { ca, cb, owners } = await turnOnEachWorker(url);
    for (let i = 0; i < 3; i++) await runTurn(ca, `a${i}`);
    await runTurn(cb, "b0");
    // Ten scrapes on ten connections (they reach the two workers in turn): all say the same.
    await scrapeAll(10, (s) => {
      expect(completed(s)).toBe(6);
      expect(modelCalls(s)).toBe(6);
      expect(s.get("app_server_connections")).toBe(2);
      expect(s.get("app_server_active_turns")).toBe(0);
      expect(s.get("app_server_approvals_pending")).toBe(0);
      expect(workersUp(s)).toEqual([1, 1]);
    });

    // Kill a worker (its numbers were in the last scrape); the primary restarts it.
    const before = readyWorkers(primary!);
    const victim = before[0]!;
    process.kill(victim.pid, "SIGKILL");
    const replacement = await eventually(async () => readyWorkers(primary!).find((w) => !before.some((b) => b.pid === w.pid)), 2400, 100);
    expect(replacement.index).toBe(victim.index);
    expect(alive(victim.pid)).toBe(false);
    // The dead worker's turns stay counted (documented: what it counted after its last scrape
    // would be lost; here it was idle since).
    await scrapeAll(6, (s) => {
      expect(completed(s)).toBe(6);
      expect(modelCalls(s)).toBe(6);
      expect(workersUp(s)).toEqual([1, 1]);
    });

    // More turns, one of them on the new worker (a third process owns a lease).
    const again = await turnOnEachWorker(url);
    expect(again.owners.some((o) => !owners.includes(o)), "one turn ran on the restarted worker").toBe(true);
    await scrapeAll(6, (s) => {
      expect(completed(s)).toBe(8);
      expect(modelCalls(s)).toBe(8);
      expect(workersUp(s)).toEqual([1, 1]);
    });
    void cb;
  }, TIMEOUT);

  it("a worker that does not answer in time: the scrape does not wait for it, uses its last numbers and says which worker is missing", async () => {
    const url = await start({ APP_SERVER_METRICS_WORKER_TIMEOUT_MS: "1000" });
    await turnOnEachWorker(url);
    // A scrape with both workers' numbers (the primary then remembers worker 2's). With this short
    // wait a worker starved of CPU may miss one; the next scrape asks again.
    const bothUp = (s: Map<string, number>) => s.get('app_server_worker_metrics_up{worker="1"}') === 1 && s.get('app_server_worker_metrics_up{worker="2"}') === 1;
    const first = await eventually(async () => {
      const s = samples((await scrape(url)).body);
      return bothUp(s) ? s : undefined;
    }, 30, 100);
    expect(completed(first)).toBe(2);

    // Stop worker 2 (SIGSTOP: alive, but answers nothing). The primary's round robin may still
    // hand it one connection, which waits until it resumes; of two scrapes at least one reaches
    // worker 1 and is answered without worker 2's fresh numbers.
    const stoppedWorker = readyWorkers(primary!).find((w) => w.index === 2)!;
    process.kill(stoppedWorker.pid, "SIGSTOP");
    stopped.add(stoppedWorker.pid);
    const pending = [scrape(url), scrape(url)];
    const answered = samples((await Promise.race(pending)).body);
    expect(answered.get('app_server_worker_metrics_up{worker="1"}')).toBe(1);
    expect(answered.get('app_server_worker_metrics_up{worker="2"}')).toBe(0);
    // Worker 2's last answer stands in for it: totals do not drop.
    expect(completed(answered)).toBe(2);
    expect(modelCalls(answered)).toBe(2);
    const logged = await primary!.waitForLine("stderr", (l) => parseJson(l)?.msg === "a worker's metrics are missing from a scrape: its last numbers were used");
    expect(JSON.parse(logged)).toMatchObject({ worker: 2, workerPid: stoppedWorker.pid });

    // Resumed: both scrapes are answered, then worker 2 reports again.
    process.kill(stoppedWorker.pid, "SIGCONT");
    stopped.delete(stoppedWorker.pid);
    for (const r of await Promise.all(pending)) {
      expect(r.status).toBe(200);
      expect(completed(samples(r.body))).toBe(2);
    }
    const recovered = await eventually(async () => {
      const s = samples((await scrape(url)).body);
      return bothUp(s) ? s : undefined;
    }, 30, 100);
    expect(completed(recovered)).toBe(2);
  }, TIMEOUT);

  it("with a token /metrics needs it, as without --workers; a primary that does not answer fails the scrape (500) instead of serving one worker's numbers", async () => {
    const token = "metrics-token-0123456789abcdef";
    const url = await start({ APP_SERVER_METRICS_WORKER_TIMEOUT_MS: "1000", APP_SERVER_AUTH_TOKEN: token });
    const auth = { authorization: `Bearer ${token}` };
    const refused = await scrape(url);
    expect(refused.status).toBe(401);
    // One kept-alive connection: it stays with the worker it reached while the primary is stopped
    // (a new connection would wait for the primary to accept it).
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const ok = await scrape(url, { agent, headers: auth });
      expect(ok.status).toBe(200);
      // The aggregate (whether the other worker made the 1 s wait does not matter here).
      expect(samples(ok.body).has('app_server_worker_metrics_up{worker="2"}')).toBe(true);

      process.kill(primary!.child.pid!, "SIGSTOP");
      stopped.add(primary!.child.pid!);
      const failed = await scrape(url, { agent, headers: auth });
      expect(failed.status).toBe(500);
      expect(failed.body).not.toContain("app_server_turns_total");
      process.kill(primary!.child.pid!, "SIGCONT");
      stopped.delete(primary!.child.pid!);

      const again = await scrape(url, { agent, headers: auth });
      expect(again.status).toBe(200);
      expect(samples(again.body).has('app_server_worker_metrics_up{worker="2"}')).toBe(true);
    } finally {
      agent.destroy();
    }
  }, TIMEOUT);
});
