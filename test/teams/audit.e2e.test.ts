/**
 * The audit trail (issue 28, item 5): one row per action with the right user — threads created,
 * forked, archived, shared; turns started; commands run; approval decisions and the rules they
 * save; rules removed; configuration reloaded; an admin's access to another user's thread (marked
 * admin) — readable by admins through audit/list (filters, paging) and `app-server audit` (JSON
 * lines), kept across a restart, and append-only in the database. `app-server users add|list|revoke`
 * on the same database: the token is the last line printed and signs in.
 */
import { Writable } from "node:stream";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { runAudit, runUsers } from "../../src/identity/cli.js";
import type { StartOptions } from "../../src/server.js";
import { BACKENDS, freshDatabase, type TestDatabase } from "../support/db.js";
import { startMockModelServer, type MockModelServer } from "../support/mock-model-server.js";
import { startServerOn, type TestServer } from "../support/server.js";
import { mockProviders, text, turnCompleted } from "../support/turns.js";
import { addTeam, addUser, connectAs, makeRoots, SERVER_TOKEN, type TeamUsers } from "./support.js";
import type { TestClient } from "../support/client.js";

const backend = BACKENDS[BACKENDS.length - 1]!;

function capture(env: NodeJS.ProcessEnv) {
  const out: string[] = [];
  const err: string[] = [];
  const sink = (into: string[]) => new Writable({ write: (chunk, _enc, done) => (into.push(String(chunk)), done()) });
  return { io: { stdout: sink(out), stderr: sink(err), env }, out: () => out.join(""), err: () => err.join("") };
}

