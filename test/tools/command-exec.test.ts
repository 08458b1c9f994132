// @needs-os-sandbox: runs commands in the OS sandbox (vitest.config.ts leaves this file out where bubblewrap cannot run).
/** command/exec through a real Connection (in-memory transport): argv, cwd checks, env, caps, timeouts. */
import { existsSync, mkdirSync } from "node:fs";
import path from "node:path";
import pino from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { AppContext } from "../../src/app-context.js";
import type { SandboxMode } from "../../src/protocol/common.js";
import { registerCommandExecHandler } from "../../src/rpc/handlers/command-exec.js";
import { Connection } from "../../src/rpc/connection.js";
import { policyOfMode } from "../../src/sandbox/policy.js";
import { eventually } from "../support/cluster.js";
import { makeDirs, processesRunning, sharedRunner, waitAllGone, waitGone, type Dirs } from "./helpers.js";

let d: Dirs;
beforeEach(() => {
  d = makeDirs();
  mkdirSync(path.join(d.ws, "sub"));
});
afterEach(() => d.cleanup());

type Reply = { id: number; result?: { exitCode: number; stdout: string; stderr: string }; error?: { code: number; message: string } };

function connect(sandbox: SandboxMode = "workspace-write") {
  const waiting = new Map<number, (r: Reply) => void>();
  const log = pino({ level: "silent" });
  const conn = new Connection((text) => {
    const msg = JSON.parse(text) as Reply;
    waiting.get(msg.id)?.(msg);
  }, log);
  conn.completeHandshake("test", []);
  registerCommandExecHandler(conn, { log } as unknown as AppContext, { cwd: d.ws, policy: policyOfMode(sandbox), commands: sharedRunner });
  let nextId = 1;
  const exec = (params: object): Promise<Reply> => {
    const id = nextId++;
    const p = new Promise<Reply>((resolve) => waiting.set(id, resolve));
    conn.receive(JSON.stringify({ jsonrpc: "2.0", id, method: "command/exec", params }));
    return p;
  };
  return { conn, exec };
}

