/**
 * What an MCP tool call costs over calling the same function in-process: `echo` on the test MCP
 * server (test/fixtures/mcp-test-server.mjs, the official SDK) through the server's own McpManager
 * (dist/), over stdio (inside the bubblewrap sandbox, as configured by default) and over
 * Streamable HTTP on 127.0.0.1; plus the RSS of the stdio server's process tree.
 */
import { spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
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
  } finally {
    http.kill("SIGKILL");
    await rm(dir, { recursive: true, force: true });
  }
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
const statusKiB = (pid: number, key: string) => Number(new RegExp(`${key}:\\s+(\\d+)`).exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0);
const rssMiB = (pid: number) => statusKiB(pid, "VmRSS") / 1024;
const hwmMiB = (pid: number) => statusKiB(pid, "VmHWM") / 1024;
