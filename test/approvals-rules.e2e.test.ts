// @needs-os-sandbox: runs commands in the OS sandbox (vitest.config.ts leaves this file out where bubblewrap cannot run).
/**
 * Saved approval rules and session approvals over a real WebSocket (issue 25 item 3, issue 24
 * item 6): the request offers Codex's `acceptWithExecpolicyAmendment` with the proposed prefix;
 * accepted, the rule is stored, listed, applies in every thread and after a restart, answers a
 * later matching escalation without a prompt but never moves a command out of the sandbox by
 * itself, and can be removed. A session approval covers the command in the workdir and sandbox it
 * was given for — another workdir asks again. Bad answers save nothing.
 */
import { existsSync, mkdirSync } from "node:fs";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { RpcError, TestClient } from "./support/client.js";
import { BACKENDS, freshDatabase, TEST_DATABASE_URL, type TestDatabase } from "./support/db.js";
import { COMMAND_APPROVAL, lastToolResult, makeWorkspace } from "./support/approvals.js";
import { startMockModelServer, type MockModelServer } from "./support/mock-model-server.js";
import { startServerOn, type TestServer } from "./support/server.js";
import { mockProviders, text, turnCompleted } from "./support/turns.js";
import { makeDirs } from "./tools/helpers.js";

const backend = BACKENDS[BACKENDS.length - 1]!;
const JUSTIFICATION = "Do you want to create a5?";
const RULE_DECISION = { acceptWithExecpolicyAmendment: { execpolicy_amendment: ["touch", "a5"] } };

describe("saved approval rules and session approvals", () => {
  let db: TestDatabase;
  let mock: MockModelServer;
  let ts: TestServer;
  let client: TestClient;
  let ws: ReturnType<typeof makeWorkspace>;
  /** Answers to the next approval requests, in order (then decline); every request's params. */
  let answers: unknown[];
  let asked: any[];

  const start = async (reopen = false) => {
    ts = await startServerOn(db, { modelProvider: "openai", model: "mock-model", providers: mockProviders(mock) }, reopen);
    client = await TestClient.initialized(ts.url);
    client.onServerRequest(COMMAND_APPROVAL, (params) => {
      asked.push(params);
      return { decision: answers.shift() ?? "decline" };
    });
  };
  beforeEach(async () => {
    db = await freshDatabase(backend);
    mock = await startMockModelServer();
    ws = makeWorkspace();
    answers = [];
    asked = [];
    await start();
  });
  afterEach(async () => {
    await client?.close();
    await ts?.close();
    await mock?.close();
    await db?.cleanup();
    ws?.cleanup();
  });

  const thread = async (params: Record<string, unknown> = {}) =>
    (await client.request("thread/start", { cwd: ws.dir, approvalPolicy: "on-request", sandbox: "read-only", ...params })).thread.id as string;
  /** One turn in which the model runs `args` with the shell tool; resolves with what the model was told. */
  async function shellTurn(threadId: string, args: Record<string, unknown>): Promise<string> {
    const first = mock.requests.length;
    mock.enqueue({ toolCalls: [{ name: "shell", arguments: args }] }, { text: "done" });
    const { turn } = await client.request("turn/start", { threadId, input: text("go") });
    expect((await turnCompleted(client, turn.id, 30_000)).params.turn.status).toBe("completed");
    return lastToolResult(mock, "openai", first + 1);
  }
  const escalated = (command: string) => ({ command, sandbox_permissions: "require_escalated", justification: JUSTIFICATION });
  const file = (name: string) => existsSync(path.join(ws.dir, name));

  it("offers the rule as Codex does; accepted, it is saved, listed, and answers the next matching escalation in any thread", async () => {
    const t1 = await thread();
    answers = [RULE_DECISION];
    const told = await shellTurn(t1, escalated("touch a5"));
    expect(asked).toHaveLength(1);
    expect(asked[0]).toMatchObject({
      threadId: t1,
      reason: JUSTIFICATION,
      command: "/bin/bash -lc 'touch a5'",
      cwd: ws.dir,
      commandActions: [{ type: "unknown", command: "touch a5" }],
      proposedExecpolicyAmendment: ["touch", "a5"],
      availableDecisions: ["accept", "acceptForSession", RULE_DECISION, "decline", "cancel"],
    });
    expect(file("a5")).toBe(true);
    expect(told).toMatch(/saved a rule: commands that start with \["touch","a5"\]/);
    const { data } = await client.request("execpolicy/rule/list", {});
    expect(data).toEqual([{ id: expect.any(String), pattern: ["touch", "a5"], decision: "allow", threadId: t1, createdAtMs: expect.any(Number) }]);

    // The next matching escalation, in this thread and in another: no prompt, outside the sandbox.
    await shellTurn(t1, escalated("touch a5 b6"));
    const t2 = await thread();
    await shellTurn(t2, escalated("touch a5 c7"));
    expect(asked).toHaveLength(1);
    expect(file("b6") && file("c7")).toBe(true);

    // A rule never widens the sandbox by itself: a matching command that did not ask stays inside.
    const plain = await shellTurn(t2, { command: "touch a5 d8" });
    expect(file("d8")).toBe(false);
    expect(asked).toHaveLength(1);
    expect(plain).toMatch(/Read-only file system[\s\S]*sandbox_permissions "require_escalated"/);
    // Every part must match: `touch a5 && touch e9` asks (and proposes the uncovered part).
    await shellTurn(t2, escalated("touch a5 && touch e9"));
    expect(asked).toHaveLength(2);
    expect(asked[1].proposedExecpolicyAmendment).toEqual(["touch", "e9"]);
    expect(file("e9")).toBe(false);

    // Removed: asked again.
    expect(await client.request("execpolicy/rule/remove", { id: data[0].id })).toEqual({});
    expect((await client.request("execpolicy/rule/list", {})).data).toEqual([]);
    await shellTurn(t2, escalated("touch a5 f10"));
    expect(asked).toHaveLength(3);
    expect(file("f10")).toBe(false);
  });

  it("a saved rule survives a restart of the server (same home and database)", async () => {
    const t1 = await thread();
    answers = [RULE_DECISION];
    await shellTurn(t1, escalated("touch a5"));
    await client.close();
    await ts.close();
    await start(true);
    await shellTurn(await thread(), escalated("touch a5 after-restart"));
    expect(asked).toHaveLength(1);
    expect(file("after-restart")).toBe(true);
  });

  it("bad input saves nothing: a rule other than the proposed one counts as decline; removing an unknown rule is an error", async () => {
    const t1 = await thread();
    answers = [{ acceptWithExecpolicyAmendment: { execpolicy_amendment: ["touch"] } }];
    const told = await shellTurn(t1, escalated("touch a5"));
    expect(told).toMatch(/user declined/);
    expect(file("a5")).toBe(false);
    expect((await client.request("execpolicy/rule/list", {})).data).toEqual([]);
    await expect(client.request("execpolicy/rule/remove", { id: "no-such-rule" })).rejects.toMatchObject({ code: -32600, message: expect.stringContaining("no-such-rule") });
    await expect(client.request("execpolicy/rule/remove", {})).rejects.toBeInstanceOf(RpcError);
    await expect(client.request("execpolicy/rule/remove", {})).rejects.toMatchObject({ code: -32602 });
  });

  it("a session approval covers the command in the workdir it was given for; another workdir asks again (and stays unwritable)", async () => {
    const dirs = makeDirs(); // under /var/tmp: outside the thread's writable roots
    const [a, b] = [dirs.outside, path.join(dirs.root, "other")];
    mkdirSync(b);
    try {
      const t1 = await thread({ sandbox: "workspace-write" });
      answers = ["acceptForSession"];
      await shellTurn(t1, { command: "touch granted.txt", workdir: a });
      expect(asked).toHaveLength(1);
      expect(asked[0]).toMatchObject({ cwd: a, reason: expect.stringMatching(/working directory/), proposedExecpolicyAmendment: null });
      expect(existsSync(path.join(a, "granted.txt"))).toBe(true);
      await shellTurn(t1, { command: "touch granted.txt again.txt", workdir: a });
      expect(asked).toHaveLength(2); // another command text: asked
      await shellTurn(t1, { command: "touch granted.txt", workdir: a });
      expect(asked).toHaveLength(2); // the same command in the same workdir: not asked
      await shellTurn(t1, { command: "touch granted.txt", workdir: b });
      expect(asked).toHaveLength(3);
      expect(asked[2]).toMatchObject({ cwd: b });
      expect(existsSync(path.join(b, "granted.txt"))).toBe(false);
    } finally {
      dirs.cleanup();
    }
  });
});