describe("command/exec", () => {
  it("runs argv directly (no shell) in the server cwd", async () => {
    const { exec } = connect();
    const r = await exec({ command: ["sh", "-c", 'echo "$0 $1"; pwd; echo err >&2; exit 4', "a b", "$HOME"] });
    expect(r.result).toEqual({ exitCode: 4, stdout: `a b $HOME\n${d.ws}\n`, stderr: "err\n" });
    const literal = await exec({ command: ["echo", "$(id)", "*"] });
    expect(literal.result?.stdout).toBe("$(id) *\n");
  });

  it("uses cwd relative to the server cwd, and env overrides (null unsets)", async () => {
    const { exec } = connect();
    process.env.CMD_EXEC_TEST_UNSET = "present";
    try {
      const r = await exec({ command: ["sh", "-c", 'pwd; echo "$FOO|${CMD_EXEC_TEST_UNSET-unset}"'], cwd: "sub", env: { FOO: "bar", CMD_EXEC_TEST_UNSET: null } });
      expect(r.result?.stdout).toBe(`${path.join(d.ws, "sub")}\nbar|unset\n`);
    } finally {
      delete process.env.CMD_EXEC_TEST_UNSET;
    }
  });

  it("checks cwd against the sandbox", async () => {
    const ww = connect("workspace-write");
    const outside = await ww.exec({ command: ["pwd"], cwd: d.outside });
    expect(outside.error?.code).toBe(-32600);
    expect(outside.error?.message).toMatch(/refused by the workspace-write sandbox: .*outside the writable roots/);
    expect((await ww.exec({ command: ["pwd"], cwd: d.tmp })).result?.stdout).toBe(`${d.tmp}\n`);
    const missing = await ww.exec({ command: ["pwd"], cwd: "nope" });
    expect(missing.error?.code).toBe(-32602);

    const full = connect("danger-full-access");
    expect((await full.exec({ command: ["pwd"], cwd: d.outside })).result?.stdout).toBe(`${d.outside}\n`);

    const ro = connect("read-only");
    expect((await ro.exec({ command: ["ls"] })).result?.exitCode).toBe(0);
    // The OS sandbox, not a list of programs, stops the write.
    const write = await ro.exec({ command: ["touch", "x"] });
    expect(write.result?.exitCode).toBe(1);
    expect(write.result?.stderr).toMatch(/Read-only file system/);
    expect(existsSync(path.join(d.ws, "x"))).toBe(false);
  });

  it("runs in the sandbox of the request's sandboxPolicy, or the server's default", async () => {
    const { exec } = connect("workspace-write");
    expect((await exec({ command: ["touch", "default-ok"] })).result?.exitCode).toBe(0);
    const ro = await exec({ command: ["touch", "ro"], sandboxPolicy: { type: "readOnly" } });
    expect(ro.result?.stderr).toMatch(/Read-only file system/);
    const extra = await exec({ command: ["touch", path.join(d.outside, "granted")], sandboxPolicy: { type: "workspaceWrite", writableRoots: [d.outside] } });
    expect(extra.result?.exitCode).toBe(0);
    const full = await exec({ command: ["touch", path.join(d.outside, "full")], sandboxPolicy: { type: "dangerFullAccess" } });
    expect(full.result?.exitCode).toBe(0);
    expect(existsSync(path.join(d.ws, "default-ok"))).toBe(true);
    expect(existsSync(path.join(d.ws, "ro"))).toBe(false);
    expect(existsSync(path.join(d.outside, "granted"))).toBe(true);
    expect(existsSync(path.join(d.outside, "full"))).toBe(true);
    const bad = await exec({ command: ["true"], sandboxPolicy: { type: "somethingElse" } });
    expect(bad.error?.code).toBe(-32602);
  });

  it("validates params", async () => {
    const { exec } = connect();
    const r = await exec({ command: [] });
    expect(r.error?.code).toBe(-32602);
  });

  it("a missing program exits 127", async () => {
    const { exec } = connect();
    const r = await exec({ command: ["no-such-program-xyz"] });
    expect(r.result).toEqual({ exitCode: 127, stdout: "", stderr: "no-such-program-xyz: command not found\n" });
  });

  it("caps output per stream, keeping head and tail", async () => {
    const { exec } = connect();
    const r = await exec({ command: ["sh", "-c", "echo BEGIN; seq 1 50000; echo END"], outputBytesCap: 1000 });
    const out = r.result!.stdout;
    expect(out.startsWith("BEGIN\n")).toBe(true);
    expect(out.endsWith("END\n")).toBe(true);
    expect(out).toMatch(/\[… \d+ bytes omitted …\]/);
    expect(Buffer.byteLength(out)).toBeLessThan(1100);
  });

  it("times out with exit 124 and kills the process group", async () => {
    const { exec } = connect();
    const r = await exec({ command: ["sh", "-c", "sleep 7011 & echo started; sleep 7012"], timeoutMs: 1_500 });
    expect(r.result?.exitCode).toBe(124);
    expect(r.result?.stderr).toMatch(/timed out after 1500 ms/);
    expect(r.result?.stdout).toBe("started\n");
    expect(await waitGone(() => [...processesRunning("sleep 7011"), ...processesRunning("sleep 7012")])).toEqual([]);
  });

  it("kills running commands when the connection closes", async () => {
    const { conn, exec } = connect();
    void exec({ command: ["sleep", "987654"], timeoutMs: 60_000 }); // never answered: the peer closes
    const findSleeper = () => processesRunning("sleep 987654");
    const pids = await eventually(
      async () => {
        const found = findSleeper();
        return found.length > 0 && found;
      },
      500,
      20,
      "the running `sleep 987654`",
    );
    expect(pids).toHaveLength(1);
    conn.close();
    expect(await waitAllGone(pids)).toEqual([]);
  });
});
