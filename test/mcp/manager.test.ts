// @needs-os-sandbox: runs MCP stdio servers in the OS sandbox (vitest.config.ts leaves this file out where bubblewrap cannot run).
/**
 * MCP servers through the McpManager with real SDK servers (test/fixtures/mcp-test-server.mjs):
 * configuration errors, paging, calls, resources, the sandbox and environment allow list of stdio
 * servers, crash and reconnect, list_changed, a server that never starts, Streamable HTTP, reload.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import pino from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { loadMcpConfig, McpConfigError } from "../../src/mcp/config.js";
import { McpManager } from "../../src/mcp/manager.js";
import { CommandRunner } from "../../src/sandbox/runner.js";
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

async function manager(file: string, runner = new CommandRunner({ env: { ...process.env, OPENAI_API_KEY: "sk-mcp-secret-0201" } })) {
  const m = new McpManager({ file, defaultCwd: dir, runner, log });
  managers.push(m);
  await m.start();
  await m.settled();
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

  it("a missing file is an error; no file at all means no servers", async () => {
    await expect(loadMcpConfig(path.join(dir, "nope.json"), dir)).rejects.toThrow(/cannot read the MCP configuration .*nope\.json: ENOENT/);
    expect(await loadMcpConfig(null, dir)).toEqual({ file: null, servers: [] });
  });
});

describe("MCP servers over stdio, in the sandbox", () => {
  it("lists every page of tools, sorted by model name; calls a tool; reads a resource", async () => {
    const m = await manager(writeConfig({ test: stdioServer() }));
    const conn = m.server("test")!;
    expect(conn.state).toBe("connected");
    const names = m.tools().map((t) => t.modelName);
    expect(names).toContain("mcp__test__echo");
    expect(names).toContain("mcp__test__filler_03"); // past the first pages
    expect(names).toHaveLength(11);
    expect([...names].sort()).toEqual(names);
    const r = await conn.callTool("echo", { text: "hi" }, new AbortController().signal);
    expect(textOf(r)).toBe("echo: hi");
    expect(r.structuredContent).toEqual({ echoed: "hi" });
    const res = await conn.readResource("test://greeting");
    expect(res.contents[0]).toMatchObject({ text: "resource test://greeting" });
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

  it("a crashed server is restarted on its next use (after its backoff); list_changed updates the tools", async () => {
    const m = await manager(writeConfig({ test: stdioServer() }));
    const conn = m.server("test")!;
    const signal = new AbortController().signal;
    let changes = 0;
    m.onToolsChanged(() => changes++);
    await conn.callTool("add_tool", {}, signal);
    await waitFor(() => m.tools().some((t) => t.modelName === "mcp__test__late_tool"));
    expect(changes).toBeGreaterThan(0);

    await conn.callTool("crash", {}, signal);
    await waitFor(() => conn.state === "failed");
    expect(conn.lastError).toMatch(/closed the connection/);
    expect(m.tools()).toEqual([]); // a failed server offers nothing
    await waitFor(async () => {
      try {
        return textOf(await conn.callTool("echo", { text: "again" }, signal)) === "echo: again";
      } catch (err) {
        expect((err as Error).message).toMatch(/not running .*next attempt/);
        return false;
      }
    });
    expect(conn.state).toBe("connected");
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
    expect(m.server("test")!.state).toBe("connected");
    expect(m.tools().every((t) => t.server === "test")).toBe(true);
    await expect(m.server("missing")!.callTool("x", {}, new AbortController().signal)).rejects.toThrow(/not running/);
  });

  it("reload starts new servers, stops removed ones and restarts changed ones", async () => {
    const file = writeConfig({ a: stdioServer(), b: stdioServer() });
    const m = await manager(file);
    writeConfig({ a: stdioServer({ env: { CHANGED: "1" } }), c: stdioServer() });
    expect(await m.reload()).toEqual({ started: ["c"], stopped: ["b"], restarted: ["a"] });
    await m.settled();
    expect(m.list().map((s) => [s.name, s.state])).toEqual([
      ["a", "connected"],
      ["c", "connected"],
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
    await waitFor(() => existsSync(portFile) && readFileSync(portFile, "utf8").length > 0);
    const url = `http://127.0.0.1:${readFileSync(portFile, "utf8")}/mcp`;
    const m = await manager(writeConfig({ remote: { url, headers: { "X-Test": "1" } } }));
    const conn = m.server("remote")!;
    expect(conn.state).toBe("connected");
    expect(m.tools().map((t) => t.modelName)).toContain("mcp__remote__echo");
    expect(textOf(await conn.callTool("echo", { text: "over http" }, new AbortController().signal))).toBe("echo: over http");
  });
});

/** Polls (bounded by count, not by a time budget the verdict depends on). */
async function waitFor(cond: () => boolean | Promise<boolean>, tries = 400): Promise<void> {
  for (let i = 0; i < tries; i++) {
    if (await cond()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error("condition not reached");
}
