/**
 * `app-server serve --workers N` (issue 16): a real spawned primary with two workers on a fresh
 * PostgreSQL database. Two clients on separate connections land on different workers (their
 * turns run under leases of two different processes); a turn started through one worker streams
 * to a client that resumed the thread on the other; a killed worker is restarted by the primary;
 * SIGTERM to the primary stops every worker. With PGlite or stdio, --workers is refused.
 */
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
import { parseJson, runCli, spawnCli, type CliProcess } from "./support/process.js";

const TIMEOUT = 180_000;

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
};

describe.skipIf(!TEST_DATABASE_URL)("serve --workers 2 on PostgreSQL", () => {
  let mock: MockModelServer;
  let database: { url: string; drop(): Promise<void> };
  let sql: postgres.Sql;
  let home: string;
  let primary: CliProcess | undefined;
  const clients: TestClient[] = [];
  const gates: Array<() => void> = [];

  beforeEach(async () => {
    mock = await startMockModelServer();
    database = await freshPostgresDatabase(TEST_DATABASE_URL!);
    sql = postgres(database.url, { max: 2, onnotice: () => {} });
    home = await mkdtemp(path.join(os.tmpdir(), "aas-workers-"));
  });
  afterEach(async () => {
    for (const open of gates.splice(0)) open();
    for (const c of clients.splice(0)) await c.close().catch(() => {});
    if (primary && !primary.exit) {
      // Workers first (the primary would restart them), then the primary.
      for (const pid of readyPids(primary)) if (alive(pid)) process.kill(pid, "SIGKILL");
      await primary.kill();
    }
    await sql.end();
    await mock.close();
    await database.drop();
    await rm(home, { recursive: true, force: true });
  });

  /** Worker pids the primary reported ready, in order. */
  const readyPids = (p: CliProcess) =>
    p.stderrLines.map(parseJson).filter((l) => l?.msg === "worker ready").map((l) => l.workerPid as number);

  async function start(): Promise<{ url: string; pids: number[] }> {
    primary = spawnCli(["serve", "--listen", "ws://127.0.0.1:0", "--home", home, "--database-url", database.url, "--workers", "2"], {
      env: {
        OPENAI_BASE_URL: mock.openaiBaseUrl,
        OPENAI_API_KEY: "test",
        APP_SERVER_MODEL_PROVIDER: "openai",
        APP_SERVER_MODEL: "mock-model",
        // The default lease TTL (30 s): both workers stay alive, and with a short TTL a worker
        // starved of CPU for a moment on a loaded machine lost its leases to the other's sweeper.
      },
    });
    // The primary's own "listening" line comes once every worker is ready (workers log theirs too).
    const line = await primary.waitForLine("stderr", (l) => {
      const j = parseJson(l);
      return j?.msg === "listening" && j.workers === 2;
    });
    const pids = readyPids(primary);
    expect(pids).toHaveLength(2);
    expect(new Set([...pids, primary.child.pid]).size).toBe(3);
    return { url: JSON.parse(line).url, pids };
  }

  const connect = async (url: string) => {
    const c = await TestClient.initialized(url);
    clients.push(c);
    return c;
  };
  const gated = (chunks: string[]) => {
    const gate = deferred();
    gates.push(gate.open);
    mock.enqueue({ text: chunks, gate: { afterEvents: afterFirstTextDelta("openai"), wait: gate.promise } });
    return gate;
  };

  it("two connections land on different workers; a turn started through one streams to a client resumed on the other", async () => {
    const { url } = await start();
    const ca = await connect(url);
    const cb = await connect(url);
    const ta = (await ca.request("thread/start", {})).thread.id;
    const tb = (await cb.request("thread/start", {})).thread.id;

    // A turn runs on the process its client reached, under that thread's lease: two live turns
    // started through the two connections are held by two different processes.
    const gateA = gated(["one ", "two"]);
    const turnA = (await ca.request("turn/start", { threadId: ta, input: text("a") })).turn;
    await ca.waitForNotification("item/agentMessage/delta", (p) => p.turnId === turnA.id);
    const gateB = gated(["three ", "four"]);
    const turnB = (await cb.request("turn/start", { threadId: tb, input: text("b") })).turn;
    await cb.waitForNotification("item/agentMessage/delta", (p) => p.turnId === turnB.id);
    const owners = await sql<{ id: string; ownerId: string | null }[]>`select id, owner_id as "ownerId" from threads where id in (${ta}, ${tb})`;
    expect(owners).toHaveLength(2);
    expect(owners.every((o) => o.ownerId)).toBe(true);
    expect(owners[0]!.ownerId).not.toBe(owners[1]!.ownerId);
    const [{ n }] = await sql<{ n: number }[]>`select count(*)::int as n from processes where expires_at > now()`;
    expect(n).toBe(2);

    // B's client (on the other worker) follows A's live turn: deltas relayed, the end seen.
    await cb.request("thread/resume", { threadId: ta });
    gateA.open();
    gateB.open();
    const done = await turnCompleted(cb, turnA.id, 60_000);
    expect(done.params.turn.status).toBe("completed");
    await turnCompleted(ca, turnA.id, 60_000);
    await turnCompleted(cb, turnB.id, 60_000);
    const relayed = cb
      .notifications("item/agentMessage/delta")
      .filter((f) => f.params.turnId === turnA.id)
      .map((f) => f.params.delta)
      .join("");
    expect(relayed).toContain("two");
  }, TIMEOUT);

  it("a killed worker is restarted by the primary; SIGTERM to the primary stops every worker", async () => {
    const { url, pids } = await start();
    const victim = pids[0]!;
    process.kill(victim, "SIGKILL");
    await primary!.waitForLine("stderr", (l) => {
      const j = parseJson(l);
      return j?.msg === "worker exited unexpectedly: restarting it" && j.workerPid === victim;
    });
    const replacement = await eventually(async () => readyPids(primary!).find((p) => !pids.includes(p)), 1200, 100);
    expect(alive(replacement)).toBe(true);
    expect(alive(victim)).toBe(false);

    // Still serving: connections reach the workers (the new one among them), turns complete.
    for (let i = 0; i < 2; i++) {
      const c = await connect(url);
      const threadId = (await c.request("thread/start", {})).thread.id;
      mock.enqueue({ text: `reply ${i}` });
      const t = (await c.request("turn/start", { threadId, input: text(`q${i}`) })).turn;
      expect((await turnCompleted(c, t.id, 60_000)).params.turn.status).toBe("completed");
    }

    const workersNow = [pids[1]!, replacement];
    primary!.child.kill("SIGTERM");
    const exit = await primary!.exited;
    expect(exit).toEqual({ code: 0, signal: null });
    for (const pid of workersNow) expect(alive(pid), `worker ${pid} still running`).toBe(false);
    expect(primary!.stderrLines.map(parseJson).filter((l) => l?.msg === "worker stopped")).toHaveLength(2);
  }, TIMEOUT);
});

