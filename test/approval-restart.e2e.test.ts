// @needs-os-sandbox: runs commands in the OS sandbox (vitest.config.ts leaves this file out where bubblewrap cannot run).
/**
 * A pending approval survives a restart (graceful and SIGKILL-like): the next process restores
 * the turn as waiting, sends the same request (same itemId) to the client that resumes the
 * thread, runs the tool on accept and continues the loop. A tool that had started is never re-run.
 */
import { existsSync, readFileSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { BACKENDS, freshDatabase, type TestDatabase } from "./support/db.js";
import { TestClient } from "./support/client.js";
import { startMockModelServer, type MockModelServer } from "./support/mock-model-server.js";
import { startServerOn, type TestServer } from "./support/server.js";
import { text, turnCompleted } from "./support/turns.js";
import { shellInvocation } from "../src/tools/shell-invocation.js";

let cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanup.reverse()) await c().catch(() => {});
  cleanup = [];
});

async function boot(db: TestDatabase, mock: MockModelServer, reopen: boolean): Promise<{ server: TestServer; client: TestClient }> {
  const server = await startServerOn(
    db,
    { modelProvider: "openai", model: "mock-model", providers: { openai: { baseURL: mock.openaiBaseUrl, apiKey: "k" } } },
    reopen,
  );
  const client = await TestClient.connect(server.url);
  await client.request("initialize", { clientInfo: { name: "t", title: null, version: "1" } });
  cleanup.push(() => client.close(), () => server.close());
  return { server, client };
}

describe.each(BACKENDS)("pending approval across a restart (%s)", (backend) => {
  it("is asked again after the restart and the turn continues on accept", async () => {
    const db = await freshDatabase(backend);
    const mock = await startMockModelServer();
    cleanup.push(() => db.cleanup(), () => mock.close());
    const workspace = path.join(db.home, "ws");
    await mkdir(workspace);
    const marker = path.join(workspace, "ran.txt");

    const first = await boot(db, mock, false);
    const threadId = (await first.client.request("thread/start", { cwd: workspace, approvalPolicy: "untrusted" })).thread.id;
    mock.enqueue({ toolCalls: [{ name: "shell", arguments: { command: "echo ran >> ran.txt" } }] }, { text: "all done" });
    const { turn } = await first.client.request("turn/start", { threadId, input: text("make the marker") });
    const asked = await first.client.waitFor((f) => f.method === "item/commandExecution/requestApproval");
    const itemId = asked.params.itemId;
    const lastSeq = Math.max(...first.client.notifications().map((f) => f.params.seq ?? 0));

    // The process stops while the request is unanswered.
    await first.client.close();
    await first.server.close();
    expect(existsSync(marker)).toBe(false);

    const second = await boot(db, mock, true);
    const again = second.client.waitFor((f) => f.method === "item/commandExecution/requestApproval");
    const resumed = await second.client.request("thread/resume", { threadId, afterSeq: lastSeq });
    expect(resumed.thread.turns.at(-1)).toMatchObject({ id: turn.id, status: "inProgress" });
    const request = await again;
    expect(request.params).toMatchObject({ threadId, turnId: turn.id, itemId, command: shellInvocation("echo ran >> ran.txt") });
    second.client.respond(request.id, { decision: "accept" });

    const done = await turnCompleted(second.client, turn.id);
    expect(done.params.turn.status).toBe("completed");
    expect(readFileSync(marker, "utf8")).toBe("ran\n"); // ran exactly once
    const completed = second.client.notifications("item/completed").find((f) => f.params.item.id === itemId);
    expect(completed?.params.item).toMatchObject({ type: "commandExecution", status: "completed", exitCode: 0 });
    // The model got the command's result and answered.
    expect(mock.requests).toHaveLength(2);
    expect(JSON.stringify(mock.requests[1]!.body.input)).toContain("function_call_output");
    const read = await second.client.request("thread/read", { threadId, includeTurns: true });
    const items = read.thread.turns.at(-1).items;
    expect(items.filter((i: any) => i.id === itemId)).toHaveLength(1);
    expect(items.at(-1)).toMatchObject({ type: "agentMessage", text: "all done" });
  });

  it("declines after a restart like before it: the command never runs", async () => {
    const db = await freshDatabase(backend);
    const mock = await startMockModelServer();
    cleanup.push(() => db.cleanup(), () => mock.close());
    const workspace = path.join(db.home, "ws");
    await mkdir(workspace);
    const first = await boot(db, mock, false);
    const threadId = (await first.client.request("thread/start", { cwd: workspace, approvalPolicy: "untrusted" })).thread.id;
    mock.enqueue({ toolCalls: [{ name: "shell", arguments: { command: "touch nope.txt" } }] }, { text: "ok, not doing it" });
    const { turn } = await first.client.request("turn/start", { threadId, input: text("touch it") });
    await first.client.waitFor((f) => f.method === "item/commandExecution/requestApproval");
    await first.client.close();
    await first.server.close();

    const second = await boot(db, mock, true);
    second.client.onServerRequest("item/commandExecution/requestApproval", () => ({ decision: "decline" }));
    await second.client.request("thread/resume", { threadId });
    const done = await turnCompleted(second.client, turn.id);
    expect(done.params.turn.status).toBe("completed");
    expect(existsSync(path.join(workspace, "nope.txt"))).toBe(false);
    expect(JSON.stringify(mock.requests[1]!.body.input)).toMatch(/declined/i);
  });
});
