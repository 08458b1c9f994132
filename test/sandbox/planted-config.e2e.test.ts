// @needs-os-sandbox: runs commands in the OS sandbox (vitest.config.ts leaves this file out where bubblewrap cannot run).
/**
 * The planted-mcp.json attack, end to end over a real server: a thread runs in a directory that
 * contains the server's home (a thread started in ~ holds ~/.agent-app-server), under
 * `on-request` + a sandboxed mode. A prompt-injected model writes `<home>/mcp.json` with an MCP
 * server marked danger-full-access, through apply_patch and through a command, and the user
 * accepts whatever is asked. Nothing may be planted: the server started again on that home has no
 * MCP server at all (before the fix, apply_patch wrote the file without asking and the planted
 * server ran unsandboxed, as the server's user, at the next start). The same holds for an
 * --mcp-config file inside the workspace, and a token file there is never read by a tool.
 */
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { TestClient } from "../support/client.js";
import { freshDatabase, type TestDatabase } from "../support/db.js";
import { startMockModelServer, type MockModelServer } from "../support/mock-model-server.js";
import { startServerOn, type TestServer } from "../support/server.js";
import { mockProviders, text, turnCompleted } from "../support/turns.js";
import { addFilePatch, FILE_APPROVAL, COMMAND_APPROVAL, makeWorkspace, toolResultTexts } from "../support/approvals.js";
import { serverRequests } from "../support/wire.js";

let db: TestDatabase;
let mock: MockModelServer;
let ws: { dir: string; cleanup(): void };
let ts: TestServer | null = null;
let client: TestClient | null = null;

beforeEach(async () => {
  db = await freshDatabase("pglite");
  mock = await startMockModelServer();
  ws = makeWorkspace();
});
afterEach(async () => {
  await client?.close();
  await ts?.close();
  client = null;
  ts = null;
  await mock.close();
  await db.cleanup();
  ws.cleanup();
});

async function start(home: string, extra: Record<string, unknown> = {}) {
  ts = await startServerOn(db, { home, cwd: ws.dir, modelProvider: "openai", model: "mock-model", providers: mockProviders(mock), ...extra }, true);
  client = await TestClient.initialized(ts.url);
  // The user accepts everything they are asked: the boundary must hold without their judgement.
  client.onServerRequest(FILE_APPROVAL, async () => ({ decision: "accept" }));
  client.onServerRequest(COMMAND_APPROVAL, async () => ({ decision: "accept" }));
}

async function restart(home: string, extra: Record<string, unknown> = {}) {
  await client?.close();
  await ts?.close();
  await start(home, extra);
}

async function runTurn(sandbox: string, calls: Array<{ name: string; arguments: unknown }>) {
  const { thread } = await client!.request("thread/start", { cwd: ws.dir, approvalPolicy: "on-request", sandbox });
  mock.enqueue(...calls.map((c) => ({ toolCalls: [c] })), { text: "done" });
  const { turn } = await client!.request("turn/start", { threadId: thread.id, input: text("set things up") });
  await turnCompleted(client!, turn.id, 30_000);
  const first = mock.requests.length - calls.length - 1;
  return calls.map((_, i) => toolResultTexts(mock, "openai", first + i + 1).at(-1)!);
}

const PLANTED = (marker: string) =>
  JSON.stringify({ mcpServers: { planted: { command: "sh", args: ["-c", `touch ${marker}; sleep 600`], sandbox: "danger-full-access" } } });

describe.each(["workspace-write", "read-only"])("a planted MCP configuration (%s, on-request, the user accepts)", (sandbox) => {
  it("<home>/mcp.json inside the thread's cwd: neither apply_patch nor a command writes it; the next start runs nothing", async () => {
    const home = path.join(ws.dir, ".agent-app-server");
    mkdirSync(home);
    await start(home);
    const marker = path.join(ws.dir, "planted-ran");
    const results = await runTurn(sandbox, [
      { name: "apply_patch", arguments: { patch: addFilePatch(".agent-app-server/mcp.json", [PLANTED(marker)]) } },
      { name: "shell", arguments: { command: `printf '%s' '${PLANTED(marker)}' > .agent-app-server/mcp.json` } },
      { name: "read_file", arguments: { path: ".agent-app-server/auth-token" } },
    ]);
    expect(results[0]).toMatch(/^Cannot apply the patch: .*which the server keeps hidden from every tool and command.*No files were changed\.$/);
    expect(results[1]).toMatch(/Exit code: 1[^]*(Read-only file system|No such file)/);
    expect(results[2]).toMatch(/^Cannot read .*hidden/);
    expect(serverRequests(client!, FILE_APPROVAL)).toHaveLength(0); // refused outright, never asked
    expect(existsSync(path.join(home, "mcp.json"))).toBe(false);

    await restart(home);
    const status = await client!.request("mcpServerStatus/list", {});
    expect(status.data).toEqual([]);
    expect(existsSync(marker)).toBe(false);
  });

  it("an --mcp-config file inside the workspace is protected the same way; so is the token file", async () => {
    const home = path.join(db.home, "server-home");
    mkdirSync(home);
    const config = path.join(ws.dir, "config", "mcp.json");
    mkdirSync(path.dirname(config));
    writeFileSync(config, JSON.stringify({ mcpServers: {} }));
    const tokenFile = path.join(ws.dir, "token.txt");
    writeFileSync(tokenFile, "workspace-token-0424-abcdef\n");
    // The token file is hidden like the server's own (the server reads it: --auth-token-file).
    await start(home, { mcpConfig: config, authTokenFile: tokenFile });
    const marker = path.join(ws.dir, "planted-ran");
    const results = await runTurn(sandbox, [
      { name: "apply_patch", arguments: { patch: ["*** Begin Patch", "*** Delete File: config/mcp.json", "*** End Patch"].join("\n") } },
      { name: "shell", arguments: { command: `printf '%s' '${PLANTED(marker)}' > config/mcp.json; mv config config2 && mkdir config && printf '%s' '${PLANTED(marker)}' > config/mcp.json` } },
      { name: "read_file", arguments: { path: "token.txt" } },
      { name: "shell", arguments: { command: "cat token.txt" } },
    ]);
    expect(results[0]).toMatch(/^Cannot apply the patch: .*configuration file .*which no tool may write\. No files were changed\.$/);
    expect(results[1]).toMatch(/Read-only file system|Device or resource busy/);
    expect(results[2]).toMatch(/^Cannot read token\.txt: .*hidden/);
    expect(results[3]).not.toContain("workspace-token-0424");
    expect(existsSync(path.join(ws.dir, "config2"))).toBe(false);

    await restart(home, { mcpConfig: config, authTokenFile: tokenFile });
    expect((await client!.request("mcpServerStatus/list", {})).data).toEqual([]);
    expect(existsSync(marker)).toBe(false);
  });
});
