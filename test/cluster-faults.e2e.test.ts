// @needs-os-sandbox: the turn runs a shell command in the OS sandbox of its process.
/**
 * One ending per turn, told as stored, when one process loses its database (issue 31): process A
 * reaches Postgres through a proxy the test cuts; B keeps its link. A's turn ends while A is cut
 * off: A tells its clients only that the ending waits for the database. Past the lease TTL, B's
 * sweeper closes the turn `interrupted`; when A's link is back, A finds its lease taken, drops its
 * own ending and delivers B's — so every client, on A and on B, sees the stored ending, once —
 * and A's client keeps following the thread (the next turn, on B, reaches it).
 */
import { writeFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { TEST_DATABASE_URL } from "./support/db.js";
import type { TestClient } from "./support/client.js";
import { text, turnCompleted } from "./support/turns.js";
import { threadNotifications, isDelta } from "./support/durability.js";
import { makeWorkspace } from "./support/approvals.js";
import { Cluster, eventually, useCluster, type Node } from "./support/cluster.js";
import { TcpProxy } from "./support/tcp-proxy.js";

const TIMEOUT = 120_000;
const SHORT_LEASES = { APP_SERVER_LEASE_TTL_MS: "1500" };

describe.skipIf(!TEST_DATABASE_URL)("a process cut off from the database", () => {
  const fx = useCluster(SHORT_LEASES);

  /** `wait`, and if it fails: what the process warned of, the thread's log and what the client got. */
  async function explained<T>(wait: Promise<T>, node: Node, client: TestClient, threadId: string): Promise<T> {
    try {
      return await wait;
    } catch (err) {
      const log = [...node.proc.stdoutLines, ...node.proc.stderrLines].filter((l) => !l.includes('"level":30'));
      const stored = (await fx.sql`select seq, method from thread_events where thread_id = ${threadId} order by seq`).map((r) => `${r.seq} ${r.method}`);
      const got = client.notifications().map((f) => `${f.params?.seq} ${f.method}`);
      throw new Error(`${(err as Error).message}\nprocess log:\n${log.join("\n")}\nstored: ${stored.join(", ")}\nreceived: ${got.join(", ")}`);
    }
  }

  /**
   * A, through a proxy the test faults (lease TTL `ttlMs`), runs a turn whose shell command waits
   * for a file `go` and then echoes `output`; B, connected directly, follows the thread.
   */
  async function commandWaitingOnA(ttlMs: string, output: string) {
    const ws = makeWorkspace();
    const proxy = await TcpProxy.start({ host: "127.0.0.1", port: Number(new URL(fx.database.url).port || 5432) });
    const viaProxy = new Cluster(proxy.urlFor(fx.database.url), fx.mock, { APP_SERVER_LEASE_TTL_MS: ttlMs });
    const close = async () => {
      await viaProxy.close();
      await proxy.close();
      ws.cleanup();
    };
    try {
      const a = await viaProxy.spawn();
      const ca = await viaProxy.connect(a);
      const b = await fx.cluster.spawn();
      const cb = await fx.cluster.connect(b);
      const threadId = (await ca.request("thread/start", { cwd: ws.dir, approvalPolicy: "never", sandbox: "danger-full-access" })).thread.id as string;
      await cb.request("thread/resume", { threadId });
      fx.mock.enqueue({ toolCalls: [{ name: "shell", arguments: { command: `while [ ! -f go ]; do sleep 0.05; done; echo ${output}` } }] }, { text: "never asked" });
      const t1 = (await ca.request("turn/start", { threadId, input: text("run it") })).turn;
      await ca.waitForNotification("item/started", (p) => p.item?.type === "commandExecution");
      return { proxy, a, ca, b, cb, threadId, t1, go: () => writeFileSync(path.join(ws.dir, "go"), ""), close };
    } catch (err) {
      await close();
      throw err;
    }
  }

  it("tells its clients no ending it could not store; the ending another process stored reaches them once", async () => {
    // A's own TTL is longer: a heartbeat of A starved of CPU on a loaded machine must not let B take
    // the thread before the cut (the takeover waits for A's registration to expire either way).
    const { proxy, ca, cb, threadId, t1, go, close } = await commandWaitingOnA("6000", "ran");
    try {
      proxy.cut();
      go();
      await ca.waitForNotification("error", (p) => p.turnId === t1.id && p.willRetry === true, 60_000);
      // Past A's lease TTL (6 s), B's sweeper closes the turn (A's registration has expired).
      const [swept] = await eventually(async () => {
        const rows = await fx.sql`select status from turns where id = ${t1.id}`;
        return rows[0]?.status !== "inProgress" ? rows : null;
      }, 1200);
      expect(swept!.status).toBe("interrupted");
      const endsOf = (c: TestClient) => c.notifications("turn/completed").filter((f) => f.params.turn.id === t1.id);
      expect(endsOf(ca), "A told no ending while cut off").toEqual([]);

      proxy.restore();
      const onA = (await turnCompleted(ca, t1.id, 60_000)).params.turn;
      const onB = (await turnCompleted(cb, t1.id, 60_000)).params.turn;
      expect(onA.status).toBe("interrupted");
      expect(onB.status).toBe("interrupted");
      const stored = (await fx.sql`select seq, method from thread_events where thread_id = ${threadId} order by seq`).map((r) => `${r.seq} ${r.method}`);
      expect(stored.filter((s) => s.endsWith("turn/completed"))).toHaveLength(1);
      // Let anything still in flight arrive, then: each client saw the stored ending once, and
      // nothing with a seq the log does not have (deltas and the waiting notice aside).
      await new Promise((r) => setTimeout(r, 500));
      for (const c of [ca, cb]) {
        expect(endsOf(c)).toHaveLength(1);
        const seen = threadNotifications(c, threadId)
          .filter((f) => !isDelta(f.method!) && !(f.method === "error" && f.params.willRetry) && typeof f.params.seq === "number")
          .map((f) => `${f.params.seq} ${f.method}`);
        for (const s of seen) expect(stored, `told but not stored: ${s}`).toContain(s);
        expect(new Set(seen).size, "no notification twice").toBe(seen.length);
      }
      // A's client is not left in the dark: the next turn, on B, reaches it live.
      const t2 = (await cb.request("turn/start", { threadId, input: text("again") })).turn;
      expect((await turnCompleted(cb, t2.id, 60_000)).params.turn.status).toBe("completed");
      const onA2 = await turnCompleted(ca, t2.id, 60_000);
      expect(onA2.params.turn.status).toBe("completed");
      const itemsOf = (c: TestClient) => c.notifications("item/completed").filter((f) => f.params.turnId === t2.id).map((f) => `${f.params.item.type} ${f.params.item.id} ${f.params.item.text ?? ""}`);
      expect(itemsOf(ca)).toEqual(itemsOf(cb));
      expect(itemsOf(ca).filter((i) => i.startsWith("agentMessage "))).toHaveLength(1);
    } finally {
      await close();
    }
  }, TIMEOUT);

  // A hung network path (or a frozen process) in the middle of a transaction: A's fence has
  // row-locked the thread, the server waits for the rest of the transaction, and TCP keeps the
  // path open. B's sweeper skips a locked thread, so the turn stayed in progress, and the thread
  // A's, for as long as the path hung. Now the server ends A's session once it sits idle in the
  // transaction for A's lease TTL, and B's sweeper, finding A dead and the thread still locked,
  // ends A's sessions (stuck inside a statement no server timeout covers); B takes the turn over.
  // Once the path is back, A learns it lost the lease and its client gets B's ending.
  it("a link that hangs mid-transaction holds the thread no longer than its lease", async () => {
    // The marker is only in the command's output (the shell computes it), so the first statement
    // that carries it records the command's completion, after the fence.
    const { proxy, a, ca, b, cb, threadId, t1, go, close } = await commandWaitingOnA("4000", "hang-$((6*7))-here");
    try {
      const stalled = proxy.stallWhen("hang-42-here");
      go();
      await stalled;
      // A's session holds a transaction that wrote (the fence's row lock): between two statements
      // ("idle in transaction") or inside one whose rest never came ("active", reading).
      await eventually(async () => {
        const rows = await fx.sql`select 1 from pg_stat_activity where datname = current_database() and backend_xid is not null and application_name like 'agent-app-server %'`;
        return rows.length ? rows : null;
      }, 600, 50, "A's open transaction");
      // A's lease and its session end; B sweeps the turn while A's path still hangs.
      const [swept] = await eventually(async () => {
        const rows = await fx.sql`select status from turns where id = ${t1.id}`;
        return rows[0]?.status !== "inProgress" ? rows : null;
      }, 1200, 50, "the turn closed by B while A hangs");
      expect(swept!.status).toBe("interrupted");
      expect((await explained(turnCompleted(cb, t1.id, 30_000), b, cb, threadId)).params.turn.status).toBe("interrupted");
      expect(ca.notifications("turn/completed").filter((f) => f.params.turn.id === t1.id), "A told nothing while hung").toEqual([]);

      // The path comes back: A learns its session is gone, finds the lease taken and tells its
      // client the stored ending, once.
      proxy.unstall();
      expect((await explained(turnCompleted(ca, t1.id, 30_000), a, ca, threadId)).params.turn.status).toBe("interrupted");
      const stored = (await fx.sql`select method from thread_events where thread_id = ${threadId} and method = 'turn/completed'`).length;
      expect(stored).toBe(1);
      const t2 = (await cb.request("turn/start", { threadId, input: text("again") })).turn;
      expect((await turnCompleted(ca, t2.id, 60_000)).params.turn.status).toBe("completed");
      expect(ca.notifications("turn/completed").filter((f) => f.params.turn.id === t1.id)).toHaveLength(1);
    } finally {
      await close();
    }
  }, TIMEOUT);
});
