// @needs-os-sandbox: runs MCP stdio servers in the OS sandbox (vitest.config.ts leaves this file out where bubblewrap cannot run).
/**
 * MCP servers as tools, end to end over a real WebSocket with the mock model (openai provider):
 * offered to the model as mcp__<server>__<tool>, calls as mcpToolCall items, approvals through
 * mcpServer/elicitation/request under `untrusted` (accept once, for the session, decline),
 * read-only tools unasked, elicitations from the MCP server forwarded, progress as
 * item/mcpToolCall/progress, a stable tool list across turns / resume / restart (with a slow
 * server too), a crashed or killed server healed by the supervisor (clients told through
 * mcpServer/startupStatus/updated), status calls that restart nothing, and the client methods
 * (status, call, resource, reload).
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { BACKENDS, freshDatabase, type TestDatabase } from "../support/db.js";
import { RpcError, TestClient } from "../support/client.js";
import { startMockModelServer, type MockModelServer } from "../support/mock-model-server.js";
import { serverProcess, waitFor } from "../support/mcp.js";
import { REPO_ROOT } from "../support/process.js";
import { conformanceProblems } from "../support/codex.js";
import { startRecordingRelay, type RecordingRelay } from "../support/recording-relay.js";
import { startServerOn, type TestServer } from "../support/server.js";
import { toolResultTexts } from "../support/approvals.js";
import { mockProviders, text, turnCompleted } from "../support/turns.js";
import { itemsCompleted, itemsStarted } from "../support/wire.js";

const FIXTURE = path.join(REPO_ROOT, "test", "fixtures", "mcp-test-server.mjs");
const ELICIT = "mcpServer/elicitation/request";
const backend = BACKENDS[BACKENDS.length - 1]!;

let dir: string;
let db: TestDatabase | undefined;
let mock: MockModelServer | undefined;
let ts: TestServer | undefined;
let client: TestClient | undefined;
let relays: RecordingRelay[] = [];

beforeEach(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), "aas-mcp-e2e-"));
  db = await freshDatabase(backend);
  mock = await startMockModelServer();
});
afterEach(async () => {
  // Every server message of every test is what Codex's schema allows (intended -32602s excepted).
  const problems = relays.flatMap((r) => conformanceProblems(r.frames)).filter((p) => !p.includes("no MCP server named nope"));
  await client?.close();
  for (const r of relays) await r.close();
  relays = [];
  await ts?.close();
  await mock?.close();
  await db?.cleanup();
  rmSync(dir, { recursive: true, force: true });
  client = ts = mock = db = undefined;
  expect(problems).toEqual([]);
});

const configFile = () => path.join(dir, "mcp.json");
function writeConfig(servers: Record<string, unknown> = { test: { command: process.execPath, args: [FIXTURE], cwd: dir } }) {
  writeFileSync(configFile(), JSON.stringify({ mcpServers: servers }));
}

/** Starts the server (on the same database and home with `reopen`); `waitForMcp` false leaves the servers starting. */
async function start(reopen = false, waitForMcp = true) {
  ts = await startServerOn(db!, { modelProvider: "openai", model: "mock-model", providers: mockProviders(mock!), mcpConfig: configFile(), cwd: dir }, reopen);
  const relay = await startRecordingRelay(ts.url);
  relays.push(relay);
  client = await TestClient.initialized(relay.url);
  if (waitForMcp) await ts.server.app.mcp.ready();
}

async function restart(waitForMcp = true) {
  await client!.close();
  await ts!.close();
  await start(true, waitForMcp);
}

async function turn(threadId: string, ...steps: Parameters<MockModelServer["enqueue"]>) {
  mock!.enqueue(...steps);
  const { turn } = await client!.request("turn/start", { threadId, input: text("go") });
  return (await turnCompleted(client!, turn.id, 30_000)).params.turn;
}

const toolNames = (n: number) => (mock!.requests[n]!.body.tools as Array<{ name: string }>).map((t) => t.name);
const toolsJson = (n: number) => JSON.stringify(mock!.requests[n]!.body.tools);

