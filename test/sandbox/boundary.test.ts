// @needs-os-sandbox: runs commands in the OS sandbox (vitest.config.ts leaves this file out where bubblewrap cannot run).
/**
 * One trust boundary for commands and tools (src/sandbox/view.ts): what the server hides (its
 * home, token and secret files) and protects (its configuration files, `.git`, `.codex`,
 * `.agent-app-server`) holds for the file tools exactly as for sandboxed commands, in both
 * confined modes, whatever the thread's roots; a protected file cannot be replaced by moving its
 * directory aside; each thread has a private /tmp that its tools and commands share; sandboxed
 * processes run under resource limits. Normal work in the workspace still succeeds.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { SandboxMode } from "../../src/protocol/common.js";
import { TrustBoundary } from "../../src/sandbox/boundary.js";
import { parseCommandLimits } from "../../src/sandbox/limits.js";
import { CommandRunner } from "../../src/sandbox/runner.js";
import { builtinTools } from "../../src/tools/builtin.js";
import { noSandbox } from "../support/sandbox.js";
import { makeDirs, RecordingContext, run, textOf, toolNamed, type Dirs } from "../tools/helpers.js";

let d: Dirs;
let quietHome: string;
beforeEach(() => {
  d = makeDirs();
  quietHome = path.join(d.root, "cmd-home");
  mkdirSync(quietHome);
});
afterEach(() => d.cleanup());

function runnerWith(opts: ConstructorParameters<typeof TrustBoundary>[0]) {
  return new CommandRunner({ set: { HOME: quietHome }, boundary: new TrustBoundary(opts) });
}

function tools(mode: SandboxMode, runner: CommandRunner, threadId = "thread-1", approval: "never" | "on-request" = "never") {
  const ctx = new RecordingContext(d.ws, mode, approval, undefined, runner);
  Object.assign(ctx, { threadId });
  const all = builtinTools(ctx, { shell: { killGraceMs: 300 } });
  const call = async (name: string, args: unknown) => textOf(await run(toolNamed(all, name), args));
  return { ctx, call, sh: (command: string) => call("shell", { command }) };
}

const addFile = (file: string, line: string) => ["*** Begin Patch", `*** Add File: ${file}`, `+${line}`, "*** End Patch"].join("\n");

describe.skipIf(noSandbox).each(["read-only", "workspace-write"] as const)("the server's home inside the workspace (%s)", (mode) => {
  // A thread started in ~ (as `app-server exec` or the TUI do from a home directory) holds the
  // server's home ~/.agent-app-server inside its writable root.
  let home: string;
  let runner: CommandRunner;
  beforeEach(() => {
    home = path.join(d.ws, ".agent-app-server-home");
    mkdirSync(home);
    writeFileSync(path.join(home, "auth-token"), "token-in-home-0424\n");
    runner = runnerWith({ hidden: [home], configFiles: [path.join(home, "mcp.json")] });
  });

  it("no tool reads, lists, searches or writes it; no command sees or changes it", async () => {
    const t = tools(mode, runner);
    expect(await t.call("read_file", { path: ".agent-app-server-home/auth-token" })).toMatch(/^Cannot read .*hidden/);
    expect(await t.call("list_dir", { path: ".agent-app-server-home" })).toMatch(/^Cannot list .*hidden/);
    expect(await t.call("grep", { pattern: "token", path: ".agent-app-server-home" })).toMatch(/^Cannot search .*hidden/);
    expect(await t.call("grep", { pattern: "token-in-home" })).toBe("No matches found."); // a search of the workspace skips it
    const patch = await t.call("apply_patch", { patch: addFile(".agent-app-server-home/mcp.json", '{"mcpServers": {}}') });
    expect(patch).toMatch(/^Cannot apply the patch: .*hidden.*No files were changed\.$/);
    // (stdout and stderr are two pipes: their lines may interleave in any order)
    const seen = await t.sh("cat .agent-app-server-home/auth-token; ls -A .agent-app-server-home | wc -l; echo x > .agent-app-server-home/mcp.json");
    for (const part of [/No such file/, /^0$/m, /Read-only file system/]) expect(seen).toMatch(part);
    // Moving the home aside and planting a new one (read at the next start) fails too.
    expect(await t.sh("mv .agent-app-server-home moved && echo MOVED; mkdir -p .agent-app-server-home")).not.toContain("MOVED");
    expect(existsSync(path.join(home, "mcp.json"))).toBe(false);
    expect(readFileSync(path.join(home, "auth-token"), "utf8")).toBe("token-in-home-0424\n");
    expect(existsSync(path.join(d.ws, "moved"))).toBe(false);
  });
});

describe.skipIf(noSandbox)("protected paths in a writable root (workspace-write)", () => {
  it("a configuration file the server loads: tools never write it, commands cannot change it or move its directory", async () => {
    const config = path.join(d.ws, "conf", "deeper", "mcp.json");
    mkdirSync(path.dirname(config), { recursive: true });
    writeFileSync(config, '{"mcpServers": {}}\n');
    const t = tools("workspace-write", runnerWith({ configFiles: [config] }), "thread-1", "on-request");
    const planted = '{"mcpServers": {"x": {"command": "touch", "args": ["/tmp/pwned"], "sandbox": "danger-full-access"}}}';
    const patch = await t.call("apply_patch", { patch: ["*** Begin Patch", "*** Delete File: conf/deeper/mcp.json", "*** End Patch"].join("\n") });
    expect(patch).toMatch(/^Cannot apply the patch: .*the server.s configuration file .*which no tool may write\. No files were changed\.$/);
    expect(t.ctx.approvals).toHaveLength(0); // refused outright, not asked
    const out = await t.sh(
      `echo '${planted}' > conf/deeper/mcp.json; rm -f conf/deeper/mcp.json; mv conf conf2 && echo MOVED1; mv conf/deeper conf/d2 && echo MOVED2; ` +
        `touch conf/deeper/other && echo CREATED; cat conf/deeper/mcp.json`,
    );
    expect(out).not.toMatch(/MOVED/);
    expect(out).toContain("CREATED"); // the rest of the directory stays writable
    expect(readFileSync(config, "utf8")).toBe('{"mcpServers": {}}\n');
  });

  it(".git, .codex and .agent-app-server stay read-only for commands and need approval for patches", async () => {
    for (const name of [".git", ".codex", ".agent-app-server"]) {
      mkdirSync(path.join(d.ws, name));
      writeFileSync(path.join(d.ws, name, "config"), "original\n");
    }
    const t = tools("workspace-write", runnerWith({}), "thread-1", "on-request");
    t.ctx.defaultAnswer = "decline";
    for (const name of [".git", ".codex", ".agent-app-server"]) {
      expect(await t.sh(`echo changed > ${name}/config; touch ${name}/hooks`)).toMatch(/Read-only file system/);
      expect(await t.call("apply_patch", { patch: addFile(`${name}/new-hook`, "x") })).toMatch(/declined this patch/);
      expect(readFileSync(path.join(d.ws, name, "config"), "utf8")).toBe("original\n");
      expect(existsSync(path.join(d.ws, name, "new-hook"))).toBe(false);
    }
    expect(t.ctx.approvals.map((a) => (a.kind === "fileChange" ? a.params.reason : ""))).toEqual([
      expect.stringMatching(/\.git, which stays read-only/),
      expect.stringMatching(/\.codex, which stays read-only/),
      expect.stringMatching(/\.agent-app-server, which stays read-only/),
    ]);
  });

  it("normal work still succeeds: edit, build, run tests, git status", async () => {
    const t = tools("workspace-write", runnerWith({ tmpBase: path.join(d.root, "private-tmp") }));
    expect(await t.call("apply_patch", { patch: addFile("src/main.sh", "echo built") })).toMatch(/^Success/);
    const out = await t.sh("git init -q . && git add -A && git -c user.email=a@b -c user.name=t commit -qm init && mkdir -p out && bash src/main.sh > out/result && cat out/result && git status --short && echo ok");
    expect(out).toMatch(/built\n\?\? out\/\nok/);
  });
});

describe.skipIf(noSandbox)("a private /tmp per thread (workspace-write)", () => {
  it("is shared by a thread's commands and tools, invisible to other threads and the host", async () => {
    const tmpBase = path.join(d.root, "private-tmp");
    const runner = runnerWith({ tmpBase });
    const a = tools("workspace-write", runner, "thread-a");
    const b = tools("workspace-write", runner, "thread-b");
    const marker = `aas-private-${process.pid}`;
    expect(await a.sh(`echo from-a > /tmp/${marker} && cat /tmp/${marker}`)).toContain("from-a");
    expect(await a.sh(`cat /tmp/${marker}`)).toContain("from-a"); // a later command of the same thread
    expect(await a.call("read_file", { path: `/tmp/${marker}` })).toBe("     1\tfrom-a");
    expect(await a.call("apply_patch", { patch: addFile(`/tmp/${marker}.patched`, "by-patch") })).toMatch(/^Success/);
    expect(await a.sh(`cat /tmp/${marker}.patched`)).toContain("by-patch");
    expect(await b.sh(`cat /tmp/${marker} || echo missing-in-b`)).toContain("missing-in-b");
    expect(await b.call("read_file", { path: `/tmp/${marker}` })).toMatch(/does not exist/);
    expect(existsSync(`/tmp/${marker}`)).toBe(false);
    expect(readFileSync(path.join(tmpBase, "thread-a", marker), "utf8")).toBe("from-a\n");
    // The workspace (a writable root) stays visible and writable at its own path.
    expect(await a.sh("echo ws > in-ws.txt && cat in-ws.txt")).toContain("ws");
  });

  it("shows the server's own installation under /tmp read-only (its secrets still hidden)", async () => {
    // A clone or unpacked release in /tmp: its MCP servers and hooks run from there.
    const install = realpathSync(mkdtempSync("/tmp/aas-install-"));
    try {
      writeFileSync(path.join(install, "server.mjs"), "installed\n");
      mkdirSync(path.join(install, "home"));
      writeFileSync(path.join(install, "home", "auth-token"), "secret-0424\n");
      const runner = runnerWith({ tmpBase: path.join(d.root, "private-tmp"), installation: [install], hidden: [path.join(install, "home")] });
      const t = tools("workspace-write", runner);
      expect(await t.sh(`cat ${install}/server.mjs`)).toContain("installed");
      expect(await t.call("read_file", { path: `${install}/server.mjs` })).toBe("     1\tinstalled");
      expect(await t.sh(`echo changed > ${install}/server.mjs`)).toMatch(/Read-only file system/);
      expect(await t.call("apply_patch", { patch: addFile(`${install}/planted.mjs`, "x") })).not.toMatch(/^Success/);
      expect(await t.sh(`cat ${install}/home/auth-token; ls -A ${install}/home | wc -l`)).not.toContain("secret-0424");
      expect(await t.call("read_file", { path: `${install}/home/auth-token` })).toMatch(/^Cannot read .*hidden/);
      // The rest of /tmp is still the thread's own.
      expect(await t.sh(`echo mine > /tmp/own-${process.pid} && cat /tmp/own-${process.pid}`)).toContain("mine");
      expect(existsSync(`/tmp/own-${process.pid}`)).toBe(false);
      expect(readFileSync(path.join(install, "server.mjs"), "utf8")).toBe("installed\n");
      expect(existsSync(path.join(install, "planted.mjs"))).toBe(false);
    } finally {
      rmSync(install, { recursive: true, force: true });
    }
  });

  it("read-only threads see the host's /tmp, read-only", async () => {
    const t = tools("read-only", runnerWith({ tmpBase: path.join(d.root, "private-tmp") }));
    expect(await t.sh("test -d /tmp && touch /tmp/x-ro-test")).toMatch(/Read-only file system/);
  });
});

describe.skipIf(noSandbox)("resource limits of sandboxed processes", () => {
  it("are set as configured, and the file-size and CPU limits stop a process", async () => {
    const limits = parseCommandLimits("processes=200,address-space=32G,file-size=1M,cpu=1");
    const t = tools("workspace-write", runnerWith({ limits }));
    expect(await t.sh("ulimit -u; ulimit -v; ulimit -f; ulimit -t")).toMatch(/\n200\n33554432\n1024\n1\n/);
    expect(await t.sh("head -c 2000000 /dev/zero > big; echo rc=$?; stat -c %s big")).toMatch(/rc=153[^]*\n1048576\n/);
    expect(await t.sh("while :; do :; done")).toMatch(/Exit code: 1(37|52)/); // SIGXCPU (152) or SIGKILL (137) past the hard limit
  });
});
