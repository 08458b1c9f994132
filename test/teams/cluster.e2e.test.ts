/**
 * A team on a cluster (issue 28): real `app-server serve` processes on one Postgres, users added
 * and revoked with the real `app-server users` command. Another user's thread answers as an
 * unknown one on every process; an approval of a turn running on one process reaches the owner's
 * connection on another (not an admin following there), and is audited with that connection;
 * the per-user concurrent-turn quota holds across processes under a burst; a revocation closes
 * the user's connections on every process within the users refresh.
 */
import { describe, expect, it } from "vitest";
import { uuidv7 } from "../../src/ids.js";
import { COMMAND_APPROVAL, nthServerRequest } from "../support/approvals.js";
import { TestClient } from "../support/client.js";
import { eventually, useCluster, type Node } from "../support/cluster.js";
import { TEST_DATABASE_URL } from "../support/db.js";
import { deferred } from "../support/durability.js";
import { runCli } from "../support/process.js";
import { text, turnCompleted } from "../support/turns.js";
import { afterFirstTextDelta, serverRequests } from "../support/wire.js";
import { connectAs, errorBytes, makeRoots } from "./support.js";
import { THREAD_METHOD_SAMPLES, THREAD_METHODS } from "./method-samples.js";

const TIMEOUT = 180_000;