describe("MCP tools in turns", () => {
  it("offers the tools sorted after the built-ins' rules; a read-only tool runs unasked as an mcpToolCall item", async () => {
    writeConfig();
    await start();
    const threadId = (await client!.request("thread/start", { approvalPolicy: "untrusted" })).thread.id;
    const asked: unknown[] = [];
    client!.onServerRequest(ELICIT, (p) => (asked.push(p), { action: "decline", content: null }));
    const done = await turn(threadId, { toolCalls: [{ name: "mcp__test__echo", arguments: { text: "hi" } }] }, { text: "done" });
    expect(done.status).toBe("completed");
    const names = toolNames(0);
    expect(names).toEqual(expect.arrayContaining(["shell", "mcp__test__echo", "mcp__test__write_note", "mcp__test__filler_03"]));
    const mcpNames = names.filter((n) => n.startsWith("mcp__"));
    expect(mcpNames).toEqual([...mcpNames].sort());
    expect(asked).toEqual([]);
    const [started] = itemsStarted(client!, "mcpToolCall");
    expect(started).toMatchObject({ type: "mcpToolCall", server: "test", tool: "echo", arguments: { text: "hi" }, status: "inProgress", readOnlyHint: true });
    const [item] = itemsCompleted(client!, "mcpToolCall");
    expect(item).toMatchObject({ status: "completed", result: { content: [{ type: "text", text: "echo: hi" }], structuredContent: { echoed: "hi" } }, error: null });
    // The item's duration is the call's own: within the span from its item/started to its item/completed.
    const startedAtMs = client!.notifications("item/started").find((f) => f.params.item.id === item.id)!.params.startedAtMs;
    const completedAtMs = client!.notifications("item/completed").find((f) => f.params.item.id === item.id)!.params.completedAtMs;
    expect(item.durationMs).toEqual(expect.any(Number));
    expect(item.durationMs).toBeGreaterThanOrEqual(0);
    expect(item.durationMs).toBeLessThanOrEqual(completedAtMs - startedAtMs);
    expect(toolResultTexts(mock!, "openai", 1).at(-1)).toBe("echo: hi");
  });

  it("untrusted: a tool without the read-only hint asks; accept runs it once, decline does not, the session choice is remembered", async () => {
    writeConfig();
    await start();
    const threadId = (await client!.request("thread/start", { approvalPolicy: "untrusted" })).thread.id;
    const answers = [
      { action: "accept", content: { decision: "Approve Once" } },
      { action: "decline", content: null },
      { action: "accept", content: { decision: "Approve this Session" } },
    ];
    const asked: any[] = [];
    client!.onServerRequest(ELICIT, (p) => (asked.push(p), answers.shift()));
    const note = (name: string) => ({ toolCalls: [{ name: "mcp__test__write_note", arguments: { name, text: name } }] });
    await turn(threadId, note("once.txt"), note("declined.txt"), note("session.txt"), note("unasked.txt"), { text: "done" });

    expect(asked).toHaveLength(3);
    expect(asked[0]).toMatchObject({ threadId, serverName: "test", mode: "form", message: expect.stringContaining('"write_note"') });
    expect(readFileSync(path.join(dir, "once.txt"), "utf8")).toBe("once.txt");
    expect(existsSync(path.join(dir, "declined.txt"))).toBe(false);
    expect(existsSync(path.join(dir, "session.txt"))).toBe(true);
    expect(existsSync(path.join(dir, "unasked.txt"))).toBe(true);
    expect(itemsCompleted(client!, "mcpToolCall").map((i) => i.status)).toEqual(["completed", "failed", "completed", "completed"]);
    expect(toolResultTexts(mock!, "openai", 2).at(-1)).toMatch(/declined this MCP tool call; it was not run/);
  });

  it("forwards an elicitation the MCP server sends during a call to the thread's clients", async () => {
    writeConfig();
    await start();
    const threadId = (await client!.request("thread/start", { approvalPolicy: "never" })).thread.id;
    const asked: any[] = [];
    client!.onServerRequest(ELICIT, (p) => (asked.push(p), { action: "accept", content: { answer: "forty-two" } }));
    await turn(threadId, { toolCalls: [{ name: "mcp__test__ask", arguments: { question: "What is the answer?" } }] }, { text: "done" });
    expect(asked).toHaveLength(1);
    expect(asked[0]).toMatchObject({ threadId, serverName: "test", mode: "form", message: "What is the answer?" });
    expect(toolResultTexts(mock!, "openai", 1).at(-1)).toBe('elicitation: accept {"answer":"forty-two"}');
  });

  it("the tool list is byte-identical across turns, a thread/resume and a restart", async () => {
    writeConfig();
    await start();
    const threadId = (await client!.request("thread/start", { approvalPolicy: "never" })).thread.id;
    await turn(threadId, { text: "one" });
    await turn(threadId, { text: "two" });
    await restart();
    await client!.request("thread/resume", { threadId });
    await turn(threadId, { text: "three" });
    expect(toolsJson(1)).toBe(toolsJson(0));
    expect(toolsJson(2)).toBe(toolsJson(0));
  });

  it("the first turn waits for a slow server: its tools are in the first request, and its call works", async () => {
    // A fresh home: nothing cached, so without the wait the first request would lack the server's tools.
    writeConfig({ test: { command: process.execPath, args: [FIXTURE], cwd: dir, env: { MCP_TEST_START_DELAY_MS: "3000" } } });
    await start(false, false);
    const threadId = (await client!.request("thread/start", { approvalPolicy: "never" })).thread.id;
    await turn(threadId, { toolCalls: [{ name: "mcp__test__echo", arguments: { text: "first" } }] }, { text: "done" });
    expect(toolNames(0)).toContain("mcp__test__echo");
    expect(toolResultTexts(mock!, "openai", 1).at(-1)).toBe("echo: first");
  });

  it("after a restart the first turn offers the same tools, even when a server is slow or does not start in time", async () => {
    const delayFile = path.join(dir, "start-delay");
    // A start-up timeout far above the slow start (1 s), so that the slow case does not depend on how
    // loaded the machine is; the late case waits it out once.
    writeConfig({ test: { command: process.execPath, args: [FIXTURE], cwd: dir, startupTimeoutSec: 12, env: { MCP_TEST_START_DELAY_FILE: delayFile } } });
    await start();
    const threadId = (await client!.request("thread/start", { approvalPolicy: "never" })).thread.id;
    await turn(threadId, { text: "before" });

    writeFileSync(delayFile, "1000"); // slow, within startupTimeoutSec
    await restart(false);
    await client!.request("thread/resume", { threadId });
    await turn(threadId, { toolCalls: [{ name: "mcp__test__echo", arguments: { text: "slow" } }] }, { text: "done" });
    expect(toolsJson(1)).toBe(toolsJson(0));
    expect(toolResultTexts(mock!, "openai", 2).at(-1)).toBe("echo: slow");

    writeFileSync(delayFile, "60000"); // does not start in time: the tools of the last run stay offered
    await restart(false);
    await client!.request("thread/resume", { threadId });
    await turn(threadId, { toolCalls: [{ name: "mcp__test__echo", arguments: { text: "late" } }] }, { text: "done" });
    expect(toolsJson(3)).toBe(toolsJson(0));
    expect(toolResultTexts(mock!, "openai", 4).at(-1)).toMatch(/^MCP tool test\/echo failed: MCP server test failed to start: did not start within 12 s/);
  });

  it("a server that crashes or never starts: the model gets a clear error, the other tools keep working", async () => {
    writeConfig({ test: { command: process.execPath, args: [FIXTURE], cwd: dir }, broken: { command: "no-such-mcp-server-xyz", cwd: dir } });
    await start();
    const threadId = (await client!.request("thread/start", { approvalPolicy: "never" })).thread.id;
    const done = await turn(
      threadId,
      { toolCalls: [{ name: "mcp__test__crash", arguments: {} }] },
      { toolCalls: [{ name: "mcp__test__echo", arguments: { text: "after" } }] },
      { toolCalls: [{ name: "shell", arguments: { command: "echo still-works" } }] },
      { text: "done" },
    );
    expect(done.status).toBe("completed");
    expect(toolNames(0).some((n) => n.startsWith("mcp__broken__"))).toBe(false);
    const afterCrash = toolResultTexts(mock!, "openai", 2).at(-1)!;
    // Either restarted in time (echo works) or a clear error naming the tool — never a hang or a failed turn.
    expect(afterCrash).toMatch(/^(echo: after|MCP tool test\/echo failed: .+)$/);
    expect(toolResultTexts(mock!, "openai", 3).at(-1)).toContain("still-works");
  });
});