describe("the audit trail", () => {
  let db: TestDatabase;
  let mock: MockModelServer;
  let roots: ReturnType<typeof makeRoots>;
  let server: TestServer | null = null;
  const clients: TestClient[] = [];
  /** The CLI's view of the test database: its home, or its Postgres URL and schema. */
  let cliArgs: string[];
  let cliEnv: NodeJS.ProcessEnv;

  const start = async (limits?: StartOptions["limits"]) => {
    server = await startServerOn(db, { auth: "token-any-user", authToken: SERVER_TOKEN, modelProvider: "openai", model: "mock-model", providers: mockProviders(mock), ...(limits ? { limits } : {}) }, server !== null);
    return server;
  };
  const stop = async () => {
    for (const c of clients.splice(0)) await c.close().catch(() => {});
    await server?.close();
  };
  const as = async (token: string, name?: string) => {
    const c = await connectAs(server!.url, token, name);
    clients.push(c);
    return c;
  };

  beforeEach(async () => {
    db = await freshDatabase(backend);
    mock = await startMockModelServer();
    roots = makeRoots();
    server = null;
    cliArgs = db.options.databaseUrl ? ["--database-url", db.options.databaseUrl] : ["--home", db.home];
    cliEnv = { ...(db.options.schema ? { APP_SERVER_DATABASE_SCHEMA: db.options.schema } : {}) };
  });
  afterEach(async () => {
    await stop();
    await mock.close();
    await db.cleanup();
    roots.cleanup();
  });

  it("has one row per action with the right user, for admins only, kept across a restart and never changed", async () => {
    const s = await start();
    const team: TeamUsers = await addTeam(s.server.app.team.users, roots.rootOf);
    const dave = await addUser(s.server.app.team.users, "dave", { roots: [roots.rootOf("dave")], dangerFullAccess: true });
    const [alice, bob, carol] = [await as(t(team.alice), "alice-app"), await as(t(team.bob)), await as(t(team.carol))];
    const thread = (await alice.request("thread/start", {})).thread.id as string;
    const fork = (await alice.request("thread/fork", { threadId: thread })).thread.id as string;
    await alice.request("thread/share", { threadId: thread, user: "bob", access: "read" });
    mock.enqueue({ text: "hello" });
    const { turn } = await alice.request("turn/start", { threadId: thread, input: text("hi") });
    await turnCompleted(alice, turn.id);
    await alice.request("thread/archive", { threadId: fork });
    await bob.request("thread/read", { threadId: thread }); // a reader: not an action
    await carol.request("thread/read", { threadId: thread });
    await carol.request("thread/unarchive", { threadId: fork });
    await (await as(dave.token)).request("command/exec", { command: ["true"], sandboxPolicy: { type: "dangerFullAccess" } });
    await carol.request("config/mcpServer/reload", {});
    const rule = await s.server.app.execPolicy.add(["make"], thread, team.bob.record.id);
    await bob.request("execpolicy/rule/remove", { id: rule.id });
    // An approval answer that saves a rule: the decision and the rule, as the connection reports them.
    await s.server.app.team.audit.answered(
      { id: team.alice.record.id, name: "alice", admin: false, roots: [], dangerFullAccess: false, signIn: "token" },
      { connection: "p/1", remote: "127.0.0.1", client: "alice-app" },
      "item/commandExecution/requestApproval",
      { threadId: thread, turnId: turn.id, itemId: "item-1", command: "make test", cwd: team.alice.root },
      { decision: { acceptWithExecpolicyAmendment: { execpolicy_amendment: ["make"] } } },
    );
    expect((await alice.requestRaw("audit/list", {})).error?.message).toBe("audit/list is for admins");

    const rows = (await carol.request("audit/list", {})).data as Array<Record<string, any>>;
    expect(rows.map((r) => [r.userName, r.action, r.admin, r.threadId])).toEqual([
      ["alice", "thread.created", false, thread],
      ["alice", "thread.forked", false, fork],
      ["alice", "thread.shared", false, thread],
      ["alice", "turn.started", false, thread],
      ["alice", "thread.archived", false, fork],
      ["carol", "admin.access", true, thread],
      ["carol", "thread.unarchived", true, fork],
      ["dave", "command.run", false, null],
      ["carol", "config.reloaded", false, null],
      ["bob", "execpolicy.rule.removed", false, null],
      ["alice", "approval.decided", false, thread],
      ["alice", "execpolicy.rule.added", false, thread],
    ]);
    expect(rows[0]).toMatchObject({ userId: team.alice.record.id, client: "alice-app", remote: expect.stringMatching(/127\.0\.0\.1/), detail: { cwd: team.alice.root, sandbox: { type: "workspaceWrite" } } });
    expect(rows[1]!.detail).toMatchObject({ from: thread });
    expect(rows[3]!.detail).toEqual({ kind: "agent", turnId: turn.id, sandbox: "workspace-write" });
    expect(rows[5]!.detail).toEqual({ method: "thread/read" });
    expect(rows[7]!.detail).toMatchObject({ command: ["true"], sandbox: "dangerFullAccess", exitCode: 0, via: "command/exec" });
    expect(rows[10]!.detail).toMatchObject({ decision: "acceptWithExecpolicyAmendment", command: "make test" });
    expect(rows[11]!.detail).toEqual({ pattern: ["make"] });

    // Filters and paging.
    expect((await carol.request("audit/list", { user: "carol" })).data.map((r: { action: string }) => r.action)).toEqual(["admin.access", "thread.unarchived", "config.reloaded"]);
    expect((await carol.request("audit/list", { threadId: fork })).data).toHaveLength(3);
    const page1 = await carol.request("audit/list", { limit: 5 });
    const page2 = await carol.request("audit/list", { limit: 5, cursor: page1.nextCursor });
    expect([...page1.data, ...page2.data].map((r: { id: number }) => r.id)).toEqual(rows.slice(0, 10).map((r) => r.id));
    expect((await carol.request("audit/list", { sinceMs: rows[8]!.atMs })).data.length).toBeGreaterThanOrEqual(4);

    // Append-only in the database itself.
    const sql = s.server.db.sql;
    await expect(sql`update audit_log set action = 'nothing happened'`).rejects.toThrow(/append-only/);
    await expect(sql`delete from audit_log`).rejects.toThrow(/append-only/);
    await expect(sql`truncate audit_log`).rejects.toThrow(/append-only/);

    // Kept across a restart; the command line reads it too (the embedded database is free once the server stopped).
    await stop();
    await start();
    const again = await as(SERVER_TOKEN);
    expect((await again.request("audit/list", {})).data).toHaveLength(rows.length);
    await stop();
    const cli = capture(cliEnv);
    expect(await runAudit([...cliArgs, "--user", "alice", "--thread", thread], cli.io)).toBe(0);
    const lines = cli.out().trim().split("\n").map((l) => JSON.parse(l));
    expect(lines.map((l) => l.action)).toEqual(["thread.created", "thread.shared", "turn.started", "approval.decided", "execpolicy.rule.added"]);
    expect(lines[0].at).toBe(new Date(lines[0].atMs).toISOString());
    const bad = capture(cliEnv);
    expect(await runAudit([...cliArgs, "--since", "yesterday"], bad.io)).toBe(2);
    expect(bad.err()).toMatch(/--since: expected an ISO date/);
  });

  it("a turn's audit row and its user's token count commit inside the transactions that record the turn, not on their own", async () => {
    // An hour's wait: a row can only be in the database because it rode a recording transaction.
    const s = await start({ sideWriteMaxWaitMs: 3_600_000 });
    const team: TeamUsers = await addTeam(s.server.app.team.users, roots.rootOf);
    const alice = await as(t(team.alice));
    const thread = (await alice.request("thread/start", {})).thread.id as string;
    mock.enqueue({ text: "hello", usage: { input: 11, output: 7 } });
    const { turn } = await alice.request("turn/start", { threadId: thread, input: text("hi") });
    await turnCompleted(alice, turn.id);

    const sql = s.server.db.sql;
    const recorded = new Set((await sql<{ xid: string }[]>`select distinct xmin::text as xid from thread_events where thread_id = ${thread}`).map((r) => r.xid));
    const audit = await sql<{ action: string; xid: string }[]>`select action, xmin::text as xid from audit_log where thread_id = ${thread} order by id`;
    expect(audit.map((r) => r.action)).toEqual(["thread.created", "turn.started"]);
    for (const r of audit) expect(recorded).toContain(r.xid);
    const [usage] = await sql<{ input: number; output: number; xid: string }[]>`
      select input_tokens::int as input, output_tokens::int as output, xmin::text as xid from user_token_usage where user_id = ${team.alice.record.id}`;
    expect(usage).toMatchObject({ input: 11, output: 7 });
    expect(recorded).toContain(usage!.xid);

    // A side write that fails in SQL costs the turn that carries it nothing: the turn's steps are
    // recorded without it, and only the bad write is lost (its caller is told).
    const bad = s.server.app.runtime.store.sideWrites!.add((q) => q`insert into no_such_table values (1)`);
    mock.enqueue({ text: "again", usage: { input: 5, output: 3 } });
    const second = (await alice.request("turn/start", { threadId: thread, input: text("more") })).turn;
    await expect(bad).rejects.toThrow(/no_such_table/);
    expect((await turnCompleted(alice, second.id)).params.turn.status).toBe("completed");
    const read = await alice.request("thread/read", { threadId: thread, includeTurns: true });
    expect(read.thread.turns.map((x: { items: Array<{ type: string; text?: string }> }) => x.items.filter((i) => i.type === "agentMessage").map((i) => i.text))).toEqual([["hello"], ["again"]]);
    await alice.request("account/usage/read", {}); // flushes what waits
    const [after] = await sql<{ input: number; output: number }[]>`select input_tokens::int as input, output_tokens::int as output from user_token_usage where user_id = ${team.alice.record.id}`;
    expect(after).toEqual({ input: 16, output: 10 });
    expect((await sql<{ action: string }[]>`select action from audit_log where thread_id = ${thread} order by id`).map((r) => r.action)).toEqual(["thread.created", "turn.started", "turn.started"]);
  });

  it("app-server users add prints the token as its last line; it signs in; list and revoke work on the same database", async () => {
    const add = capture(cliEnv);
    expect(await runUsers(["add", "erin", "--root", roots.rootOf("erin"), ...cliArgs], add.io)).toBe(0);
    const printed = add.out().trim().split("\n");
    const token = printed[printed.length - 1]!;
    expect(token).toMatch(/^aas_[A-Za-z0-9_-]{16}_[A-Za-z0-9_-]{43}$/);
    expect(add.out()).toContain(`roots: ${roots.rootOf("erin")}`);
    const dup = capture(cliEnv);
    expect(await runUsers(["add", "erin", ...cliArgs], dup.io)).toBe(1);
    expect(dup.err()).toMatch(/a user named erin exists already/);
    const badName = capture(cliEnv);
    expect(await runUsers(["add", "../x", ...cliArgs], badName.io)).toBe(2);

    // The token is stored only as a hash.
    await start();
    const stored = await server!.server.db.sql<{ tokenHash: string }[]>`select token_hash from users where name = 'erin'`;
    expect(stored[0]!.tokenHash).toMatch(/^scrypt\$32768\$8\$1\$/);
    expect(stored[0]!.tokenHash).not.toContain(token.slice(-43));
    const erin = await as(token);
    expect((await erin.request("account/read", {})).user).toMatchObject({ name: "erin", roots: [roots.rootOf("erin")], signIn: "token" });
    await stop();

    const list = capture(cliEnv);
    expect(await runUsers(["list", "--json", ...cliArgs], list.io)).toBe(0);
    const users = list.out().trim().split("\n").map((l) => JSON.parse(l));
    expect(users).toEqual([expect.objectContaining({ name: "erin", admin: false, hasToken: true, revokedAtMs: null })]);
    expect(list.out()).not.toContain("scrypt");
    const revoke = capture(cliEnv);
    expect(await runUsers(["revoke", "erin", ...cliArgs], revoke.io)).toBe(0);
    expect(await runUsers(["revoke", "erin", ...cliArgs], capture(cliEnv).io)).toBe(1);
    await start();
    await expect(connectAs(server!.url, token)).rejects.toThrow(/401/);
    const rows = (await (await as(SERVER_TOKEN)).request("audit/list", {})).data;
    expect(rows.map((r: { action: string; detail: { user: string } }) => [r.action, r.detail.user])).toEqual([
      ["user.added", "erin"],
      ["user.revoked", "erin"],
    ]);
  });
});

function t(u: { token: string }): string {
  return u.token;
}
