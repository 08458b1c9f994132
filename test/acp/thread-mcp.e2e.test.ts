// @needs-os-sandbox: runs MCP stdio servers in the OS sandbox (vitest.config.ts leaves this file out where bubblewrap cannot run).
/**
 * A thread's own MCP servers over the Codex protocol (src/runtime/thread-mcp.ts, what an ACP
 * editor's `mcpServers` become): `config.mcp_servers` on thread/start — nested or dotted, as
 * Codex's config overrides are written — gives the thread's turns those servers' tools; a malformed
 * one is refused with -32602 and nothing is created; thread/resume with another config replaces
 * them; a thread's server shadows a configured server of the same name; the registry stops the
 * servers of a thread that is no longer loaded.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import pino from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { TestClient } from "../support/client.js";
import { BACKENDS, freshDatabase, type TestDatabase } from "../support/db.js";
import { startMockModelServer, type MockModelServer } from "../support/mock-model-server.js";
import { REPO_ROOT } from "../support/process.js";
import { quietHome, startServerOn, type TestServer } from "../support/server.js";
import { mockProviders, text, turnCompleted } from "../support/turns.js";
import { toolResultTexts } from "../support/approvals.js";
import { CommandRunner } from "../../src/sandbox/runner.js";
import { normalizeThreadConfig, ThreadMcpConfigError, ThreadMcpRegistry } from "../../src/runtime/thread-mcp.js";
import type { LoadedThread } from "../../src/runtime/threads.js";

const FIXTURE = path.join(REPO_ROOT, "test", "fixtures", "mcp-test-server.mjs");
const backend = BACKENDS[BACKENDS.length - 1]!;
const fixture = (env: Record<string, string> = {}) => ({ command: process.execPath, args: [FIXTURE], env });

let dir: string;
let db: TestDatabase | undefined;
let mock: MockModelServer | undefined;
let ts: TestServer | undefined;
let client: TestClient | undefined;

beforeEach(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), "aas-thread-mcp-"));
  db = await freshDatabase(backend);
  mock = await startMockModelServer();
});
afterEach(async () => {
  await client?.close();
  await ts?.close();
  await mock?.close();
  await db?.cleanup();
  rmSync(dir, { recursive: true, force: true });
  client = ts = mock = db = undefined;
});

async function start(mcpConfig?: string) {
  ts = await startServerOn(db!, { modelProvider: "openai", model: "mock-model", providers: mockProviders(mock!), cwd: dir, ...(mcpConfig ? { mcpConfig } : {}) });
  client = await TestClient.initialized(ts.url);
}

async function turn(threadId: string, ...steps: Parameters<MockModelServer["enqueue"]>) {
  mock!.enqueue(...steps);
  const { turn } = await client!.request("turn/start", { threadId, input: text("go") });
  return (await turnCompleted(client!, turn.id, 30_000)).params.turn;
}

const toolNames = (n: number) => (mock!.requests[n]!.body.tools as Array<{ name: string }>).map((t) => t.name);

describe("a thread's own MCP servers (config.mcp_servers)", () => {
  it("thread/start's servers are the thread's tools from its first turn; dotted keys work as nested ones", async () => {
    await start();
    const nested = (await client!.request("thread/start", { approvalPolicy: "never", config: { mcp_servers: { mine: fixture() } } })).thread.id;
    const dotted = (await client!.request("thread/start", { approvalPolicy: "never", config: { "mcp_servers.dotted": fixture() } })).thread.id;
    const plain = (await client!.request("thread/start", { approvalPolicy: "never" })).thread.id;

    const done = await turn(nested, { toolCalls: [{ name: "mcp__mine__echo", arguments: { text: "mine" } }] }, { text: "ok" });
    expect(done.status).toBe("completed");
    expect(toolNames(0)).toEqual(expect.arrayContaining(["mcp__mine__echo", "mcp__mine__write_note"]));
    expect(toolResultTexts(mock!, "openai", 1).at(-1)).toBe("echo: mine");
    await turn(dotted, { text: "ok" });
    expect(toolNames(2)).toContain("mcp__dotted__echo");
    expect(toolNames(2).some((n) => n.startsWith("mcp__mine__"))).toBe(false);
    await turn(plain, { text: "ok" });
    expect(toolNames(3).some((n) => n.startsWith("mcp__"))).toBe(false);
  });

  it("a malformed config.mcp_servers is -32602 and creates nothing", async () => {
    await start();
    const before = (await client!.request("thread/list", {})).data.length;
    for (const [config, says] of [
      [{ mcp_servers: { "has space": fixture() } }, "server names use letters"],
      [{ mcp_servers: { x: { args: [] } } }, "config.mcp_servers.x"],
      [{ mcp_servers: { x: { url: "ftp://example.com" } } }, "config.mcp_servers.x"],
      [{ mcp_servers: [fixture()] }, "must be an object"],
      [{ "mcp_servers.x": { command: "" } }, "config.mcp_servers.x"],
      // A stdio server runs in the thread's directory: a client cannot point its sandbox elsewhere.
      [{ mcp_servers: { x: { ...fixture(), cwd: "/" } } }, "config.mcp_servers.x"],
    ] as const) {
      const res = await client!.requestRaw("thread/start", { config });
      expect(res.error, JSON.stringify(config)).toMatchObject({ code: -32602, message: expect.stringContaining(says) });
    }
    expect((await client!.request("thread/list", {})).data.length).toBe(before);
  });

  it("thread/resume with a config replaces the thread's servers; the same servers change nothing", async () => {
    await start();
    const threadId = (await client!.request("thread/start", { approvalPolicy: "never", config: { mcp_servers: { first: fixture() } } })).thread.id;
    await turn(threadId, { text: "one" });
    expect(toolNames(0)).toContain("mcp__first__echo");
    await client!.request("thread/resume", { threadId, excludeTurns: true, config: { mcp_servers: { first: fixture() } } });
    await client!.request("thread/resume", { threadId, excludeTurns: true, config: { mcp_servers: { second: fixture() } } });
    await turn(threadId, { text: "two" });
    expect(toolNames(1)).toContain("mcp__second__echo");
    expect(toolNames(1).some((n) => n.startsWith("mcp__first__"))).toBe(false);
    const bad = await client!.requestRaw("thread/resume", { threadId, config: { mcp_servers: { "no/slash": fixture() } } });
    expect(bad.error).toMatchObject({ code: -32602 });
    await client!.request("thread/resume", { threadId, excludeTurns: true, config: { mcp_servers: {} } });
    await turn(threadId, { text: "three" });
    expect(toolNames(2).some((n) => n.startsWith("mcp__"))).toBe(false);
  });

  it("a thread's server shadows a configured server of the same name", async () => {
    const configFile = path.join(dir, "mcp.json");
    writeFileSync(configFile, JSON.stringify({ mcpServers: { test: { ...fixture({ WHO: "configured" }), cwd: dir } } }));
    await start(configFile);
    await ts!.server.app.mcp.ready();
    const threadId = (await client!.request("thread/start", { approvalPolicy: "never", config: { mcp_servers: { test: fixture({ WHO: "thread" }) } } })).thread.id;
    await turn(threadId, { toolCalls: [{ name: "mcp__test__env", arguments: { name: "WHO" } }] }, { text: "ok" });
    expect(toolResultTexts(mock!, "openai", 1).at(-1)).toBe("WHO=thread");
    expect(toolNames(0).filter((n) => n === "mcp__test__env")).toHaveLength(1);
    const other = (await client!.request("thread/start", { approvalPolicy: "never" })).thread.id;
    await turn(other, { toolCalls: [{ name: "mcp__test__env", arguments: { name: "WHO" } }] }, { text: "ok" });
    expect(toolResultTexts(mock!, "openai", 3).at(-1)).toBe("WHO=configured");
  });
});

describe("ThreadMcpRegistry", () => {
  it("stops the servers of a thread that is no longer loaded, and restarts them when its config changes", async () => {
    const loaded = new Set(["t1"]);
    const registry = new ThreadMcpRegistry({ runner: new CommandRunner({ set: { HOME: quietHome() } }), log: pino({ level: "silent" }), isLoaded: (id) => loaded.has(id), stateDir: path.join(dir, "thread-mcp-state") });
    const thread = (config: Record<string, unknown>) => ({ id: "t1", record: { config, cwd: dir } }) as unknown as LoadedThread;
    try {
      const source = registry.source();
      const first = thread({ mcp_servers: { a: fixture() } });
      await source.ready!(new AbortController().signal, first);
      const manager = registry.managerOf(first)!;
      expect(manager.list().map((s) => [s.name, s.state])).toEqual([["a", "ready"]]);
      const [serverA] = manager.list();
      expect(registry.managerOf(thread({ mcp_servers: { a: fixture() } }))).toBe(manager);
      const changed = registry.managerOf(thread({ mcp_servers: { b: fixture() } }))!;
      expect(changed).not.toBe(manager);
      expect(serverA!.state).toBe("stopped");
      await source.ready!(new AbortController().signal, thread({ mcp_servers: { b: fixture() } }));
      const [server] = changed.list();
      expect(server!.state).toBe("ready");
      registry.sweep();
      expect(server!.state).toBe("ready"); // still loaded
      loaded.delete("t1");
      registry.sweep();
      expect(server!.state).toBe("stopped");
    } finally {
      await registry.close();
    }
  });

  it("normalizeThreadConfig keeps other keys and names the bad field", () => {
    expect(normalizeThreadConfig({ model: "x", "mcp_servers.a": { url: "http://h/mcp" } })).toEqual({ model: "x", mcp_servers: { a: { url: "http://h/mcp", http_headers: {} } } });
    expect(normalizeThreadConfig({ model: "x" })).toEqual({ model: "x" });
    expect(() => normalizeThreadConfig({ mcp_servers: { a: { command: "x", bogus: 1 } } })).toThrow(ThreadMcpConfigError);
  });
});
