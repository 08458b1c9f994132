/**
 * Allowed workspaces (issue 28, item 3): a confined user's thread cwd, writable roots, resume/turn
 * overrides, forks, command/exec cwd and file-search roots must lie inside the user's roots —
 * resolved, so a symbolic link inside a root that points out of it is outside — and only a user
 * configured for it gets danger-full-access. Refused requests record nothing.
 */
import { mkdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { BACKENDS } from "../support/db.js";
import { text } from "../support/turns.js";
import { addUser, startTeamServer, type TeamServer, type TeamUser } from "./support.js";

const backend = BACKENDS[BACKENDS.length - 1]!;

describe("allowed workspaces", () => {
  let t: TeamServer;
  let dave: TeamUser;
  beforeEach(async () => {
    t = await startTeamServer(backend);
    dave = await addUser(t.ts.server.app.team.users, "dave", { roots: [t.roots.rootOf("dave")], dangerFullAccess: true });
  });
  afterEach(async () => {
    await t.close();
  });

  const refused = async (c: { requestRaw(m: string, p?: unknown): Promise<Record<string, any>> }, method: string, params: unknown, pattern: RegExp) => {
    const f = await c.requestRaw(method, params);
    expect(f.error, `${method} ${JSON.stringify(params)}`).toBeDefined();
    expect(f.error.code).toBe(-32600);
    expect(f.error.message).toMatch(pattern);
  };

  it("starts a user's threads in its first root and refuses a cwd or writable root outside its roots, links included", async () => {
    const alice = await t.as(t.users.alice);
    const aliceRoot = t.users.alice.root!;
    const bobRoot = t.users.bob.root!;
    expect((await alice.request("thread/start", {})).cwd).toBe(aliceRoot);
    mkdirSync(path.join(aliceRoot, "proj"));
    expect((await alice.request("thread/start", { cwd: "proj" })).cwd).toBe(path.join(aliceRoot, "proj"));
    symlinkSync(bobRoot, path.join(aliceRoot, "to-bob"));

    await refused(alice, "thread/start", { cwd: bobRoot }, /outside alice's workspace roots/);
    await refused(alice, "thread/start", { cwd: "/" }, /outside alice's workspace roots/);
    await refused(alice, "thread/start", { cwd: path.join(aliceRoot, "to-bob") }, /resolves through a symbolic link to .*bob/);
    await refused(alice, "thread/start", { cwd: path.join(aliceRoot, "to-bob", "deeper") }, /symbolic link/);
    await refused(alice, "thread/start", { cwd: path.join(aliceRoot, "..", "bob") }, /outside/);
    await refused(alice, "thread/start", { runtimeWorkspaceRoots: [bobRoot] }, /writable root .* outside/);
    await refused(alice, "thread/start", { sandbox: "danger-full-access" }, /danger-full-access is not allowed for alice/);
    await refused(alice, "thread/start", { permissions: ":danger-full-access" }, /danger-full-access is not allowed/);
    // Nothing was created by the refused requests.
    expect((await alice.request("thread/list", {})).data).toHaveLength(2);

    const daves = await (await t.as(dave)).request("thread/start", { sandbox: "danger-full-access" });
    expect(daves.sandbox).toEqual({ type: "dangerFullAccess" });
  });

  it("checks resume and turn overrides against the thread owner's roots, and a thread whose cwd became a link out", async () => {
    const alice = await t.as(t.users.alice);
    const aliceRoot = t.users.alice.root!;
    const bobRoot = t.users.bob.root!;
    const proj = path.join(aliceRoot, "proj");
    mkdirSync(proj);
    const thread = (await alice.request("thread/start", { cwd: proj })).thread;
    await refused(alice, "thread/resume", { threadId: thread.id, cwd: bobRoot }, /outside alice's workspace roots/);
    await refused(alice, "thread/resume", { threadId: thread.id, sandbox: "danger-full-access" }, /danger-full-access/);
    await refused(alice, "turn/start", { threadId: thread.id, input: text("hi"), cwd: "/etc" }, /outside/);
    await refused(
      alice,
      "turn/start",
      { threadId: thread.id, input: text("hi"), sandboxPolicy: { type: "workspaceWrite", writableRoots: [bobRoot], networkAccess: false, excludeTmpdirEnvVar: false, excludeSlashTmp: false } },
      /writable root .* outside/,
    );
    await refused(alice, "turn/start", { threadId: thread.id, input: text("hi"), runtimeWorkspaceRoots: ["/var"] }, /outside/);
    // The thread's directory swapped for a link to bob's root after it was made: its next turn is refused.
    rmSync(proj, { recursive: true });
    symlinkSync(bobRoot, proj);
    await refused(alice, "turn/start", { threadId: thread.id, input: text("hi") }, /symbolic link/);
    const read = await alice.request("thread/read", { threadId: thread.id, includeTurns: true });
    expect(read.thread.turns).toEqual([]);
    expect(read.thread.cwd).toBe(proj);
    expect(t.mock.requests).toHaveLength(0);
  });

  it("forks a thread shared with a user into that user's workspace only", async () => {
    const [alice, bob] = [await t.as(t.users.alice), await t.as(t.users.bob)];
    const bobs = (await bob.request("thread/start", {})).thread;
    await bob.request("thread/share", { threadId: bobs.id, user: "alice", access: "read" });
    await refused(alice, "thread/fork", { threadId: bobs.id }, /outside alice's workspace roots/);
    const fork = await alice.request("thread/fork", { threadId: bobs.id, cwd: t.users.alice.root });
    expect(fork.thread.cwd).toBe(t.users.alice.root);
    const read = await alice.request("thread/read", { threadId: fork.thread.id });
    expect(read.access).toMatchObject({ owner: { name: "alice" }, yours: "owner" });
    // bob does not see alice's fork.
    expect((await bob.request("thread/list", {})).data.map((d: { id: string }) => d.id)).toEqual([bobs.id]);
  });

  it("keeps command/exec and file searches inside the caller's roots", async () => {
    const alice = await t.as(t.users.alice);
    writeFileSync(path.join(t.users.alice.root!, "notes.md"), "mine\n");
    writeFileSync(path.join(t.users.bob.root!, "secret.md"), "bob's\n");
    await refused(alice, "command/exec", { command: ["cat", "secret.md"], cwd: t.users.bob.root }, /outside alice's workspace roots/);
    await refused(alice, "command/exec", { command: ["true"], sandboxPolicy: { type: "dangerFullAccess" } }, /danger-full-access is not allowed/);
    await refused(alice, "fuzzyFileSearch", { query: "secret", roots: [t.users.bob.root] }, /search root .* outside/);
    await refused(alice, "fuzzyFileSearch/sessionStart", { sessionId: "s", roots: ["/"] }, /outside/);
    const found = await alice.request("fuzzyFileSearch", { query: "notes", roots: [t.users.alice.root] });
    expect(found.files.map((f: { path: string }) => f.path)).toEqual(["notes.md"]);
    // A user allowed danger-full-access runs unconfined, in its own root by default.
    const ran = await (await t.as(dave)).request("command/exec", { command: ["pwd"], sandboxPolicy: { type: "dangerFullAccess" } });
    expect(ran).toMatchObject({ exitCode: 0, stdout: `${t.roots.rootOf("dave")}\n` });
  });
});