describe.skipIf(!TEST_DATABASE_URL)("a team on a cluster", () => {
  const fx = useCluster({ APP_SERVER_LEASE_TTL_MS: "30000", APP_SERVER_USERS_REFRESH_MS: "200", APP_SERVER_MAX_CONCURRENT_TURNS_PER_USER: "2" });

  /** `app-server users add` against the cluster's database; its token is the last line it prints. */
  const addUser = async (name: string, ...flags: string[]): Promise<string> => {
    const p = await runCli(["users", "add", name, ...flags, "--database-url", fx.database.url]);
    if (p.exit.code !== 0) throw new Error(`users add ${name} failed: ${p.stderrLines.join("\n")}`);
    return p.stdoutLines.filter((l) => l !== "").pop()!;
  };
  const as = async (node: Node, token: string, name?: string): Promise<TestClient> => {
    const c = await connectAs(node.url, token, name);
    fx.cluster.clients.push(c);
    return c;
  };

  it(
    "answers another user's thread as an unknown one on every process, for every thread method",
    async () => {
      const roots = makeRoots();
      try {
        const { a, b } = await fx.cluster.pair();
        const alice = await addUser("alice", "--root", roots.rootOf("alice"));
        const bob = await addUser("bob", "--root", roots.rootOf("bob"));
        const bobOnB = await as(b, bob);
        const bobs = (await bobOnB.request("thread/start", {})).thread.id as string;
        for (const node of [a, b]) {
          const aliceThere = await as(node, alice);
          const unknown = uuidv7();
          for (const method of THREAD_METHODS) {
            const sample = THREAD_METHOD_SAMPLES[method]!;
            const norm = (f: Record<string, any>, id: string) => (f.error ? errorBytes(f, id) : JSON.stringify(f.result).replaceAll(id, "<id>"));
            expect(norm(await aliceThere.requestRaw(method, sample(bobs)), bobs), `${method} on ${node === a ? "A" : "B"}`).toBe(norm(await aliceThere.requestRaw(method, sample(unknown)), unknown));
          }
          expect((await aliceThere.request("thread/list", {})).data).toEqual([]);
        }
        expect(fx.mock.requests).toHaveLength(0);
      } finally {
        roots.cleanup();
      }
    },
    TIMEOUT,
  );

  it(
    "sends an approval of a turn on one process to the owner's connection on another, not to an admin there; audits who answered from where",
    async () => {
      const roots = makeRoots();
      try {
        const { a, b } = await fx.cluster.pair();
        const alice = await addUser("alice", "--root", roots.rootOf("alice"));
        const carol = await addUser("carol", "--admin");
        const aliceOnA = await as(a, alice, "alice-on-a");
        const aliceOnB = await as(b, alice, "alice-on-b");
        const carolOnB = await as(b, carol, "carol-on-b");
        const thread = (await aliceOnA.request("thread/start", { approvalPolicy: "untrusted" })).thread.id as string;
        await aliceOnB.request("thread/resume", { threadId: thread });
        await carolOnB.request("thread/resume", { threadId: thread });
        fx.mock.enqueue({ toolCalls: [{ name: "shell", arguments: { command: "touch nothing-here" } }] }, { text: "ok, not touching it" });
        const { turn } = await aliceOnA.request("turn/start", { threadId: thread, input: text("touch it") });
        const onB = await nthServerRequest(aliceOnB, COMMAND_APPROVAL, 0, 30_000);
        aliceOnB.respond(onB.id, { decision: "decline" });
        await turnCompleted(aliceOnA, turn.id, 60_000);
        await turnCompleted(carolOnB, turn.id, 60_000);
        expect(serverRequests(carolOnB, COMMAND_APPROVAL)).toEqual([]);

        const rows = (await carolOnB.request("audit/list", { threadId: thread })).data as Array<Record<string, any>>;
        const created = rows.find((r) => r.action === "thread.created")!;
        const decided = rows.filter((r) => r.action === "approval.decided");
        expect(decided).toHaveLength(1);
        expect(decided[0]).toMatchObject({ userName: "alice", client: "alice-on-b", detail: { decision: "decline" } });
        // Written by process B (where alice answered), the thread's creation by process A.
        expect(decided[0]!.connection.split("/")[0]).not.toBe(created.connection.split("/")[0]);
        expect(rows.filter((r) => r.action === "admin.access" && r.userName === "carol")).toHaveLength(1);
      } finally {
        roots.cleanup();
      }
    },
    TIMEOUT,
  );

  it(
    "holds a user's concurrent-turn quota across processes under a burst, and closes a revoked user's connections everywhere",
    async () => {
      const roots = makeRoots();
      try {
        const { a, b } = await fx.cluster.pair();
        const alice = await addUser("alice", "--root", roots.rootOf("alice"));
        const bob = await addUser("bob", "--root", roots.rootOf("bob"));
        const [onA, onB] = [await as(a, alice), await as(b, alice)];
        const threads = [
          ...(await Promise.all([0, 1].map(async () => ({ c: onA, id: (await onA.request("thread/start", {})).thread.id as string })))),
          ...(await Promise.all([0, 1].map(async () => ({ c: onB, id: (await onB.request("thread/start", {})).thread.id as string })))),
        ];
        const gate = deferred();
        fx.gates.push(gate.open);
        for (let i = 0; i < 2; i++) fx.mock.enqueue({ text: ["held ", "turn"], gate: { afterEvents: afterFirstTextDelta("openai"), wait: gate.promise } });
        const burst = await Promise.all(threads.map(({ c, id }) => c.requestRaw("turn/start", { threadId: id, input: text("go") }).then((f) => ({ c, f }))));
        const started = burst.filter((x) => x.f.result);
        expect(started).toHaveLength(2);
        for (const x of burst.filter((y) => y.f.error)) expect(x.f.error).toMatchObject({ code: -32003, data: { quota: "concurrentTurns", limit: 2 } });
        gate.open();
        for (const s of started) await turnCompleted(s.c, s.f.result.turn.id, 60_000);

        const bobOnA = await as(a, bob);
        const bobOnB = await as(b, bob);
        const revoked = await runCli(["users", "revoke", "bob", "--database-url", fx.database.url]);
        expect(revoked.exit.code).toBe(0);
        for (const c of [bobOnA, bobOnB])
          await eventually(async () => c.closeCode === 1008, 200, 50).catch(() => {
            throw new Error("a revoked user's connection stayed open");
          });
        await expect(connectAs(b.url, bob)).rejects.toThrow(/401/);
        expect((await onA.request("account/read", {})).user.name).toBe("alice");
      } finally {
        roots.cleanup();
      }
    },
    TIMEOUT,
  );
});
