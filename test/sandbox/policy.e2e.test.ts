// @needs-os-sandbox: runs commands in the OS sandbox (vitest.config.ts leaves this file out where bubblewrap cannot run).
/**
 * A thread's sandbox policy over a real WebSocket, on both backends: turn/start's `sandboxPolicy`
 * (writableRoots, networkAccess) is what the OS sandbox enforces, it is stored with the thread (next
 * turns, thread/resume, a restarted server), and a bare `sandbox` mode that changes the mode resets it.
 */
import { existsSync } from "node:fs";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { BACKENDS, freshDatabase, type TestDatabase } from "../support/db.js";
import { TestClient } from "../support/client.js";
import { startMockModelServer, type MockModelServer } from "../support/mock-model-server.js";
import { startServerOn, type TestServer } from "../support/server.js";
import { mockProviders, text, turnCompleted } from "../support/turns.js";
import { itemsCompleted } from "../support/wire.js";
import { makeDirs, type Dirs } from "../tools/helpers.js";

describe.each(BACKENDS)("sandboxPolicy of a thread (%s)", (backend) => {
  let db: TestDatabase | undefined;
  let mock: MockModelServer | undefined;
  let ts: TestServer | undefined;
  let client: TestClient | undefined;
  let dirs: Dirs | undefined;
  afterEach(async () => {
    await client?.close();
    await ts?.close();
    await mock?.close();
    await db?.cleanup();
    dirs?.cleanup();
    db = mock = ts = client = dirs = undefined;
  });

  const start = async (reopen: boolean) => {
    ts = await startServerOn(db!, { modelProvider: "openai", model: "mock-model", providers: mockProviders(mock!) }, reopen);
    client = await TestClient.initialized(ts.url);
  };
  const shellTurn = async (threadId: string, command: string, params: object = {}) => {
    mock!.enqueue({ toolCalls: [{ name: "shell", arguments: { command } }] }, { text: "done" });
    const { turn } = await client!.request("turn/start", { threadId, input: text("go"), ...params });
    expect((await turnCompleted(client!, turn.id, 30_000)).params.turn.status).toBe("completed");
    return itemsCompleted(client!, "commandExecution").at(-1);
  };

  it("writableRoots given at turn/start are writable for that turn and the next, after a restart too, until a mode change", async () => {
    db = await freshDatabase(backend);
    mock = await startMockModelServer();
    dirs = makeDirs();
    await start(false);
    const threadId = (await client!.request("thread/start", { cwd: dirs.ws, approvalPolicy: "never", sandbox: "workspace-write" })).thread.id;
    const outside = (name: string) => path.join(dirs!.outside, name);

    // Without the policy, outside is read-only for commands.
    expect(await shellTurn(threadId, `touch ${outside("before")}`)).toMatchObject({ status: "failed" });
    expect(existsSync(outside("before"))).toBe(false);

    const sandboxPolicy = { type: "workspaceWrite", writableRoots: [dirs.outside], networkAccess: false, excludeTmpdirEnvVar: false, excludeSlashTmp: false };
    expect(await shellTurn(threadId, `touch ${outside("granted")}`, { sandboxPolicy })).toMatchObject({ status: "completed" });
    expect(await shellTurn(threadId, `touch ${outside("next-turn")}`)).toMatchObject({ status: "completed" });
    expect(existsSync(outside("granted")) && existsSync(outside("next-turn"))).toBe(true);

    // Stored: a restarted server enforces it and reports it.
    await client!.close();
    await ts!.close();
    await start(true);
    const resumed = await client!.request("thread/resume", { threadId });
    expect(resumed.sandbox).toEqual(sandboxPolicy);
    expect(await shellTurn(threadId, `touch ${outside("after-restart")}`)).toMatchObject({ status: "completed" });

    // A mode change resets the policy to that mode's defaults.
    await client!.request("thread/resume", { threadId, sandbox: "read-only" });
    const denied = await shellTurn(threadId, `touch ${outside("read-only")}; touch in-ws`);
    expect(denied).toMatchObject({ status: "failed" });
    expect(denied.aggregatedOutput).toMatch(/Read-only file system/);
    expect(existsSync(outside("read-only")) || existsSync(path.join(dirs.ws, "in-ws"))).toBe(false);
  });
});
