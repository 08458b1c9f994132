/**
 * Owned threads over WebSocket (issue 28, items 1 and 2): every method that acts on a thread
 * answers another user's thread id byte for byte as it answers an unknown id (table-driven over
 * METHOD_RULES, so a new thread method without a sample fails here); lists and searches show a
 * user its own threads and those shared with it; shares for reading and writing; admins see all;
 * who is signed in; a revoked user is shut out within the users refresh.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { z } from "zod";
import { uuidv7 } from "../../src/ids.js";
import { METHOD_RULES } from "../../src/identity/method-rules.js";
import { clientRequests, type ClientRequestMethod } from "../../src/protocol/methods.js";
import { TestClient } from "../support/client.js";
import { BACKENDS } from "../support/db.js";
import { eventually } from "../support/cluster.js";
import { errorBytes, SERVER_TOKEN, startTeamServer, type TeamServer } from "./support.js";
import { READ_METHODS, THREAD_METHOD_SAMPLES, THREAD_METHODS } from "./method-samples.js";

const backend = BACKENDS[BACKENDS.length - 1]!;

/** The answer without its request id: what must be identical for an unknown and a hidden thread. */
const answerOf = (frame: Record<string, any>, threadId: string) =>
  frame.error ? errorBytes(frame, threadId) : JSON.stringify({ result: frame.result }).replaceAll(threadId, "<id>");

describe("the method table", () => {
  it("gives every method whose params require a threadId a thread rule, and every thread method a sample", () => {
    for (const [method, spec] of Object.entries(clientRequests)) {
      const shape = (spec.params as unknown as { shape?: Record<string, z.ZodType> }).shape;
      const threadId = shape?.threadId;
      if (threadId && !threadId.safeParse(undefined).success) expect(METHOD_RULES[method as ClientRequestMethod].kind, method).toBe("thread");
    }
    for (const m of THREAD_METHODS) expect(THREAD_METHOD_SAMPLES[m], `no sample params for ${m}`).toBeDefined();
  });
});

