/**
 * The trust boundary, tried as an attacker would: every command the model runs through the shell
 * tool, in both sandboxed modes, with approvalPolicy "never" (nothing is asked, so only the OS
 * sandbox stands in the way). Each attack must fail to escape; normal work must still succeed.
 * The test process stands in for the server (it is the command runner's parent).
 */
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { AskForApproval, SandboxMode, SandboxPolicy } from "../../src/protocol/common.js";
import { CommandRunner } from "../../src/sandbox/runner.js";
import { shellTool } from "../../src/tools/shell.js";
import { noSandbox } from "../support/sandbox.js";
import { REPO_ROOT } from "../support/process.js";
import { makeDirs, processesRunning, RecordingContext, run, sharedRunner, textOf, waitGone, type Dirs } from "../tools/helpers.js";

const SECRETS = {
  OPENAI_API_KEY: "sk-secret-openai-0001",
  ANTHROPIC_API_KEY: "sk-ant-secret-0002",
  APP_SERVER_AUTH_TOKEN: "secret-auth-token-0003",
  POSTGRES_PASSWORD: "secret-pg-password-0004",
  AWS_SECRET_ACCESS_KEY: "secret-aws-0005",
  GITHUB_TOKEN: "ghp_secret0006",
  HF_TOKEN: "hf_secret0007",
  DATABASE_URL: "postgres://u:secret-db-0008@127.0.0.1/db",
};

let d: Dirs;
let listener: net.Server;
let port = 0;
let quietHome: string;

beforeAll(async () => {
  listener = net.createServer((s) => s.end("hello from the host\n"));
  await new Promise<void>((r) => listener.listen(0, "127.0.0.1", r));
  port = (listener.address() as net.AddressInfo).port;
});
afterAll(async () => {
  await new Promise((r) => listener.close(r));
});
beforeEach(() => {
  d = makeDirs();
  quietHome = path.join(d.root, "home");
  mkdirSync(quietHome);
  writeFileSync(path.join(d.ws, "hello.txt"), "hello world\n");
});
afterEach(() => d.cleanup());

/** A runner whose parent environment holds every kind of secret, hiding `secretDir` like the server's home. */
function runnerWithSecrets(secretDir?: string) {
  return new CommandRunner({ env: { ...process.env, ...SECRETS }, set: { HOME: quietHome }, hiddenPaths: secretDir ? [secretDir] : [] });
}

function shell(mode: SandboxMode, opts: { policy?: SandboxPolicy; runner?: CommandRunner; approval?: AskForApproval } = {}) {
  const ctx = new RecordingContext(d.ws, mode, opts.approval ?? "never", opts.policy, opts.runner ?? runnerWithSecrets());
  return { ctx, tool: shellTool(ctx, { killGraceMs: 300 }) };
}

async function sh(mode: SandboxMode, command: string, opts: Parameters<typeof shell>[1] = {}) {
  const { ctx, tool } = shell(mode, opts);
  const out = await run(tool, { command });
  const item = ctx.completed.at(-1);
  return { text: textOf(out), isError: out.isError, item: item?.type === "commandExecution" ? item : null, ctx };
}

const CONFINED: SandboxMode[] = ["read-only", "workspace-write"];