describe("MCP servers that live like real ones", () => {
  it("status calls restart nothing: the same process answers, started once", async () => {
    const mark = path.join(dir, "starts");
    writeConfig({ test: { command: process.execPath, args: [FIXTURE], cwd: dir, env: { MCP_TEST_START_MARK: mark } } });
    await start();
    const conn = ts!.server.app.mcp.server("test")!;
    const pid = conn.pid;
    expect(pid).toBeGreaterThan(0);
    for (const detail of ["full", "toolsAndAuthOnly", "full"]) {
      const { data } = await client!.request("mcpServerStatus/list", { detail });
      expect(data[0]).toMatchObject({ name: "test", runtimeStatus: "connected" });
    }
    const threadId = (await client!.request("thread/start", {})).thread.id;
    expect(await client!.request("mcpServer/tool/call", { threadId, server: "test", tool: "echo", arguments: { text: "same" } })).toMatchObject({ content: [{ text: "echo: same" }] });
    expect(conn.pid).toBe(pid);
    expect(readFileSync(mark, "utf8").trim().split("\n")).toHaveLength(1);
  });

  it("a killed server is back by itself (clients told), with the same tools, callable", async () => {
    writeConfig();
    await start();
    const threadId = (await client!.request("thread/start", { approvalPolicy: "never" })).thread.id;
    await turn(threadId, { text: "before" });
    const conn = ts!.server.app.mcp.server("test")!;
    const pid = conn.pid!;
    const statuses = () => client!.notifications("mcpServer/startupStatus/updated").map((f) => f.params);
    const before = statuses().length;
    process.kill(serverProcess(pid)!, "SIGKILL");
    await waitFor(() => statuses().length >= before + 3, "failed, starting and ready told to the client");
    const told = statuses().slice(before);
    expect(told.map((p) => p.status)).toEqual(["failed", "starting", "ready"]);
    expect(told[0]).toEqual({ threadId: null, name: "test", environmentId: null, status: "failed", error: expect.stringMatching(/^MCP server test is restarting: the server exited/), failureReason: null });
    expect(told[2]).toEqual({ threadId: null, name: "test", environmentId: null, status: "ready", error: null, failureReason: null });
    expect(conn.pid).not.toBe(pid);
    await turn(threadId, { toolCalls: [{ name: "mcp__test__echo", arguments: { text: "healed" } }] }, { text: "done" });
    expect(toolsJson(1)).toBe(toolsJson(0));
    expect(toolResultTexts(mock!, "openai", 2).at(-1)).toBe("echo: healed");
  });

  it("progress of a running tool reaches the clients as item/mcpToolCall/progress", async () => {
    writeConfig();
    await start();
    const threadId = (await client!.request("thread/start", { approvalPolicy: "never" })).thread.id;
    const done = await turn(threadId, { toolCalls: [{ name: "mcp__test__progress", arguments: { steps: 2 } }] }, { text: "done" });
    const [item] = itemsCompleted(client!, "mcpToolCall");
    expect(item).toMatchObject({ status: "completed", result: { content: [{ text: "progress done (2 steps)" }] } });
    const progress = client!.notifications("item/mcpToolCall/progress").map((f) => f.params);
    expect(progress.map(({ seq: _seq, ...p }) => p)).toEqual([
      { threadId, turnId: done.id, itemId: item.id, message: "step 1 of 2" },
      { threadId, turnId: done.id, itemId: item.id, message: "step 2 of 2" },
    ]);
  });

  it("the status list shows resource templates and the name the model calls each tool by", async () => {
    writeConfig();
    await start();
    const { data } = await client!.request("mcpServerStatus/list", {});
    expect(data[0].resourceTemplates).toEqual([{ uriTemplate: "test://notes/{name}", name: "note", mimeType: "text/plain" }]);
    expect(data[0].tools.echo._meta).toEqual({ "agent-app-server/modelName": "mcp__test__echo" });
  });
});

