// @needs-os-sandbox: runs real MCP servers from npm in the OS sandbox (vitest.config.ts leaves this file out where bubblewrap cannot run).
/**
 * Real MCP servers from npm, as users configure them, in the default sandbox (workspace-write on
 * the server's cwd) with the user's HOME outside that cwd and outside /tmp (the normal case, where
 * `npx` used to fail with EROFS writing ~/.npm):
 *   - the README's example exactly as written (`npx -y @modelcontextprotocol/server-filesystem .`),
 *     fetched from the npm registry into the server's private home (skipped, with the reason
 *     printed, where the registry cannot be reached);
 *   - the pinned devDependencies (server-filesystem, server-everything, server-memory): start, list,
 *     a call for each kind of result (text, image, embedded resource, resource link, structured
 *     content), progress, resource templates, status reads that restart nothing, kill and self-heal.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import pino from "pino";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { McpManager } from "../../src/mcp/manager.js";
import { modelOutcome } from "../../src/mcp/tool.js";
import { CommandRunner } from "../../src/sandbox/runner.js";
import { serverProcess, waitFor } from "../support/mcp.js";
import { REPO_ROOT } from "../support/process.js";

const log = pino({ level: "silent" });
const bin = (name: string) => path.join(REPO_ROOT, "node_modules", ".bin", name);
const signal = () => new AbortController().signal;
const textOf = (r: { content: unknown[] }) => (r.content as Array<{ type: string; text?: string }>).map((c) => c.text ?? "").join("\n");

/** The documented MCP example, copied from docs/mcp.md ("Configuration", where the README points): its stdio server. */
function documentedExample(): { command: string; args: string[]; env: Record<string, string>; cwd: string } {
  const doc = readFileSync(path.join(REPO_ROOT, "docs", "mcp.md"), "utf8");
  const block = /## Configuration[\s\S]*?```json\n([\s\S]*?)```/.exec(doc)?.[1];
  if (!block) throw new Error("docs/mcp.md has no MCP example under ## Configuration");
  return JSON.parse(block.replace("Bearer …", "Bearer token")).mcpServers.files;
}

const npmRegistry = spawnSync("npm", ["view", "@modelcontextprotocol/server-filesystem", "version"], { encoding: "utf8", timeout: 30_000 });
const registryReachable = npmRegistry.status === 0;
if (!registryReachable) console.warn(`[skipped] the README's npx example: the npm registry cannot be reached (${(npmRegistry.stderr || npmRegistry.error?.message || "").trim().split("\n")[0]})`);

let userHome: string;
let workspace: string;
let state: string;
let managers: McpManager[] = [];

beforeAll(() => {
  // The user's HOME: neither inside the servers' cwd nor in /tmp, so not writable in their sandbox.
  userHome = mkdtempSync(path.join("/var/tmp", "aas-mcp-user-home-"));
});
afterAll(() => rmSync(userHome, { recursive: true, force: true }));
afterEach(async () => {
  await Promise.all(managers.map((m) => m.close()));
  managers = [];
  rmSync(workspace, { recursive: true, force: true });
  rmSync(state, { recursive: true, force: true });
});

async function start(servers: Record<string, unknown>): Promise<McpManager> {
  const file = path.join(state, "mcp.json");
  writeFileSync(file, JSON.stringify({ mcpServers: servers }));
  // As server.ts builds it: the user's environment, the server's own state directory hidden.
  const runner = new CommandRunner({ env: { ...process.env, HOME: userHome }, hiddenPaths: [state] });
  const m = new McpManager({ file, defaultCwd: workspace, runner, log, stateDir: state });
  managers.push(m);
  await m.start();
  await m.ready();
  return m;
}

function freshDirs() {
  workspace = mkdtempSync(path.join(os.tmpdir(), "aas-mcp-workspace-"));
  state = mkdtempSync(path.join(os.tmpdir(), "aas-mcp-state-"));
  writeFileSync(path.join(workspace, "notes.txt"), "hello from the workspace\n");
}