describe("serve --workers refusals", () => {
  let home: string;
  beforeEach(async () => {
    home = await mkdtemp(path.join(os.tmpdir(), "aas-workers-"));
  });
  afterEach(async () => {
    await rm(home, { recursive: true, force: true });
  });

  it("refuses --workers with the embedded PGlite database, and with stdio", async () => {
    const pglite = await runCli(["serve", "--listen", "ws://127.0.0.1:0", "--home", home, "--workers", "2"]);
    expect(pglite.exit.code).toBe(2);
    expect(pglite.stderr).toMatch(/--workers needs PostgreSQL.*PGlite/);

    const stdio = await runCli(["serve", "--listen", "stdio://", "--home", home, "--database-url", "postgres://u@127.0.0.1:1/x", "--workers", "auto"]);
    expect(stdio.exit.code).toBe(2);
    expect(stdio.stderr).toMatch(/--workers needs a WebSocket --listen/);

    const bad = await runCli(["serve", "--home", home, "--database-url", "postgres://u@127.0.0.1:1/x", "--workers", "0"]);
    expect(bad.exit.code).toBe(2);
    expect(bad.stderr).toMatch(/invalid --workers: 0/);
  }, TIMEOUT);

  it("exits non-zero when the workers cannot start (database unreachable)", async () => {
    const p = await runCli(["serve", "--listen", "ws://127.0.0.1:0", "--home", home, "--database-url", "postgres://postgres@127.0.0.1:1/none", "--workers", "2"]);
    expect(p.exit.code).toBe(1);
    expect(p.stderrLines.map(parseJson).some((l) => l?.msg === "a worker could not start")).toBe(true);
  }, TIMEOUT);
});
