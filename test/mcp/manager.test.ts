// @needs-os-sandbox: runs MCP stdio servers in the OS sandbox (vitest.config.ts leaves this file out where bubblewrap cannot run).
/**
 * MCP servers through the McpManager with real SDK servers (test/fixtures/mcp-test-server.mjs):
 * configuration errors, paging, calls, resources and templates, progress, log messages, the
 * sandbox, private home and environment allow list of stdio servers, the supervisor (a crash or a
 * kill healed without any call, tools kept while down, a call in flight failing with the reason,
 * the backoff and its reset), the tools cache across managers, a server that never starts,
 * Streamable HTTP, reload.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import pino from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { loadMcpConfig, locateMcpConfig, McpConfigError } from "../../src/mcp/config.js";
import { McpManager } from "../../src/mcp/manager.js";
import { McpResourcesError, type SupervisorTiming } from "../../src/mcp/server-connection.js";
import { CommandRunner } from "../../src/sandbox/runner.js";
import { serverProcess, waitFor } from "../support/mcp.js";
import { REPO_ROOT } from "../support/process.js";

const FIXTURE = path.join(REPO_ROOT, "test", "fixtures", "mcp-test-server.mjs");
const log = pino({ level: "silent" });

let dir: string;
let managers: McpManager[] = [];
let children: ChildProcess[] = [];
beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), "aas-mcp-"));
});
afterEach(async () => {
  await Promise.all(managers.map((m) => m.close()));
  for (const c of children) c.kill("SIGKILL");
  managers = [];
  children = [];
  rmSync(dir, { recursive: true, force: true });
});

const writeConfig = (servers: Record<string, unknown>) => {
  const file = path.join(dir, "mcp.json");
  writeFileSync(file, JSON.stringify({ mcpServers: servers }));
  return file;
};
const stdioServer = (extra: Record<string, unknown> = {}) => ({ command: process.execPath, args: [FIXTURE], cwd: dir, ...extra });

const defaultRunner = () => new CommandRunner({ env: { ...process.env, OPENAI_API_KEY: "sk-mcp-secret-0201" }, hiddenPaths: [path.join(dir, "state")] });

async function manager(file: string, opts: { runner?: CommandRunner; timing?: SupervisorTiming; logger?: pino.Logger } = {}) {
  const m = new McpManager({ file, defaultCwd: dir, runner: opts.runner ?? defaultRunner(), log: opts.logger ?? log, stateDir: path.join(dir, "state"), timing: opts.timing });
  managers.push(m);
  await m.start();
  await m.ready();
  return m;
}

const textOf = (r: { content: unknown[] }) => (r.content as Array<{ type: string; text?: string }>).map((c) => c.text ?? "").join("");

describe("MCP configuration", () => {
  it.each([
    ["not JSON", "{", /mcp\.json is not valid JSON/],
    ["an unknown field", JSON.stringify({ mcpServers: { a: { command: "x", comand: "y" } } }), /mcp\.json: mcpServers\.a/],
    ["a bad URL", JSON.stringify({ mcpServers: { a: { url: "ftp://x" } } }), /mcp\.json: mcpServers\.a/],
    ["a bad name", JSON.stringify({ mcpServers: { "a b": { command: "x" } } }), /mcpServers\.a b: server names use letters/],
    ["args not strings", JSON.stringify({ mcpServers: { a: { command: "x", args: [1] } } }), /mcpServers\.a/],
  ])("%s → a clear error naming the file and the field", async (_name, text, message) => {
    const file = path.join(dir, "mcp.json");
    writeFileSync(file, text);
    const err = await loadMcpConfig(file, dir).catch((e) => e);
    expect(err).toBeInstanceOf(McpConfigError);
    expect(err.message).toMatch(message);
    expect(err.message).toContain(file);
  });

  it("<home>/mcp.json: absent is no configuration; there but unreadable is found, and reading it says why", async () => {
    expect(await locateMcpConfig(undefined, dir)).toBeNull();
    const file = path.join(dir, "mcp.json");
    symlinkSync(file, file); // a link to itself: stat fails with ELOOP, not ENOENT
    expect(await locateMcpConfig(undefined, dir)).toBe(file);
    await expect(loadMcpConfig(file, dir)).rejects.toThrow(/cannot read the MCP configuration .*mcp\.json: ELOOP/);
  });

  it("a missing file is an error; no file at all means no servers", async () => {
    await expect(loadMcpConfig(path.join(dir, "nope.json"), dir)).rejects.toThrow(/cannot read the MCP configuration .*nope\.json: ENOENT/);
    expect(await loadMcpConfig(null, dir)).toEqual({ file: null, servers: [] });
  });
});

describe("MCP servers over stdio, in the sandbox", () => {
  it("lists every page of tools, sorted by model name; calls a tool; reads a resource", async () => {
    const m = await manager(writeConfig({ test: stdioServer() }));
    const conn = m.server("test")!;
    expect(conn.state).toBe("ready");
    const names = m.tools().map((t) => t.modelName);
    expect(names).toContain("mcp__test__echo");
    expect(names).toContain("mcp__test__filler_03"); // past the first pages
    expect(names).toHaveLength(14);
    expect([...names].sort()).toEqual(names);
    const r = await conn.callTool("echo", { text: "hi" }, new AbortController().signal);
    expect(textOf(r)).toBe("echo: hi");
    expect(r.structuredContent).toEqual({ echoed: "hi" });
    const res = await conn.readResource("test://greeting");
    expect(res.contents[0]).toMatchObject({ text: "resource test://greeting" });
    expect(await conn.resourcesNow()).toEqual({
      resources: [{ uri: "test://greeting", name: "greeting", mimeType: "text/plain" }],
      resourceTemplates: [{ uriTemplate: "test://notes/{name}", name: "note", mimeType: "text/plain" }],
    });
  });

  it("a server whose resources/list fails is an error naming it, never 'no resources'; one without templates has none", async () => {
    const m = await manager(writeConfig({ bad: stdioServer({ env: { MCP_TEST_RESOURCES: "fail" } }), old: stdioServer({ env: { MCP_TEST_RESOURCES: "no-templates" } }) }));
    const bad = m.server("bad")!;
    expect(bad.state).toBe("ready");
    const err = await bad.resourcesNow().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(McpResourcesError);
    expect((err as McpResourcesError).server).toBe("bad");
    expect((err as Error).message).toMatch(/^MCP server bad could not list its resources: .*the resource index is corrupt/);
    expect(bad.state).toBe("ready"); // a failed listing is reported, it does not take the server down
    expect(await m.server("old")!.resourcesNow()).toEqual({ resources: [{ uri: "test://greeting", name: "greeting", mimeType: "text/plain" }], resourceTemplates: [] });
  });

  it("an HTTP server that neither transport reaches is down with both reasons", async () => {
    const m = await manager(writeConfig({ gone: { url: "http://127.0.0.1:9/mcp" } }), { timing: { backoffMs: [60_000], healthyAfterMs: 60_000 } });
    const gone = m.server("gone")!;
    expect(gone.state).toBe("failed");
    expect(gone.lastError).toMatch(/^Streamable HTTP: .+; HTTP\+SSE: .+/);
  });

  it("sends a progress token and hands each progress notification on; log messages reach the server's log", async () => {
    const lines: string[] = [];
    const logger = pino({ level: "info" }, { write: (line: string) => void lines.push(line) });
    const m = await manager(writeConfig({ test: stdioServer() }), { logger });
    const progress: string[] = [];
    const r = await m.server("test")!.callTool("progress", { steps: 3 }, new AbortController().signal, (message) => progress.push(message));
    expect(textOf(r)).toBe("progress done (3 steps)");
    expect(progress).toEqual(["step 1 of 3", "step 2 of 3", "step 3 of 3"]);
    await m.server("test")!.callTool("log", { text: "disk almost full" }, new AbortController().signal);
    const logged = lines.map((l) => JSON.parse(l)).find((l) => l.msg === "MCP server log message");
    expect(logged).toMatchObject({ level: 40, mcpLevel: "warning", server: "test", logger: "fixture", data: "disk almost full" });
  });

  it("gets its configured env but none of the server's secrets; writes only where its sandbox allows", async () => {
    const outside = mkdtempSync(path.join("/var/tmp", "aas-mcp-outside-"));
    try {
      const m = await manager(writeConfig({ test: stdioServer({ env: { MCP_GIVEN: "given-value" } }) }));
      const conn = m.server("test")!;
      const signal = new AbortController().signal;
      expect(textOf(await conn.callTool("env", { name: "MCP_GIVEN" }, signal))).toBe("MCP_GIVEN=given-value");
      expect(textOf(await conn.callTool("env", { name: "OPENAI_API_KEY" }, signal))).toBe("OPENAI_API_KEY=(unset)");
      await conn.callTool("write_note", { name: "note.txt", text: "inside" }, signal);
      expect(readFileSync(path.join(dir, "note.txt"), "utf8")).toBe("inside");
      await expect(conn.callTool("write_note", { name: path.join(outside, "x.txt"), text: "outside" }, signal)).rejects.toThrow(/read-only file system/i);
      expect(existsSync(path.join(outside, "x.txt"))).toBe(false);
    } finally {
      rmSync(outside, { recursive: true, force: true });
    }
  });

  it("gives a sandboxed server a private, writable home (npm's cache, ~/.cache) that nothing else sees", async () => {
    const m = await manager(writeConfig({ test: stdioServer(), other: stdioServer() }));
    const signal = new AbortController().signal;
    const home = textOf(await m.server("test")!.callTool("env", { name: "HOME" }, signal)).replace("HOME=", "");
    expect(home).toBe(realpathSync(path.join(dir, "state", "homes", "test")));
    expect(textOf(await m.server("test")!.callTool("env", { name: "XDG_CACHE_HOME" }, signal))).toBe(`XDG_CACHE_HOME=${home}/.cache`);
    await m.server("test")!.callTool("write_note", { name: path.join(home, "cache.txt"), text: "kept" }, signal);
    expect(readFileSync(path.join(home, "cache.txt"), "utf8")).toBe("kept");
    // Another server's home is not its own: masked (the state directory is hidden), not writable.
    await expect(m.server("other")!.callTool("write_note", { name: path.join(home, "x.txt"), text: "no" }, signal)).rejects.toThrow(/ENOENT|read-only/i);
    expect(existsSync(path.join(home, "x.txt"))).toBe(false);
  });

  it("the supervisor restarts a crashed server without any call; list_changed updates the tools", async () => {
    const m = await manager(writeConfig({ test: stdioServer() }));
    const conn = m.server("test")!;
    const signal = new AbortController().signal;
    let changes = 0;
    m.onToolsChanged(() => changes++);
    await conn.callTool("add_tool", {}, signal);
    await waitFor(() => m.tools().some((t) => t.modelName === "mcp__test__late_tool"), "late_tool listed");
    expect(changes).toBeGreaterThan(0);
    const states: string[] = [];
    m.onStateChanged((s) => states.push(s.state));
    const before = conn.pid;
    await conn.callTool("crash", {}, signal);
    await waitFor(() => conn.state === "ready" && conn.pid !== before, "restarted by the supervisor");
    expect(states).toEqual(["failed", "starting", "ready"]);
    expect(conn.restarts).toBe(1);
    expect(textOf(await conn.callTool("echo", { text: "again" }, signal))).toBe("echo: again");
  });

  it("a killed server keeps its tools offered while down, calls fail with why, and it is back within its backoff", async () => {
    const m = await manager(writeConfig({ test: stdioServer() }), { timing: { backoffMs: [5_000], healthyAfterMs: 60_000 } });
    const conn = m.server("test")!;
    const signal = new AbortController().signal;
    const tools = JSON.stringify(m.tools());
    const inFlight = conn.callTool("wait", { ms: 600_000 }, signal).then(
      () => "answered",
      (err: Error) => err.message,
    );
    await waitFor(() => serverProcess(conn.pid!) !== null, "the server process is up");
    process.kill(serverProcess(conn.pid!)!, "SIGKILL");
    // The call in flight fails with the reason, not a bare "Connection closed".
    expect(await inFlight).toMatch(/^MCP server test went down during the call: MCP server test is restarting: the server exited or closed the connection/);
    expect(conn.state).toBe("failed");
    expect(JSON.stringify(m.tools())).toBe(tools); // the prompt prefix holds
    const failedAt = Date.now();
    await expect(conn.callTool("echo", { text: "x" }, signal)).rejects.toThrow(/^MCP server test is restarting: the server exited or closed the connection \(next attempt in [0-5] s\)$/);
    expect(conn.retryAt! - failedAt).toBeLessThanOrEqual(5_000);
    await waitFor(() => conn.state === "ready", "back after the backoff");
    expect(textOf(await conn.callTool("echo", { text: "healed" }, signal))).toBe("echo: healed");
    expect(JSON.stringify(m.tools())).toBe(tools);
  });

  it("the backoff doubles while a server keeps failing, and starts over after a healthy period", async () => {
    const crashAndWatch = async (timing: SupervisorTiming, healthyFor: number) => {
      const m = await manager(writeConfig({ test: stdioServer() }), { timing });
      const conn = m.server("test")!;
      // The delay the supervisor chose, read the moment it fails (not after a poll).
      const delays: number[] = [];
      m.onStateChanged((server) => void (server.state === "failed" && delays.push(server.retryAt! - Date.now())));
      for (let i = 0; i < 2; i++) {
        const readySince = Date.now();
        await waitFor(() => Date.now() - readySince >= healthyFor, "healthy period over");
        await conn.callTool("crash", {}, new AbortController().signal);
        await waitFor(() => delays.length === i + 1 && conn.state === "ready", "down, then restarted");
      }
      await m.close();
      return delays;
    };
    const unhealthy = await crashAndWatch({ backoffMs: [100, 400], healthyAfterMs: 3_600_000 }, 0);
    expect(unhealthy[0]).toBeGreaterThan(50);
    expect(unhealthy[0]).toBeLessThanOrEqual(100);
    expect(unhealthy[1]).toBeGreaterThan(300); // the second step of the backoff
    const healthy = await crashAndWatch({ backoffMs: [100, 60_000], healthyAfterMs: 300 }, 400);
    expect(healthy[1]).toBeLessThanOrEqual(100); // started over: not 60 s
  });

  it("remembers each server's tools across managers: a server that cannot start yet still offers them", async () => {
    const file = writeConfig({ test: stdioServer() });
    const first = await manager(file);
    const offered = JSON.stringify(first.tools());
    await first.close();
    // The same configuration, and the server now fails to start: its last known tools stay offered.
    const second = new McpManager({ file, defaultCwd: dir, runner: new CommandRunner({ env: { ...process.env, PATH: "/nonexistent" } }), log, stateDir: path.join(dir, "state") });
    managers.push(second);
    await second.start();
    expect(JSON.stringify(second.tools())).toBe(offered); // before it even tried
    await second.ready();
    expect(second.server("test")!.state).toBe("failed");
    expect(JSON.stringify(second.tools())).toBe(offered);
    // Another configuration is another server: nothing cached for it.
    writeConfig({ test: stdioServer({ args: [FIXTURE, "--changed"] }) });
    const third = new McpManager({ file, defaultCwd: dir, runner: new CommandRunner({ env: { ...process.env, PATH: "/nonexistent" } }), log, stateDir: path.join(dir, "state") });
    managers.push(third);
    await third.start();
    expect(third.tools()).toEqual([]);
  });

  it("a broken tools cache is ignored (logged), never fatal", async () => {
    mkdirSync(path.join(dir, "state"), { recursive: true });
    writeFileSync(path.join(dir, "state", "tools.json"), "{ not json");
    const m = await manager(writeConfig({ test: stdioServer() }));
    expect(m.tools()).toHaveLength(14);
    await m.close();
    expect(JSON.parse(readFileSync(path.join(dir, "state", "tools.json"), "utf8")).servers.test.tools).toHaveLength(14);
  });

  it("a server that cannot start or never answers fails with a clear error; the others work", async () => {
    const m = await manager(
      writeConfig({
        missing: { command: "no-such-mcp-server-xyz", cwd: dir },
        silent: { command: "sleep", args: ["1000"], cwd: dir, startupTimeoutSec: 1 },
        test: stdioServer(),
      }),
    );
    expect(m.server("missing")).toMatchObject({ state: "failed", lastError: expect.stringMatching(/no-such-mcp-server-xyz: command not found/) });
    expect(m.server("silent")).toMatchObject({ state: "failed", lastError: expect.stringMatching(/did not start within 1 s/) });
    expect(m.server("test")!.state).toBe("ready");
    expect(m.tools().every((t) => t.server === "test")).toBe(true);
    await expect(m.server("missing")!.callTool("x", {}, new AbortController().signal)).rejects.toThrow(/^MCP server missing failed to start: .*command not found.*next attempt in/);
  });

  it("reload starts new servers, stops removed ones and restarts changed ones", async () => {
    const file = writeConfig({ a: stdioServer(), b: stdioServer() });
    const m = await manager(file);
    writeConfig({ a: stdioServer({ env: { CHANGED: "1" } }), c: stdioServer() });
    expect(await m.reload()).toEqual({ started: ["c"], stopped: ["b"], restarted: ["a"] });
    await m.ready();
    expect(m.list().map((s) => [s.name, s.state])).toEqual([
      ["a", "ready"],
      ["c", "ready"],
    ]);
    writeFileSync(file, "{ broken");
    await expect(m.reload()).rejects.toThrow(/not valid JSON/);
    expect(m.list().map((s) => s.name)).toEqual(["a", "c"]); // a broken file changes nothing
  });
});

describe("MCP servers over Streamable HTTP", () => {
  it("connects, lists and calls", async () => {
    const portFile = path.join(dir, "port");
    const child = spawn(process.execPath, [FIXTURE, "--http", portFile], { stdio: "ignore" });
    children.push(child);
    await waitFor(() => existsSync(portFile) && readFileSync(portFile, "utf8").length > 0, "the HTTP server's port");
    const url = `http://127.0.0.1:${readFileSync(portFile, "utf8")}/mcp`;
    const m = await manager(writeConfig({ remote: { url, headers: { "X-Test": "1" } } }));
    const conn = m.server("remote")!;
    expect(conn.state).toBe("ready");
    expect(m.tools().map((t) => t.modelName)).toContain("mcp__remote__echo");
    expect(textOf(await conn.callTool("echo", { text: "over http" }, new AbortController().signal))).toBe("echo: over http");
  });
});