if (!TEST_DATABASE_URL) console.warn("[skipped] saved rules across server processes: TEST_DATABASE_URL is not set (several processes share only a real Postgres)");
describe.skipIf(!TEST_DATABASE_URL)("saved rules with several server processes on one Postgres", () => {
  it("a rule accepted through one process answers a turn run by another", async () => {
    const db = await freshDatabase("postgres");
    const mock = await startMockModelServer();
    const ws = makeWorkspace();
    const servers: TestServer[] = [];
    const clients: TestClient[] = [];
    try {
      for (let i = 0; i < 2; i++) {
        const s = await startServerOn(db, { modelProvider: "openai", model: "mock-model", providers: mockProviders(mock) });
        servers.push(s);
        const c = await TestClient.initialized(s.url);
        c.onServerRequest(COMMAND_APPROVAL, () => ({ decision: RULE_DECISION }));
        clients.push(c);
      }
      const run = async (c: TestClient, command: string) => {
        const { thread } = await c.request("thread/start", { cwd: ws.dir, approvalPolicy: "on-request", sandbox: "read-only" });
        mock.enqueue({ toolCalls: [{ name: "shell", arguments: { command, sandbox_permissions: "require_escalated", justification: JUSTIFICATION } }] }, { text: "done" });
        const { turn } = await c.request("turn/start", { threadId: thread.id, input: text("go") });
        await turnCompleted(c, turn.id, 30_000);
      };
      await run(clients[0]!, "touch a5");
      await run(clients[1]!, "touch a5 from-b");
      expect(clients[1]!.frames.filter((f) => f.method === COMMAND_APPROVAL)).toEqual([]);
      expect(existsSync(path.join(ws.dir, "from-b"))).toBe(true);
      expect((await clients[1]!.request("execpolicy/rule/list", {})).data.map((r: any) => r.pattern)).toEqual([["touch", "a5"]]);
    } finally {
      for (const c of clients) await c.close();
      for (const s of servers) await s.close();
      await mock.close();
      await db.cleanup();
      ws.cleanup();
    }
  });
});
