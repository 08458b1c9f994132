/**
 * What an MCP tool call costs over calling the same function in-process: `echo` on the test MCP
 * server (test/fixtures/mcp-test-server.mjs, the official SDK) through the server's own McpManager
 * (dist/), over stdio (inside the bubblewrap sandbox, as configured by default) and over
 * Streamable HTTP on 127.0.0.1; plus the RSS of the stdio server's process tree. Then the real
 * servers from npm (the pinned devDependencies: server-filesystem, server-everything, server-memory,
 * and the README's `npx -y …` form with npm's cache warm in the server's private home): start-up
 * time (start → tools listed, in the sandbox) and the RSS of its process tree (bwrap and the server;
 * for npx also npm's process, which stays up as the server's parent).
 */
import { spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { pathToFileURL } from "node:url";
import pino from "pino";
import type { LatencyRow, MemRow } from "../lib/context.js";
import { summarize } from "../lib/stats.js";

type ManagerModule = typeof import("../../src/mcp/manager.js");
type RunnerModule = typeof import("../../src/sandbox/runner.js");

export async function groupMcp(app: string, n: number, out: { latency: LatencyRow[]; memory: MemRow[]; notes: string[] }): Promise<void> {
  const { McpManager } = (await import(pathToFileURL(path.join(app, "dist", "mcp", "manager.js")).href)) as ManagerModule;
  const { CommandRunner } = (await import(pathToFileURL(path.join(app, "dist", "sandbox", "runner.js")).href)) as RunnerModule;
  const fixture = path.join(app, "test", "fixtures", "mcp-test-server.mjs");
  const dir = await mkdtemp(path.join(os.tmpdir(), "aas-bench-mcp-"));
  const http = spawn(process.execPath, [fixture, "--http", path.join(dir, "port")], { stdio: "ignore" });
  const runner = new CommandRunner();
  const sandboxed = (await runner.status()).available;
  try {
    for (let i = 0; i < 200 && !(existsSync(path.join(dir, "port")) && readFileSync(path.join(dir, "port"), "utf8")); i++) await new Promise((r) => setTimeout(r, 25));
    const port = readFileSync(path.join(dir, "port"), "utf8");
    const file = path.join(dir, "mcp.json");
    await writeFile(
      file,
      JSON.stringify({
        mcpServers: {
          stdio: { command: process.execPath, args: [fixture], cwd: dir, ...(sandboxed ? {} : { sandbox: "danger-full-access" }) },
          http: { url: `http://127.0.0.1:${port}/mcp` },
        },
      }),
    );
    const manager = new McpManager({ file, defaultCwd: dir, runner, log: pino({ level: "silent" }), stateDir: path.join(dir, "state") });
    await manager.start();
    await manager.ready();
    if (!sandboxed) out.notes.push("mcp: bubblewrap unavailable, the stdio server ran unconfined for this measurement.");
    const signal = new AbortController().signal;
    // The in-process baseline: the same work (an object with the echoed text) behind an await.
    const direct = async (text: string) => ({ content: [{ type: "text", text: `echo: ${text}` }], structuredContent: { echoed: text } });
    const cases: Array<[string, (i: number) => Promise<unknown>]> = [
      ["in-process function (baseline)", (i) => direct(`x${i}`)],
      ["MCP stdio (sandboxed)", (i) => manager.server("stdio")!.callTool("echo", { text: `x${i}` }, signal)],
      ["MCP Streamable HTTP", (i) => manager.server("http")!.callTool("echo", { text: `x${i}` }, signal)],
    ];
    for (const [label, call] of cases) {
      const samples: number[] = [];
      for (let i = 0; i < n + 10; i++) {
        const t = performance.now();
        await call(i);
        if (i >= 10) samples.push(performance.now() - t);
      }
      out.latency.push({ backend: "-", metric: `tool call echo: ${label}`, s: summarize(samples) });
    }
    const pid = findServerPid(fixture);
    if (pid) out.memory.push({ backend: "-", metric: "MCP stdio test server (node) RSS", rss: summarize([rssMiB(pid)]), hwm: summarize([hwmMiB(pid)]) });
    await manager.close();
    await realServers(app, dir, sandboxed, Math.max(3, Math.min(10, Math.round(n / 50))), out, { McpManager, CommandRunner });
  } finally {
    http.kill("SIGKILL");
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * Each real server started `starts` times on its own: the time from start() until it is ready
 * (spawned in the sandbox, handshake, tools listed) and, once up, the summed RSS of its process
 * tree (a summed high-water mark is an upper bound). The npx row runs the README's form; its first
 * start (the download) is not counted.
 */
async function realServers(
  app: string,
  dir: string,
  sandboxed: boolean,
  starts: number,
  out: { latency: LatencyRow[]; memory: MemRow[]; notes: string[] },
  mods: { McpManager: ManagerModule["McpManager"]; CommandRunner: RunnerModule["CommandRunner"] },
): Promise<void> {
  const bin = (name: string) => path.join(app, "node_modules", ".bin", name);
  const workspace = path.join(dir, "workspace");
  await mkdir(workspace, { recursive: true });
  const sandbox = sandboxed ? {} : { sandbox: "danger-full-access" };
  const servers: Array<[string, Record<string, unknown>, boolean]> = [
    ["server-filesystem", { command: bin("mcp-server-filesystem"), args: ["."] }, false],
    ["server-everything", { command: bin("mcp-server-everything"), args: [] }, false],
    ["server-memory", { command: bin("mcp-server-memory"), args: [], env: { MEMORY_FILE_PATH: path.join(workspace, "memory.jsonl") } }, false],
    ["npx -y server-filesystem (warm cache)", { command: "npx", args: ["-y", "@modelcontextprotocol/server-filesystem", "."] }, true],
  ];
  const state = path.join(dir, "real-state");
  const runner = new mods.CommandRunner({ hiddenPaths: [state] });
  for (const [label, config, warmUp] of servers) {
    const file = path.join(dir, "real.json");
    await writeFile(file, JSON.stringify({ mcpServers: { s: { ...config, cwd: workspace, startupTimeoutSec: 120, ...sandbox } } }));
    const times: number[] = [];
    const rss: number[] = [];
    const hwm: number[] = [];
    let failure: string | null = null;
    for (let i = 0; i < starts + (warmUp ? 1 : 0) && failure === null; i++) {
      const manager = new mods.McpManager({ file, defaultCwd: workspace, runner, log: pino({ level: "silent" }), stateDir: state });
      const t = performance.now();
      await manager.start();
      await manager.ready();
      const elapsed = performance.now() - t;
      const conn = manager.server("s")!;
      if (conn.state !== "ready") failure = conn.lastError;
      else if (!(warmUp && i === 0)) {
        times.push(elapsed);
        const tree = processTree(conn.pid!);
        rss.push(tree.reduce((sum, p) => sum + rssMiB(p), 0));
        hwm.push(tree.reduce((sum, p) => sum + hwmMiB(p), 0));
      }
      await manager.close();
    }
    if (failure !== null) {
      out.notes.push(`mcp: ${label} did not start: ${failure}`);
      continue;
    }
    out.latency.push({ backend: "-", metric: `MCP ${label}: start to ready (sandboxed, ${starts} starts)`, s: summarize(times) });
    if (rss.length) out.memory.push({ backend: "-", metric: `MCP ${label}: process tree (bwrap + server) RSS once ready`, rss: summarize(rss), hwm: summarize(hwm) });
  }
}

/** `pid` and all its descendants (bwrap, its init, the server and whatever the server started). */
function processTree(pid: number): number[] {
  const out: number[] = [];
  const visit = (p: number) => {
    out.push(p);
    let children: string[] = [];
    try {
      children = readFileSync(`/proc/${p}/task/${p}/children`, "utf8").trim().split(/\s+/).filter(Boolean);
    } catch {
      /* gone */
    }
    for (const c of children) visit(Number(c));
  };
  visit(pid);
  return out;
}

/** The fixture's node process started by the stdio transport (inside bwrap), by command line. */
function findServerPid(fixture: string): number | null {
  for (const name of readdirNumeric()) {
    try {
      const cmd = readFileSync(`/proc/${name}/cmdline`, "utf8").split("\0");
      if (cmd[0] === process.execPath && cmd[1] === fixture && cmd.length === 3) return Number(name);
    } catch {
      /* gone */
    }
  }
  return null;
}
const readdirNumeric = () => readdirSync("/proc").filter((n) => /^\d+$/.test(n));
const statusKiB = (pid: number, key: string) => {
  try {
    return Number(new RegExp(`${key}:\\s+(\\d+)`).exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0);
  } catch {
    return 0; // gone meanwhile
  }
};
const rssMiB = (pid: number) => statusKiB(pid, "VmRSS") / 1024;
const hwmMiB = (pid: number) => statusKiB(pid, "VmHWM") / 1024;