describe("owned threads over WebSocket", () => {
  let t: TeamServer;
  beforeEach(async () => {
    t = await startTeamServer(backend, { team: { usersRefreshMs: 200 } });
  });
  afterEach(async () => {
    await t.close();
  });

  it("answers another user's thread id exactly as an unknown one, for every thread method, and changes nothing", async () => {
    const bob = await t.as(t.users.bob);
    const alice = await t.as(t.users.alice);
    const bobs = (await bob.request("thread/start", {})).thread;
    await bob.request("thread/name/set", { threadId: bobs.id, name: "bob's plan" });
    const before = await bob.request("thread/read", { threadId: bobs.id, includeTurns: true });

    const unknown = uuidv7();
    for (const method of THREAD_METHODS) {
      const sample = THREAD_METHOD_SAMPLES[method]!;
      const asUnknown = await alice.requestRaw(method, sample(unknown));
      const asHidden = await alice.requestRaw(method, sample(bobs.id));
      expect(answerOf(asHidden, bobs.id), method).toBe(answerOf(asUnknown, unknown));
    }
    // Nothing of bob's changed, and alice was told nothing about it.
    const after = await bob.request("thread/read", { threadId: bobs.id, includeTurns: true });
    expect({ ...after.thread, updatedAt: 0, status: null }).toEqual({ ...before.thread, updatedAt: 0, status: null });
    expect(after.thread.name).toBe("bob's plan");
    expect(after.access.sharedWith).toEqual([]);
    expect(alice.notifications().filter((f) => JSON.stringify(f.params ?? {}).includes(bobs.id))).toEqual([]);
    expect(t.mock.requests).toHaveLength(0);
  });

  it("lists and searches only a user's own and shared threads; an admin sees every thread", async () => {
    const [alice, bob, carol] = [await t.as(t.users.alice), await t.as(t.users.bob), await t.as(t.users.carol)];
    const mine = (await alice.request("thread/start", {})).thread;
    const bobs = (await bob.request("thread/start", {})).thread;
    const shared = (await bob.request("thread/start", {})).thread;
    await alice.request("thread/name/set", { threadId: mine.id, name: "zebra notes" });
    await bob.request("thread/name/set", { threadId: bobs.id, name: "zebra secrets" });
    await bob.request("thread/name/set", { threadId: shared.id, name: "zebra shared" });
    await bob.request("thread/share", { threadId: shared.id, user: "alice", access: "read" });

    const ids = (page: { data: Array<{ id?: string; thread?: { id: string } }> }) => page.data.map((d) => d.id ?? d.thread!.id).sort();
    expect(ids(await alice.request("thread/list", {}))).toEqual([mine.id, shared.id].sort());
    expect(ids(await alice.request("thread/search", { query: "zebra" }))).toEqual([mine.id, shared.id].sort());
    expect(ids(await alice.request("thread/list", { searchTerm: "zebra" }))).toEqual([mine.id, shared.id].sort());
    expect(ids(await bob.request("thread/list", {}))).toEqual([bobs.id, shared.id].sort());
    expect(ids(await carol.request("thread/list", {}))).toEqual([mine.id, bobs.id, shared.id].sort());
    // Loaded threads: alice's own (and the shared one she may read), never bob's private one.
    const loaded = (await alice.request("thread/loaded/list", {})).data as string[];
    expect(loaded).toContain(mine.id);
    expect(loaded).not.toContain(bobs.id);
  });

  it("a read share lets the reader read and follow, not write; thread/read says whose it is; taking it back hides it again", async () => {
    const [alice, bob] = [await t.as(t.users.alice), await t.as(t.users.bob)];
    const bobs = (await bob.request("thread/start", {})).thread;
    const shared = await bob.request("thread/share", { threadId: bobs.id, user: "alice", access: "read" });
    expect(shared.access).toEqual({
      owner: { userId: t.users.bob.record.id, name: "bob" },
      sharedWith: [{ userId: t.users.alice.record.id, name: "alice", access: "read" }],
      yours: "owner",
    });
    const read = await alice.request("thread/read", { threadId: bobs.id });
    expect(read.access.yours).toBe("read");
    expect(read.access.owner.name).toBe("bob");
    for (const method of READ_METHODS) {
      if (method === "thread/fork") continue; // a fork is alice's own thread, in her workspace (workspace.e2e.test.ts)
      const f = await alice.requestRaw(method, THREAD_METHOD_SAMPLES[method]!(bobs.id));
      expect(f.error?.message ?? "", method).not.toContain("thread not found");
    }
    await alice.request("thread/resume", { threadId: bobs.id });
    for (const method of THREAD_METHODS.filter((m) => !READ_METHODS.includes(m) && m !== "thread/resume")) {
      const f = await alice.requestRaw(method, THREAD_METHOD_SAMPLES[method]!(bobs.id));
      expect(f.error?.code, method).toBe(-32600);
      expect(f.error.message, method).toMatch(method === "thread/share" ? /only the owner/ : /shared with you read-only/);
    }
    // Changing its settings is writing.
    const resumeWithModel = await alice.requestRaw("thread/resume", { threadId: bobs.id, model: "other-model" });
    expect(resumeWithModel.error?.message).toMatch(/read-only/);
    // bob renames it: alice, following it, hears of it.
    await bob.request("thread/name/set", { threadId: bobs.id, name: "shared plan" });
    await alice.waitForNotification("thread/name/updated", (p) => p.threadId === bobs.id);

    await bob.request("thread/share", { threadId: bobs.id, user: "alice", access: "none" });
    const unknown = uuidv7();
    expect(errorBytes(await alice.requestRaw("thread/read", { threadId: bobs.id }), bobs.id)).toBe(
      errorBytes(await alice.requestRaw("thread/read", { threadId: unknown }), unknown),
    );
    expect((await alice.request("thread/list", {})).data).toEqual([]);
  });

  it("a share changed elsewhere (another process, the database) reaches this process's connections within the users refresh", async () => {
    const [alice, bob] = [await t.as(t.users.alice), await t.as(t.users.bob)];
    const thread = (await alice.request("thread/start", {})).thread.id;
    await alice.request("thread/share", { threadId: thread, user: "bob", access: "write" });
    await bob.request("thread/resume", { threadId: thread });
    const { team, runtime } = t.ts.server.app;
    const [bobsConn] = team.connectionsOf(t.users.bob.record.id);
    expect(team.guard.levelOn(bobsConn!, thread)).toBe("write");
    // As thread/share on another process leaves it: only the row changed.
    await team.users.share(thread, t.users.bob.record.id, "read");
    await eventually(async () => team.guard.levelOn(bobsConn!, thread) === "read", 200, 50);
    await team.users.share(thread, t.users.bob.record.id, null);
    await eventually(async () => team.guard.levelOn(bobsConn!, thread) === null && !runtime.loaded.get(thread)?.subscribers.has(bobsConn!), 200, 50);
    expect(runtime.loaded.get(thread)?.subscribers.size).toBe(1);
  });

  it("refuses to share with an unknown user or the owner, and lets only the owner or an admin share", async () => {
    const [alice, bob, carol] = [await t.as(t.users.alice), await t.as(t.users.bob), await t.as(t.users.carol)];
    const bobs = (await bob.request("thread/start", {})).thread;
    expect((await bob.requestRaw("thread/share", { threadId: bobs.id, user: "nobody", access: "read" })).error).toMatchObject({ code: -32602, message: "Invalid params: no user named nobody" });
    expect((await bob.requestRaw("thread/share", { threadId: bobs.id, user: "bob", access: "read" })).error?.code).toBe(-32602);
    await bob.request("thread/share", { threadId: bobs.id, user: "alice", access: "write" });
    expect((await alice.requestRaw("thread/share", { threadId: bobs.id, user: "carol", access: "read" })).error?.message).toMatch(/only the owner/);
    const byAdmin = await carol.request("thread/share", { threadId: bobs.id, user: "alice", access: "read" });
    expect(byAdmin.access.sharedWith).toEqual([{ userId: t.users.alice.record.id, name: "alice", access: "read" }]);
    expect(byAdmin.access.yours).toBe("admin");
  });

  it("an admin reads and acts on every thread; the server's token is the local admin; account/read says who is signed in", async () => {
    const [alice, carol] = [await t.as(t.users.alice), await t.as(t.users.carol)];
    const local = await t.as(SERVER_TOKEN);
    const hers = (await alice.request("thread/start", {})).thread;
    expect(hers.cwd).toBe(t.users.alice.root);
    const read = await carol.request("thread/read", { threadId: hers.id });
    expect(read.access.yours).toBe("admin");
    await carol.request("thread/name/set", { threadId: hers.id, name: "named by an admin" });
    expect((await local.request("thread/read", { threadId: hers.id })).thread.name).toBe("named by an admin");

    const who = async (c: TestClient) => (await c.request("account/read", {})).user;
    expect(await who(alice)).toEqual({ userId: t.users.alice.record.id, name: "alice", admin: false, roots: [t.users.alice.root], dangerFullAccess: false, signIn: "token" });
    expect(await who(carol)).toMatchObject({ name: "carol", admin: true, roots: null, signIn: "token" });
    expect(await who(local)).toMatchObject({ userId: "local", admin: true, roots: null, signIn: "local" });
    // Admin-only methods.
    for (const method of ["audit/list", "config/mcpServer/reload"] as const) {
      expect((await alice.requestRaw(method, {})).error, method).toEqual({ code: -32600, message: `${method} is for admins` });
      expect((await carol.requestRaw(method, {})).error, method).toBeUndefined();
    }
  });

  it("keeps each user's saved approval rules to that user's threads", async () => {
    const [alice, bob, carol] = [await t.as(t.users.alice), await t.as(t.users.bob), await t.as(t.users.carol)];
    const rules = t.ts.server.app.execPolicy;
    const bobsRule = await rules.add(["npm", "test"], null, t.users.bob.record.id);
    expect((await alice.request("execpolicy/rule/list", {})).data).toEqual([]);
    expect((await bob.request("execpolicy/rule/list", {})).data.map((r: { id: string }) => r.id)).toEqual([bobsRule.id]);
    expect((await carol.request("execpolicy/rule/list", {})).data.map((r: { id: string }) => r.id)).toEqual([bobsRule.id]);
    // alice cannot remove it (it is not hers: the same answer as a rule that does not exist).
    const missing = await alice.requestRaw("execpolicy/rule/remove", { id: "no-such-rule" });
    const hidden = await alice.requestRaw("execpolicy/rule/remove", { id: bobsRule.id });
    expect(errorBytes(hidden, bobsRule.id)).toBe(errorBytes(missing, "no-such-rule"));
    expect((await bob.request("execpolicy/rule/list", {})).data).toHaveLength(1);
    // The same prefix saved by alice is a rule of her own.
    await rules.add(["npm", "test"], null, t.users.alice.record.id);
    expect((await alice.request("execpolicy/rule/list", {})).data).toHaveLength(1);
    expect((await bob.request("execpolicy/rule/list", {})).data).toHaveLength(1);
  });

  it("refuses a wrong token, and shuts a revoked user out within the users refresh (open connections closed, 1008)", async () => {
    const alice = await t.as(t.users.alice);
    await expect(TestClient.connect(t.ts.url, { headers: { authorization: `Bearer ${t.users.alice.token.slice(0, -2)}xx` } })).rejects.toThrow(/401/);
    await expect(TestClient.connect(t.ts.url)).rejects.toThrow(/401/);
    await t.ts.server.app.team.users.revoke("alice");
    await eventually(async () => alice.closeCode !== null, 200, 50).catch(() => {
      throw new Error("alice's connection was not closed after her revocation");
    });
    expect(alice.closeCode).toBe(1008);
    expect(alice.closeReason).toBe("user revoked");
    await expect(TestClient.connect(t.ts.url, { headers: { authorization: `Bearer ${t.users.alice.token}` } })).rejects.toThrow(/401/);
    // bob is not affected.
    const bob = await t.as(t.users.bob);
    expect((await bob.request("account/read", {})).user.name).toBe("bob");
  });
});
