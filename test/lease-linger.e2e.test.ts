/**
 * A process alone in its cluster keeps a thread's lease between turns (runtime/thread-leases.ts):
 * taking and giving it back cost two durable commits a turn. It gives the lease back as soon as
 * another process says hello, when the thread is unloaded, and when it stops. Real `app-server
 * serve` processes on a fresh Postgres database; the lease is read from the thread's row.
 */
import { describe, expect, it } from "vitest";
import { TEST_DATABASE_URL } from "./support/db.js";
import type { TestClient } from "./support/client.js";
import { text, turnCompleted } from "./support/turns.js";
import { eventually, useCluster } from "./support/cluster.js";

const TIMEOUT = 120_000;

describe.skipIf(!TEST_DATABASE_URL)("the lease of a thread between turns", () => {
  // 30 s TTL: a process starved of CPU on a loaded machine keeps its registration (cluster.e2e.test.ts).
  const fx = useCluster({ APP_SERVER_LEASE_TTL_MS: "30000" });

  const leaseOf = async (threadId: string) => {
    const [row] = await fx.sql<{ owner_id: string | null; lease_epoch: number }[]>`select owner_id, lease_epoch from threads where id = ${threadId}`;
    if (!row) throw new Error(`no thread ${threadId}`);
    return { owner: row.owner_id, epoch: Number(row.lease_epoch) };
  };
  const turn = async (c: TestClient, threadId: string, word: string) => {
    fx.mock.enqueue({ text: `re:${word}` });
    const t = (await c.request("turn/start", { threadId, input: text(word) })).turn;
    expect((await turnCompleted(c, t.id)).params.turn.status).toBe("completed");
  };

  it("is kept while the process is alone and given back when another process joins, which then runs the thread", async () => {
    const a = await fx.cluster.spawn();
    const ca = await fx.cluster.connect(a);
    const threadId = (await ca.request("thread/start", {})).thread.id;
    await turn(ca, threadId, "one");
    const afterOne = await leaseOf(threadId);
    expect(afterOne.owner).not.toBeNull();
    await turn(ca, threadId, "two");
    await turn(ca, threadId, "three");
    // The same lease all along: not given back and taken again (which bumps the epoch) per turn.
    expect(await leaseOf(threadId)).toEqual(afterOne);

    // B's hello reaches A, which gives the idle thread back before welcoming it.
    const b = await fx.cluster.spawn();
    await eventually(async () => (await leaseOf(threadId)).owner === null, 200, 50, "the lease given back");
    const cb = await fx.cluster.connect(b);
    await cb.request("thread/resume", { threadId });
    await turn(cb, threadId, "four");
    expect(fx.mock.requests.at(-1)!.rawBody).toContain("re:three");
    const onB = await leaseOf(threadId);
    expect(onB.epoch).toBeGreaterThan(afterOne.epoch);
    // Not alone any more: B gives it back after its turn, so A runs the next one at once.
    await eventually(async () => (await leaseOf(threadId)).owner === null, 200, 50, "B's lease given back");
    await turn(ca, threadId, "five");
    expect(fx.mock.requests.at(-1)!.rawBody).toContain("re:four");
  }, TIMEOUT);

  it("is given back when the thread is unloaded, and when the process stops", async () => {
    const a = await fx.cluster.spawn();
    const ca = await fx.cluster.connect(a);
    const first = (await ca.request("thread/start", {})).thread.id;
    const second = (await ca.request("thread/start", {})).thread.id;
    await turn(ca, first, "one");
    await turn(ca, second, "two");
    expect((await leaseOf(first)).owner).not.toBeNull();
    expect((await leaseOf(second)).owner).not.toBeNull();

    // Nobody follows the first thread any more: it is unloaded and its lease goes with it.
    await ca.request("thread/unsubscribe", { threadId: first });
    await eventually(async () => (await leaseOf(first)).owner === null, 200, 50, "the unloaded thread's lease given back");
    expect((await leaseOf(second)).owner).not.toBeNull();

    // A stop (SIGTERM) gives back the rest: the row points at no process that is gone.
    a.proc.child.kill("SIGTERM");
    expect((await a.proc.exited).code).toBe(0);
    expect((await leaseOf(second)).owner).toBeNull();
  }, TIMEOUT);
});
