/**
 * Server requests reach only the thread owner's connections (issue 28, item 2) — and those of a
 * user the thread is shared with for writing. A reader and an admin following the thread see the
 * command's item and its outcome, never the question, whether they followed it before it was
 * asked or after. The decision is audited with who gave it and from which connection.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { COMMAND_APPROVAL, nthServerRequest } from "../support/approvals.js";
import { BACKENDS } from "../support/db.js";
import { text, turnCompleted } from "../support/turns.js";
import { serverRequests } from "../support/wire.js";
import { addUser, startTeamServer, type TeamServer } from "./support.js";

const backend = BACKENDS[BACKENDS.length - 1]!;

describe("approvals go to the owner", () => {
  let t: TeamServer;
  beforeEach(async () => {
    t = await startTeamServer(backend);
  });
  afterEach(async () => {
    await t.close();
  });

  it("asks the owner's connections and a write share's, never a reader's or an admin's; the answer is audited", async () => {
    const dave = await addUser(t.ts.server.app.team.users, "dave", { roots: [t.roots.rootOf("dave")] });
    const alice1 = await t.as(t.users.alice, "alice-1");
    const alice2 = await t.as(t.users.alice, "alice-2");
    const bob = await t.as(t.users.bob, "bob-writer");
    const reader = await t.as(dave, "dave-reader");
    const carol = await t.as(t.users.carol, "carol-admin");

    const thread = (await alice1.request("thread/start", { approvalPolicy: "untrusted" })).thread;
    await alice1.request("thread/share", { threadId: thread.id, user: "bob", access: "write" });
    await alice1.request("thread/share", { threadId: thread.id, user: "dave", access: "read" });
    for (const c of [alice2, bob, reader]) await c.request("thread/resume", { threadId: thread.id });

    t.mock.enqueue({ toolCalls: [{ name: "shell", arguments: { command: "touch should-not-exist" } }] }, { text: "declined, fine" });
    const { turn } = await alice1.request("turn/start", { threadId: thread.id, input: text("touch it") });
    const asked = await Promise.all([alice1, alice2, bob].map((c) => nthServerRequest(c, COMMAND_APPROVAL)));
    expect(new Set(asked.map((f) => f.params.itemId)).size).toBe(1);
    // The admin follows the thread while the question is pending: it is not sent the question.
    await carol.request("thread/resume", { threadId: thread.id });

    alice2.respond(asked[1]!.id, { decision: "decline" });
    for (const c of [alice1, alice2, bob, reader, carol]) await turnCompleted(c, turn.id);
    // Everyone following saw the command's item end declined; only the writers were asked.
    for (const c of [reader, carol]) {
      expect(serverRequests(c, COMMAND_APPROVAL), c === reader ? "reader" : "admin").toEqual([]);
      expect(c.notifications("item/completed").some((f) => f.params.item.type === "commandExecution" && f.params.item.status === "declined")).toBe(true);
    }
    for (const c of [alice1, bob]) await c.waitForNotification("serverRequest/resolved", (p) => p.threadId === thread.id);

    const rows = (await carol.request("audit/list", { threadId: thread.id })).data.filter((r: { action: string }) => r.action === "approval.decided");
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ userName: "alice", userId: t.users.alice.record.id, client: "alice-2", admin: false, threadId: thread.id });
    expect(rows[0].detail).toMatchObject({ method: COMMAND_APPROVAL, decision: "decline", command: expect.stringContaining("touch should-not-exist"), turnId: turn.id });
    expect(rows[0].connection).toMatch(/^[0-9a-f-]{8}\/\d+$/);
  });

  it("stops asking a user whose write share was taken back", async () => {
    const alice = await t.as(t.users.alice);
    const bob = await t.as(t.users.bob);
    const thread = (await alice.request("thread/start", { approvalPolicy: "untrusted" })).thread;
    await alice.request("thread/share", { threadId: thread.id, user: "bob", access: "write" });
    await bob.request("thread/resume", { threadId: thread.id });
    await alice.request("thread/share", { threadId: thread.id, user: "bob", access: "read" });

    t.mock.enqueue({ toolCalls: [{ name: "shell", arguments: { command: "touch nope" } }] }, { text: "ok" });
    const { turn } = await alice.request("turn/start", { threadId: thread.id, input: text("go") });
    const request = await nthServerRequest(alice, COMMAND_APPROVAL);
    alice.respond(request.id, { decision: "decline" });
    await turnCompleted(bob, turn.id);
    expect(serverRequests(bob, COMMAND_APPROVAL)).toEqual([]);
  });
});
