// @needs-os-sandbox: the turn runs a shell command in the OS sandbox.
/**
 * A commit whose acknowledgement was lost (issue 32, item 7): the server's link to Postgres drops
 * after Postgres committed a transaction but before the server heard so. The server cannot tell;
 * it tries again — with the same numbers, so the retry finds the events already stored and adds
 * none. The store then holds each event once, and clients are told exactly what it holds.
 */
import { writeFileSync } from "node:fs";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { TEST_DATABASE_URL } from "./support/db.js";
import { TestClient } from "./support/client.js";
import { startTurnHarness, text, turnCompleted, type TurnHarness } from "./support/turns.js";
import { isDelta, threadNotifications } from "./support/durability.js";
import { makeWorkspace } from "./support/approvals.js";
import { TcpProxy } from "./support/tcp-proxy.js";

describe.skipIf(!TEST_DATABASE_URL)("a commit whose acknowledgement is lost (postgres)", () => {
  const cleanups: Array<() => Promise<unknown> | unknown> = [];
  afterEach(async () => {
    for (const c of cleanups.reverse()) await c();
    cleanups.length = 0;
  });

  it("records a command's completion once, tells it once, and the turn goes on", async () => {
    const db = new URL(TEST_DATABASE_URL!);
    const proxy = await TcpProxy.start({ host: "127.0.0.1", port: Number(db.port || 5432) });
    cleanups.push(() => proxy.close());
    const h: TurnHarness = await startTurnHarness("postgres", "openai", { database: { databaseUrl: proxy.urlFor(TEST_DATABASE_URL!) } });
    cleanups.push(() => h.close());
    const ws = makeWorkspace();
    cleanups.push(() => ws.cleanup());
    const client = await TestClient.initialized(h.ts.url);
    cleanups.push(() => client.close());

    const threadId = (await client.request("thread/start", { cwd: ws.dir, approvalPolicy: "never", sandbox: "danger-full-access" })).thread.id;
    h.mock.enqueue({ toolCalls: [{ name: "shell", arguments: { command: "while [ ! -f go ]; do sleep 0.05; done; echo ran" } }] }, { text: "done" });
    const { turn } = await client.request("turn/start", { threadId, input: text("run it") });
    const started = await client.waitForNotification("item/started", (p) => p.item?.type === "commandExecution");

    // The command's completion is the next transaction to store an item/completed.
    const lost = proxy.loseCommitAcknowledgement("item/completed");
    writeFileSync(path.join(ws.dir, "go"), "");
    await lost;
    const done = await turnCompleted(client, turn.id, 60_000);
    expect(done.params.turn.status).toBe("completed");

    const sql = h.ts.server.db.sql;
    const completions = await sql`select seq from thread_events where thread_id = ${threadId} and method = 'item/completed' and ${started.params.item.id}::text = any(item_ids)`;
    expect(completions, "the command's completion is stored once").toHaveLength(1);
    const [row] = await sql`select status, payload->>'aggregatedOutput' as output from items where id = ${started.params.item.id}`;
    expect(row).toMatchObject({ status: "completed" });
    expect(row!.output).toContain("ran");

    // Told once, under the stored seq; everything told is stored.
    const told = threadNotifications(client, threadId).filter((f) => f.method === "item/completed" && f.params.item.id === started.params.item.id);
    expect(told.map((f) => f.params.seq)).toEqual([Number(completions[0]!.seq)]);
    const stored = (await sql`select seq, method from thread_events where thread_id = ${threadId} order by seq`).map((r) => `${r.seq} ${r.method}`);
    const seen = threadNotifications(client, threadId)
      .filter((f) => !isDelta(f.method!) && typeof f.params.seq === "number")
      .map((f) => `${f.params.seq} ${f.method}`);
    expect(seen.filter((s) => !stored.includes(s)), "told but not stored").toEqual([]);
    expect(new Set(seen).size).toBe(seen.length);
  }, 120_000);
});
