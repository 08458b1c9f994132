/**
 * Postgres outages (issue 12): a private PostgreSQL server (test/support/private-pg.ts, never the
 * machine's own) is killed while a turn runs a command on process A, with a client of process B
 * following the thread. Clients are told no ending the store does not have (issue 31): only that
 * the ending waits for the database (`error`, willRetry); while the database is away a new turn on
 * the thread is refused with a clear error, and the servers keep answering; once it is back the
 * ending is recorded and then told — once, with the seqs it has in the log (turn failed, thread
 * systemError, no item stuck) — B's client learns it from the log, and new turns are accepted again.
 */
import { writeFileSync } from "node:fs";
import path from "node:path";
import postgres from "postgres";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { makeWorkspace } from "./support/approvals.js";
import { Cluster, eventually } from "./support/cluster.js";
import { isDelta, threadNotifications } from "./support/durability.js";
import { startMockModelServer, type MockModelServer } from "./support/mock-model-server.js";
import { noPrivatePg, PrivatePostgres } from "./support/private-pg.js";
import { parseJson } from "./support/process.js";
import { text, turnCompleted } from "./support/turns.js";

const TIMEOUT = 180_000;

describe.skipIf(noPrivatePg)("Postgres outage mid-turn (private server)", () => {
  let pg: PrivatePostgres | null = null;
  let mock: MockModelServer | null = null;
  let cluster: Cluster | null = null;
  let ws: ReturnType<typeof makeWorkspace> | null = null;

  beforeEach(async () => {
    pg = await PrivatePostgres.create();
    mock = await startMockModelServer();
    ws = makeWorkspace();
  });
  afterEach(async () => {
    // Every step on its own: a failure in one must not leave the private server running.
    await cluster?.close().catch(() => {});
    await mock?.close().catch(() => {});
    ws?.cleanup();
    pg?.destroy();
    cluster = mock = ws = pg = null;
  });

  it("the store records the ending clients were told, and turns wait for it", async () => {
    // Lease TTL 1.5 s: the outage below outlasts it, so the sweepers must not take the thread.
    cluster = new Cluster(pg!.url, mock!);
    const a = await cluster.spawn();
    const b = await cluster.spawn();
    const ca = await cluster.connect(a);
    const cb = await cluster.connect(b);
    const threadId = (await ca.request("thread/start", { cwd: ws!.dir, approvalPolicy: "never", sandbox: "danger-full-access" })).thread.id;
    await cb.request("thread/resume", { threadId });
    // The command runs until the test lets it finish: the database dies while it runs.
    mock!.enqueue({ toolCalls: [{ name: "shell", arguments: { command: "while [ ! -f go ]; do sleep 0.05; done; echo ran" } }] }, { text: "never asked" });
    const t1 = (await ca.request("turn/start", { threadId, input: text("run it") })).turn;
    const started = await ca.waitForNotification("item/started", (p) => p.item?.type === "commandExecution");
    const commandId = started.params.item.id as string;

    pg!.kill();
    writeFileSync(path.join(ws!.dir, "go"), "");
    // The turn has ended, but the store does not know: clients hear that the ending waits for it.
    const waiting = await ca.waitForNotification("error", (p) => p.turnId === t1.id && p.willRetry === true, 60_000);
    expect(waiting.params.error.message).toMatch(/database is unavailable/);
    expect(ca.notifications("turn/completed").filter((f) => f.params.turn.id === t1.id)).toEqual([]);

    // The database is away: the thread's recorded state is not what clients know — no new turn,
    // and the answer says why (the access check and quotas need the database before the runtime's
    // own "not recorded yet" refusal would).
    await expect(ca.request("turn/start", { threadId, input: text("too soon") })).rejects.toThrow(/database is unavailable; retry/);
    // The servers keep answering what they can.
    expect((await ca.request("thread/loaded/list", {})).data).toContain(threadId);
    expect((await cb.request("thread/loaded/list", {})).data).toContain(threadId);
    expect(a.proc.child.exitCode).toBeNull();

    // The outage outlasts the lease TTL (1.5 s) twice over: every lease reads expired when the
    // database is back, and the sweepers must still leave a live process's thread alone.
    await new Promise((r) => setTimeout(r, 3500));
    expect(ca.notifications("turn/completed").filter((f) => f.params.turn.id === t1.id), "no ending told while unrecorded").toEqual([]);
    pg!.start();
    // Recorded, then told: once, as stored.
    const told = (await turnCompleted(ca, t1.id, 60_000)).params.turn;
    expect(told.status).toBe("failed");
    const toldCommand = ca.notifications("item/completed").find((f) => f.params.item.id === commandId);
    expect(toldCommand, "clients are told the command item ended").toBeTruthy();
    const sql = postgres(pg!.url, { max: 1, onnotice: () => {} });
    try {
      const [turn] = await eventually(async () => {
        const rows = await sql`select status, error from turns where id = ${t1.id}`;
        return rows[0]?.status !== "inProgress" ? rows : null;
      }, 400);
      expect(turn!.status).toBe("failed");
      expect(turn!.error.message).toBe(told.error.message);
      const [thread] = await sql`select system_error from threads where id = ${threadId}`;
      expect(thread!.system_error).toBe(true);
      const open = await sql`select id from items where thread_id = ${threadId} and completed_at_ms is null`;
      expect(open).toEqual([]);
      const [command] = await sql`select status, payload from items where id = ${commandId}`;
      expect(command!.payload).toEqual(toldCommand!.params.item);

      // The log holds the very events A's client saw, at the same seqs (deltas are never stored).
      const seen = threadNotifications(ca, threadId)
        .filter((f) => !isDelta(f.method!) && typeof f.params.seq === "number")
        .map((f) => `${f.params.seq} ${f.method}`);
      const stored = (await sql`select seq, method from thread_events where thread_id = ${threadId} order by seq`).map((r) => `${r.seq} ${r.method}`);
      // The `error` that said the ending waits is the one notification told but not stored (by design).
      expect(stored).toEqual(seen.filter((s) => s !== `${waiting.params.seq} error`));
      const ends = stored.filter((s) => s.endsWith("turn/completed"));
      expect(ends).toHaveLength(1);

      // B's client learns the ending from the log once it is recorded.
      const onB = (await turnCompleted(cb, t1.id, 60_000)).params.turn;
      expect(onB.status).toBe("failed");
      // Right after its own outage every lease reads expired, B's too: A must not have taken that
      // for "nobody to relay to" (the wake-up for the recorded ending would have gone nowhere).
      const stopped = a.proc.stderrLines.map(parseJson).filter((l) => l?.msg === "no other live process: relaying stopped");
      expect(stopped).toEqual([]);

      // Recorded: new turns are accepted again, from either process.
      mock!.enqueue({ text: "back" });
      const t2 = await eventually(async () => {
        try {
          return (await cb.request("turn/start", { threadId, input: text("again") })).turn;
        } catch (err) {
          if (/not recorded yet|already running/.test(String(err))) return null;
          throw err;
        }
      }, 400);
      expect((await turnCompleted(cb, t2.id, 60_000)).params.turn.status).toBe("completed");
      const [t2row] = await eventually(async () => {
        const rows = await sql`select status from turns where id = ${t2.id}`;
        return rows[0]?.status === "completed" ? rows : null;
      });
      expect(t2row!.status).toBe("completed");
    } finally {
      await sql.end();
    }
  }, TIMEOUT);
});