describe("the documented MCP example (docs/mcp.md), as written", () => {
  it.skipIf(!registryReachable)("npx -y @modelcontextprotocol/server-filesystem . starts in the default sandbox and works", async () => {
    freshDirs();
    const example = documentedExample();
    expect(example.command).toBe("npx");
    const m = await start({ files: { ...example, cwd: workspace } });
    const files = m.server("files")!;
    // The first start downloads the package; on a slow network that can outlast startupTimeoutSec
    // (30 s): the supervisor then tries again, with what npm already has in the server's cache.
    await waitFor(() => files.state === "ready", `the server ready (last error: ${files.lastError})`, 3_000);
    expect(m.tools().map((t) => t.modelName)).toContain("mcp__files__read_text_file");
    const listing = await files.callTool("list_directory", { path: workspace }, signal());
    expect(textOf(listing)).toContain("[FILE] notes.txt");
    // npm's cache went to the server's private home, not the user's.
    expect(spawnSync("ls", [path.join(state, "homes", "files", ".npm")]).status).toBe(0);
  }, 240_000);
});

describe("real MCP servers from npm (pinned), in the default sandbox with HOME outside the cwd", () => {
  it("start, list, a call of each result kind, progress, resource templates", async () => {
    freshDirs();
    const m = await start({
      filesystem: { command: bin("mcp-server-filesystem"), args: ["."] },
      everything: { command: bin("mcp-server-everything"), args: [] },
      memory: { command: bin("mcp-server-memory"), args: [], env: { MEMORY_FILE_PATH: path.join(workspace, "memory.jsonl") } },
    });
    expect(m.list().map((s) => [s.name, s.state, s.lastError])).toEqual([
      ["everything", "ready", null],
      ["filesystem", "ready", null],
      ["memory", "ready", null],
    ]);
    const names = m.tools().map((t) => t.modelName);
    expect(names).toEqual([...names].sort());
    expect(names).toEqual(expect.arrayContaining(["mcp__everything__echo", "mcp__filesystem__write_file", "mcp__memory__create_entities"]));

    const fs = m.server("filesystem")!;
    await fs.callTool("write_file", { path: path.join(workspace, "out.txt"), content: "written by the server" }, signal());
    expect(readFileSync(path.join(workspace, "out.txt"), "utf8")).toBe("written by the server");

    const everything = m.server("everything")!;
    const call = async (tool: string, args: Record<string, unknown> = {}) => modelOutcome(await everything.callTool(tool, args, signal())).content;
    expect(await call("echo", { message: "hi" })).toEqual([{ type: "text", text: "Echo: hi" }]);
    expect(await call("get-tiny-image")).toContainEqual({ type: "image", url: expect.stringMatching(/^data:image\/png;base64,iVBOR/) });
    expect(await call("get-resource-reference", { resourceType: "Text", resourceId: 1 })).toContainEqual({
      type: "text",
      text: expect.stringMatching(/^\[resource demo:\/\/resource\/dynamic\/text\/1\]\nResource 1: /),
    });
    expect(await call("get-resource-links", { count: 2 })).toContainEqual({ type: "text", text: expect.stringMatching(/^\[resource link demo:\/\/resource\/dynamic\//) });
    const structured = await everything.callTool("get-structured-content", { location: "Chicago" }, signal());
    expect(structured.structuredContent).toEqual({ temperature: expect.any(Number), conditions: expect.any(String), humidity: expect.any(Number) });

    const progress: string[] = [];
    await everything.callTool("trigger-long-running-operation", { duration: 1, steps: 4 }, signal(), (message) => progress.push(message));
    expect(progress.length).toBeGreaterThan(0);

    const { resourceTemplates } = await everything.resourcesNow();
    expect(resourceTemplates.map((t) => t.uriTemplate)).toContain("demo://resource/dynamic/text/{resourceId}");

    await m.server("memory")!.callTool("create_entities", { entities: [{ name: "app-server", entityType: "project", observations: ["supervised"] }] }, signal());
    expect(textOf(await m.server("memory")!.callTool("read_graph", {}, signal()))).toContain("app-server");
  }, 120_000);

  it("status reads restart nothing; a killed server is back by itself with its tools callable", async () => {
    freshDirs();
    const m = await start({ memory: { command: bin("mcp-server-memory"), args: [], env: { MEMORY_FILE_PATH: path.join(workspace, "memory.jsonl") } } });
    const memory = m.server("memory")!;
    const pid = memory.pid!;
    for (let i = 0; i < 3; i++) await memory.resourcesNow();
    expect(memory.pid).toBe(pid);
    const tools = JSON.stringify(m.tools());
    process.kill(serverProcess(pid)!, "SIGKILL");
    await waitFor(() => memory.state === "failed", "the kill noticed");
    expect(JSON.stringify(m.tools())).toBe(tools);
    await waitFor(() => memory.state === "ready", "back within the backoff");
    expect(memory.pid).not.toBe(pid);
    expect(textOf(await memory.callTool("read_graph", {}, signal()))).toContain("entities");
  }, 120_000);
});