describe.skipIf(noSandbox).each(CONFINED)("sandboxed (%s): attacks do not escape", (mode) => {
  it("cannot write outside the workspace (or anywhere, under read-only)", async () => {
    const r = await sh(mode, `touch ${d.outside}/pwned; echo x > ${d.outside}/pwned2; touch ws-file; echo done`);
    expect(existsSync(path.join(d.outside, "pwned"))).toBe(false);
    expect(existsSync(path.join(d.outside, "pwned2"))).toBe(false);
    expect(r.text).toMatch(/Read-only file system/);
    expect(existsSync(path.join(d.ws, "ws-file"))).toBe(mode === "workspace-write");
  });

  it("reads nothing from /etc/shadow", async () => {
    const r = await sh(mode, "cat /etc/shadow /etc/gshadow; grep -c root /etc/shadow; true");
    expect(r.text).not.toMatch(/root:/);
    expect(r.text).not.toMatch(/^[1-9]\d*$/m); // grep -c found no line
  });

  it("cannot reach a TCP listener on the host's 127.0.0.1", async () => {
    const r = await sh(mode, `exec 3<>/dev/tcp/127.0.0.1/${port} && head -1 <&3 || echo unreachable`);
    expect(r.text).not.toContain("hello from the host");
    expect(r.text).toContain("unreachable");
  });

  it("cannot see, signal or read the environment of the server (its parent) or any host process", async () => {
    const r = await sh(mode, `kill -0 ${process.pid} 2>&1 || echo cannot-signal; kill -9 $PPID 2>&1; cat /proc/${process.pid}/environ 2>&1 || echo cannot-read; ls /proc | grep -c '^[0-9]'`);
    expect(r.text).toContain("cannot-signal");
    expect(r.text).toContain("cannot-read");
    const count = Number(r.text.trim().split("\n").at(-1));
    expect(count).toBeLessThan(10); // its own few processes, not the host's hundreds
  });

  it("finds no secret in its environment or in any /proc/*/environ", async () => {
    const r = await sh(mode, "env; cat /proc/[0-9]*/environ | tr '\\0' '\\n'; grep -a -r . /proc/*/environ 2>/dev/null; true");
    for (const value of Object.values(SECRETS)) expect(r.text).not.toContain(value);
    expect(r.text).toMatch(/^PATH=/m); // the allow list still passes what builds need
  });

  it("gets where the trusted certificates are (npm behind a TLS-inspecting proxy), not a proxy's credentials", async () => {
    const env = { ...process.env, NODE_EXTRA_CA_CERTS: "/etc/ssl/certs/proxy-ca-0031.pem", SSL_CERT_DIR: "/etc/ssl/certs", HTTPS_PROXY: "http://user:proxy-pw-0031@proxy:3128" };
    const runner = new CommandRunner({ env, set: { HOME: quietHome } });
    const r = await sh(mode, "env", { runner });
    expect(r.text).toMatch(/^NODE_EXTRA_CA_CERTS=\/etc\/ssl\/certs\/proxy-ca-0031\.pem$/m);
    expect(r.text).toMatch(/^SSL_CERT_DIR=\/etc\/ssl\/certs$/m);
    expect(r.text).not.toContain("proxy-pw-0031");
  });

  it("cannot read the server's home (database files, tokens): it is an empty, read-only directory", async () => {
    const home = path.join(d.root, "server-home");
    mkdirSync(home);
    writeFileSync(path.join(home, "token"), "secret-in-home-0009\n");
    const r = await sh(mode, `cat ${home}/token; ls -A ${home} | wc -l; touch ${home}/x; true`, { runner: runnerWithSecrets(home) });
    expect(r.text).not.toContain("secret-in-home-0009");
    expect(r.text).toMatch(/^0$/m);
    expect(existsSync(path.join(home, "x"))).toBe(false);
  });

  it("sees no sockets under /run (the database's, docker's, dbus')", async () => {
    const r = await sh(mode, "ls -A /run | wc -l; ls -A /var/run/ | wc -l");
    expect(r.text).toMatch(/Output:\n0\n0\n/);
  });

  it("setsid -f, nohup and & do not outlive the command", async () => {
    const r = await sh(mode, "setsid -f sleep 7101; nohup sleep 7102 >/dev/null 2>&1 & (sleep 7103 &); disown -a; echo started");
    expect(r.text).toContain("started");
    expect(await waitGone(() => ["sleep 7101", "sleep 7102", "sleep 7103"].flatMap(processesRunning))).toEqual([]);
  });

  it("a pager option that runs a program is confined too (git grep -O)", async () => {
    const r = await sh(mode, `git grep --no-index -O'touch ${d.outside}/pwned;' hello; echo exit=$?`);
    expect(existsSync(path.join(d.outside, "pwned"))).toBe(false);
    expect(r.item?.status).toBe("completed"); // the final `echo` succeeded: the item reports what happened
  });
});

