/**
 * Owned threads over stdio (issue 28): the spawning user is the principal (the local admin), or
 * the user APP_SERVER_USER / --user names; every thread method answers another user's thread as
 * an unknown one there too, and roots hold. A stdio server naming an unknown user does not start.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { uuidv7 } from "../../src/ids.js";
import type { RunningServer } from "../../src/server.js";
import { BACKENDS, freshDatabase, type TestDatabase } from "../support/db.js";
import { startServerOn } from "../support/server.js";
import { addTeam, connectAs, errorBytes, makeRoots, SERVER_TOKEN, startStdioAs, type TeamUsers } from "./support.js";
import { THREAD_METHOD_SAMPLES, THREAD_METHODS } from "./method-samples.js";

const backend = BACKENDS[BACKENDS.length - 1]!;

describe("owned threads over stdio", () => {
  let db: TestDatabase;
  let roots: ReturnType<typeof makeRoots>;
  let running: RunningServer | null = null;
  let users: TeamUsers;
  let bobsThread: string;

  const stdio = (user: string | null) =>
    startStdioAs(async (overrides) => (running = (await startServerOn(db, { modelProvider: "openai", model: "mock-model", ...overrides }, true)).server), user);

  beforeEach(async () => {
    db = await freshDatabase(backend);
    roots = makeRoots();
    // Users and bob's thread, made over WebSocket first.
    const ws = await startServerOn(db, { auth: "token-any-user", authToken: SERVER_TOKEN });
    try {
      users = await addTeam(ws.server.app.team.users, roots.rootOf);
      const bob = await connectAs(ws.url, users.bob.token);
      bobsThread = (await bob.request("thread/start", {})).thread.id;
      await bob.request("thread/name/set", { threadId: bobsThread, name: "bob's" });
      await bob.close();
    } finally {
      await ws.close();
    }
  });
  afterEach(async () => {
    await running?.close();
    running = null;
    await db.cleanup();
    roots.cleanup();
  });

  it("acts as the user --user names: another user's thread answers as an unknown one for every thread method", async () => {
    const { client } = await stdio("alice");
    expect((await client.request("account/read", {})).user).toMatchObject({ userId: users.alice.record.id, name: "alice", signIn: "stdio", roots: [users.alice.root] });
    const unknown = uuidv7();
    for (const method of THREAD_METHODS) {
      const sample = THREAD_METHOD_SAMPLES[method]!;
      const a = await client.requestRaw(method, sample(unknown));
      const b = await client.requestRaw(method, sample(bobsThread));
      const norm = (f: Record<string, any>, id: string) => (f.error ? errorBytes(f, id) : JSON.stringify(f.result).replaceAll(id, "<id>"));
      expect(norm(b, bobsThread), method).toBe(norm(a, unknown));
    }
    expect((await client.request("thread/list", {})).data).toEqual([]);
    const refused = await client.requestRaw("thread/start", { cwd: users.bob.root });
    expect(refused.error.message).toMatch(/outside alice's workspace roots/);
    expect((await client.request("thread/start", {})).cwd).toBe(users.alice.root);
  });

  it("is the spawning user (the local admin) without --user, and refuses to start for an unknown user", async () => {
    const { client } = await stdio(null);
    const who = (await client.request("account/read", {})).user;
    expect(who).toMatchObject({ userId: "local", admin: true, roots: null, signIn: "stdio" });
    const read = await client.request("thread/read", { threadId: bobsThread });
    expect(read.thread.name).toBe("bob's");
    expect(read.access).toMatchObject({ owner: { name: "bob" }, yours: "admin" });
    await running!.close();
    running = null;
    await expect(stdio("nobody")).rejects.toThrow(/APP_SERVER_USER names no user of this server: nobody/);
  });
});