describe("MCP client methods", () => {
  it("mcpServerStatus/list: a server whose resources/list fails says so in its entry (resourcesError), never reads as 'no resources'", async () => {
    writeConfig({ test: { command: process.execPath, args: [FIXTURE], cwd: dir, env: { MCP_TEST_RESOURCES: "fail" } }, fine: { command: process.execPath, args: [FIXTURE], cwd: dir } });
    await start();
    const full = (await client!.request("mcpServerStatus/list", {})).data;
    const byName = new Map(full.map((s: any) => [s.name, s]));
    expect(byName.get("test")).toMatchObject({ runtimeStatus: "connected", resources: [], resourceTemplates: [], resourcesError: expect.stringContaining("MCP server test could not list its resources") });
    // The other server is listed as usual, its resources with it.
    expect(byName.get("fine")).toMatchObject({ runtimeStatus: "connected", resourcesError: null });
    expect((byName.get("fine") as any).resourceTemplates.length).toBeGreaterThan(0);
    // Without resources asked for, the same server lists as usual.
    const { data } = await client!.request("mcpServerStatus/list", { detail: "toolsAndAuthOnly" });
    expect(data.find((s: any) => s.name === "test")).toMatchObject({ runtimeStatus: "connected", resources: [] });
  });

  it("mcpServerStatus/list, mcpServer/tool/call, mcpServer/resource/read, config/mcpServer/reload", async () => {
    writeConfig({ test: { command: process.execPath, args: [FIXTURE], cwd: dir }, broken: { command: "no-such-mcp-server-xyz", cwd: dir } });
    await start();
    // The broken server is retried with backoff: a list taken during one of its (brief) attempts
    // reads "starting". Between attempts it reads failed, with the reason.
    let status: any;
    let byName: Record<string, any> = {};
    for (let poll = 0; poll < 100 && byName.broken?.runtimeStatus !== "failed"; poll++) {
      if (poll > 0) await new Promise((r) => setTimeout(r, 50));
      status = await client!.request("mcpServerStatus/list", {});
      byName = Object.fromEntries(status.data.map((s: any) => [s.name, s]));
    }
    expect(status.nextCursor).toBeNull();
    expect(byName.test).toMatchObject({ runtimeStatus: "connected", toolsError: null, serverInfo: { name: "mcp-test-server", version: "1.0.0" } });
    expect(Object.keys(byName.test.tools)).toContain("echo");
    expect(byName.test.resources).toEqual([expect.objectContaining({ uri: "test://greeting" })]);
    expect(byName.broken).toMatchObject({ runtimeStatus: "failed", toolsError: expect.stringMatching(/command not found/) });

    const threadId = (await client!.request("thread/start", {})).thread.id;
    const called = await client!.request("mcpServer/tool/call", { threadId, server: "test", tool: "echo", arguments: { text: "direct" } });
    expect(called).toMatchObject({ content: [{ type: "text", text: "echo: direct" }], structuredContent: { echoed: "direct" } });
    const bad = await client!.request("mcpServer/tool/call", { threadId, server: "nope", tool: "echo" }).catch((e) => e);
    expect(bad).toBeInstanceOf(RpcError);
    expect(bad.code).toBe(-32602);
    const read = await client!.request("mcpServer/resource/read", { server: "test", uri: "test://greeting" });
    expect(read).toEqual({ contents: [{ uri: "test://greeting", mimeType: "text/plain", text: "resource test://greeting" }], originCallId: null });

    writeConfig({ test: { command: process.execPath, args: [FIXTURE], cwd: dir } });
    expect(await client!.request("config/mcpServer/reload")).toEqual({});
    expect((await client!.request("mcpServerStatus/list", {})).data.map((s: any) => s.name)).toEqual(["test"]);
    writeFileSync(configFile(), "{ nope");
    const reloadError = await client!.request("config/mcpServer/reload").catch((e) => e);
    expect(reloadError.code).toBe(-32600);
    expect(reloadError.message).toMatch(/mcp\.json is not valid JSON/);
  });

  it("an invalid configuration stops the start with the file and the field named", async () => {
    writeFileSync(configFile(), JSON.stringify({ mcpServers: { x: { command: "a", argz: [] } } }));
    const err = await startServerOn(db!, { modelProvider: "openai", model: "mock-model", providers: mockProviders(mock!), mcpConfig: configFile() }).catch((e) => e);
    expect(err.message).toMatch(/invalid MCP configuration in .*mcp\.json: mcpServers\.x/);
  });
});