describe.skipIf(noSandbox)("sandboxed: what workspace-write allows", () => {
  it("normal work succeeds: git init/add/status, writing, building and running tests in the workspace, /tmp and $TMPDIR", async () => {
    const script = [
      "git init -q . && git add hello.txt && git status --short",
      `printf 'console.log(1 + 1)\\n' > build.js && node build.js > built.txt && test "$(cat built.txt)" = 2`,
      "echo t > /tmp/aas-sandbox-$$ && rm /tmp/aas-sandbox-$$",
      'echo t > "$TMPDIR/t" && cat "$TMPDIR/t"',
      "echo all-ok",
    ].join(" && ");
    const r = await sh("workspace-write", script);
    expect(r.text).toContain("all-ok");
    expect(r.item?.status).toBe("completed");
    expect(readFileSync(path.join(d.ws, "built.txt"), "utf8")).toBe("2\n");
  });

  it("an existing .git stays read-only", async () => {
    mkdirSync(path.join(d.ws, ".git"));
    const r = await sh("workspace-write", "touch .git/hooks-pwned; touch ok");
    expect(r.text).toMatch(/Read-only file system/);
    expect(existsSync(path.join(d.ws, ".git", "hooks-pwned"))).toBe(false);
    expect(existsSync(path.join(d.ws, "ok"))).toBe(true);
  });

  it("writableRoots are writable; excludeSlashTmp and excludeTmpdirEnvVar take /tmp and $TMPDIR away", async () => {
    const policy: SandboxPolicy = { type: "workspaceWrite", writableRoots: [d.outside], networkAccess: false, excludeSlashTmp: true, excludeTmpdirEnvVar: true };
    const r = await sh("workspace-write", `touch ${d.outside}/granted; touch /tmp/aas-excluded-$$; touch "$TMPDIR/excluded"; true`, { policy });
    expect(existsSync(path.join(d.outside, "granted"))).toBe(true);
    expect(existsSync(path.join(d.tmp, "excluded"))).toBe(false);
    expect(r.text.match(/Read-only file system/g)).toHaveLength(2);
  });

  it("networkAccess: true reaches a loopback listener (workspace-write and read-only)", async () => {
    const ww = await sh("workspace-write", `exec 3<>/dev/tcp/127.0.0.1/${port} && head -1 <&3`, {
      policy: { type: "workspaceWrite", writableRoots: [], networkAccess: true, excludeSlashTmp: false, excludeTmpdirEnvVar: false },
    });
    expect(ww.text).toContain("hello from the host");
    const ro = await sh("read-only", `exec 3<>/dev/tcp/127.0.0.1/${port} && head -1 <&3`, { policy: { type: "readOnly", networkAccess: true } });
    expect(ro.text).toContain("hello from the host");
  });
});

describe.skipIf(noSandbox || !existsSync("/dev/shm"))("sandboxed: a workspace on the RAM disk (/dev/shm, hidden by the sandbox's fresh /dev)", () => {
  it.each(CONFINED)("%s: the command starts in it and reads it; only workspace-write writes it", async (mode) => {
    const ws = mkdtempSync("/dev/shm/aas-sandbox-ws-");
    try {
      writeFileSync(path.join(ws, "hello.txt"), "hello from shm\n");
      const ctx = new RecordingContext(ws, mode, "never", undefined, runnerWithSecrets());
      const out = await run(shellTool(ctx, { killGraceMs: 300 }), { command: "cat hello.txt; touch made; pwd" });
      const text = textOf(out);
      expect(text).toContain("hello from shm");
      expect(text).toContain(ws);
      expect(existsSync(path.join(ws, "made"))).toBe(mode === "workspace-write");
      if (mode === "read-only") expect(text).toMatch(/Read-only file system/);
    } finally {
      rmSync(ws, { recursive: true, force: true });
    }
  });
});

describe.skipIf(noSandbox)("sandboxed: processes die with the server", () => {
  it("kill -9 of the server kills every process of a running command", async () => {
    const child = spawn(process.execPath, ["--import", "tsx", "test/fixtures/sandboxed-sleeper.ts", d.ws, "sleep 7201 & setsid -f sleep 7202; echo started; wait"], {
      cwd: REPO_ROOT,
      stdio: ["ignore", "pipe", "inherit"],
    });
    try {
      await new Promise<void>((resolve, reject) => {
        child.stdout.on("data", (b: Buffer) => b.toString().includes("running") && resolve());
        child.once("exit", () => reject(new Error("the stand-in server exited early")));
      });
      const sleepers = () => ["sleep 7201", "sleep 7202"].flatMap(processesRunning);
      expect(await waitGone(() => (sleepers().length === 2 ? [] : [0]))).toEqual([]); // both started
      child.kill("SIGKILL");
      expect(await waitGone(sleepers)).toEqual([]);
    } finally {
      child.kill("SIGKILL");
    }
  });
});

describe.skipIf(noSandbox)("on-failure: a sandbox denial may run again outside it, only after approval", () => {
  it("decline keeps the denial; accept runs it unconfined once", async () => {
    const declined = shell("read-only", { approval: "on-failure", runner: sharedRunner });
    declined.ctx.defaultAnswer = "decline";
    await run(declined.tool, { command: "touch made.txt" });
    expect(declined.ctx.approvals).toHaveLength(1);
    expect(existsSync(path.join(d.ws, "made.txt"))).toBe(false);

    const accepted = shell("read-only", { approval: "on-failure", runner: sharedRunner });
    const out = await run(accepted.tool, { command: "touch made.txt" });
    expect(accepted.ctx.approvals).toHaveLength(1);
    expect(existsSync(path.join(d.ws, "made.txt"))).toBe(true);
    expect(out.isError).toBe(false);
    expect(accepted.ctx.completed.at(-1)).toMatchObject({ status: "completed", exitCode: 0 });
  });

  it("never and on-request report the denial without asking", async () => {
    for (const approval of ["never", "on-request"] as const) {
      const { ctx, tool } = shell("read-only", { approval, runner: sharedRunner });
      const out = await run(tool, { command: "touch made.txt" });
      expect(ctx.approvals).toHaveLength(0);
      expect(out.isError).toBe(true);
      expect(existsSync(path.join(d.ws, "made.txt"))).toBe(false);
    }
  });
});

describe("fail closed: no sandbox, no confined command", () => {
  const broken = () => new CommandRunner({ bwrapPath: path.join(os.tmpdir(), "no-such-bwrap") });

  it.each(CONFINED)("%s: refused with the reason, nothing runs", async (mode) => {
    const r = await sh(mode, "touch ran.txt", { runner: broken() });
    expect(r.isError).toBe(true);
    expect(r.text).toMatch(/the OS sandbox is not available .*never run unconfined/);
    expect(r.text).toMatch(/install bubblewrap/);
    expect(r.item).toMatchObject({ status: "failed", exitCode: null });
    expect(existsSync(path.join(d.ws, "ran.txt"))).toBe(false);
    expect(await broken().status()).toMatchObject({ available: false });
  });

  it("danger-full-access still runs, unconfined, as the server's user", async () => {
    const r = await sh("danger-full-access", `touch ${d.outside}/full; kill -0 ${process.pid} && echo sees-server`, { runner: broken() });
    expect(existsSync(path.join(d.outside, "full"))).toBe(true);
    expect(r.text).toContain("sees-server");
  });
});

describe.skipIf(noSandbox)("sandboxed: nested roots and masks", () => {
  it("a workspace inside the server's home, inside /tmp: the workspace and /tmp are writable, the rest of the home is hidden", async () => {
    const home = mkdtempSync("/tmp/aas-nested-home-"); // under /tmp, itself a writable root
    try {
      const ws = path.join(home, "ws");
      mkdirSync(ws, { recursive: true });
      writeFileSync(path.join(home, "token"), "secret-in-home-0010\n");
      const ctx = new RecordingContext(ws, "workspace-write", "never", undefined, runnerWithSecrets(home));
      const out = await run(shellTool(ctx), { command: `touch in-ws; cat ${home}/token; ls -A ${home}; echo t > /tmp/aas-nested-$$ && rm /tmp/aas-nested-$$ && echo tmp-ok` });
      expect(existsSync(path.join(ws, "in-ws"))).toBe(true);
      expect(textOf(out)).not.toContain("secret-in-home-0010");
      expect(textOf(out)).not.toMatch(/^token$/m);
      expect(textOf(out)).toContain("tmp-ok");
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });
});
