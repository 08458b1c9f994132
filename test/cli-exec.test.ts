// @needs-os-sandbox: runs commands in the OS sandbox (vitest.config.ts leaves this file out where bubblewrap cannot run).
/**
 * `app-server exec` and `app-server threads` as real processes (the run's bundle of src/, see support/cli-bundle.ts)
 * against a server whose model is the mock: streamed text, approvals answered with --approve
 * always / never / ask (on a pseudo-terminal, and without a terminal), --json lines, exit codes (0 completed, 1 failed,
 * 2 usage, 130 interrupted by Ctrl-C), continuing a thread, and an embedded server (no --url).
 */
import { spawn } from "node:child_process";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { makeWorkspace, MARK_COMMAND, markerCount } from "./support/approvals.js";
import { TestClient } from "./support/client.js";
import { BACKENDS } from "./support/db.js";
import { cleanEnv, cliArgv, parseJson, removeSeed, REPO_ROOT, runCli, seededHome, spawnCli, type CliProcess } from "./support/process.js";
import { startMockModelServer, type MockModelServer } from "./support/mock-model-server.js";
import { startTurnHarness, type TurnHarness } from "./support/turns.js";
import { shellInvocation } from "../src/tools/shell-invocation.js";

const backend = BACKENDS[BACKENDS.length - 1]!;

/** The thread id exec prints on stderr before the turn. */
function threadIdOf(p: CliProcess): string {
  const m = p.stderr.match(/thread ([0-9a-f-]{36})/);
  if (!m) throw new Error(`no thread id in stderr:\n${p.stderr}`);
  return m[1]!;
}

describe("app-server exec and threads against a server (--url)", () => {
  let h: TurnHarness;
  let url: string;
  const workspaces: Array<() => void> = [];
  const running: CliProcess[] = [];

  beforeAll(async () => {
    h = await startTurnHarness(backend, "openai");
    url = h.ts.url;
  });
  afterEach(async () => {
    await Promise.all(running.splice(0).map((p) => p.kill()));
    h.mock.reset();
    for (const c of workspaces.splice(0)) c();
  });
  afterAll(async () => {
    await h?.close();
  });

  const workspace = () => {
    const w = makeWorkspace();
    workspaces.push(w.cleanup);
    return w.dir;
  };
  const exec = (...args: string[]) => runCli(["exec", ...args, "--url", url]);

  it("runs the thread in the caller's directory, also when continuing a thread from elsewhere", async () => {
    const first = workspace();
    const second = workspace();
    h.mock.enqueue({ text: "one" }, { text: "two" });
    const p = await runCli(["exec", "Where am I?", "--url", url], { cwd: first });
    expect(p.exit, p.stderr).toEqual({ code: 0, signal: null });
    expect(p.stderr).toContain(` · in ${first} · `);
    const threadId = threadIdOf(p);
    const c = await TestClient.initialized(url);
    try {
      expect((await c.request("thread/resume", { threadId, excludeTurns: true })).cwd).toBe(first);
      const q = await runCli(["exec", "And now?", "--url", url, "--thread", threadId], { cwd: second });
      expect(q.exit, q.stderr).toEqual({ code: 0, signal: null });
      expect(q.stderr).toContain(` · in ${second} · `);
      // The second turn's request carried the new directory (turn/start's cwd override).
      const read = await c.request("thread/read", { threadId, includeTurns: true });
      expect(read.thread.turns).toHaveLength(2);
      expect(JSON.stringify(h.mock.requests[1]!.body)).toContain(second);
    } finally {
      await c.close();
    }
  });

  it("--cwd that does not exist (or is a file) is a usage error before any turn", async () => {
    const requests = h.mock.requests.length;
    const missing = await exec("Hello", "--cwd", "/nonexistent/dir");
    expect(missing.exit).toEqual({ code: 2, signal: null });
    expect(missing.stderr).toContain("app-server exec: --cwd /nonexistent/dir: no such directory");
    expect(missing.stdout).toBe("");
    const file = path.join(workspace(), "a-file");
    writeFileSync(file, "x");
    const notDir = await exec("Hello", "--cwd", file);
    expect(notDir.exit.code).toBe(2);
    expect(notDir.stderr).toContain(`--cwd ${file}: not a directory`);
    expect(h.mock.requests.length).toBe(requests);
  });

  it("streams the agent's text to stdout and exits 0; the rest goes to stderr", async () => {
    h.mock.enqueue({ text: ["Hello ", "from ", "the mock."] });
    const p = await exec("Say hello");
    expect(p.exit, p.stderr).toEqual({ code: 0, signal: null });
    expect(p.stdout).toBe("Hello from the mock.");
    expect(p.stderr).toMatch(/thread [0-9a-f-]{36} · mock-model \(openai\)/);
    expect(p.stderr).toContain("✓ turn completed");
    // The prompt reached the model.
    expect(JSON.stringify(h.mock.requests[0]!.body)).toContain("Say hello");
  });

  it("--approve always: the command runs, its output and exit status are shown", async () => {
    const ws = workspace();
    h.mock.enqueue({ toolCalls: [{ name: "shell", arguments: { command: MARK_COMMAND } }] }, { text: "It ran once." });
    const p = await exec("Mark it", "--approve", "always", "--approval-policy", "untrusted", "--cwd", ws);
    expect(p.exit, p.stderr).toEqual({ code: 0, signal: null });
    expect(markerCount(ws)).toBe(1);
    expect(p.stdout).toBe("It ran once.");
    const err = p.stderrLines;
    expect(err).toContain(`$ ${MARK_COMMAND}`);
    expect(err.some((l) => l.startsWith("approved: run `") && l.endsWith("(--approve always)"))).toBe(true);
    expect(err).toContain("ran-1");
    expect(err.some((l) => /^ {2}✓ exit 0/.test(l))).toBe(true);
    expect(p.stderr).toContain(`in ${ws}`);
  });

  it("--approve never: the command is declined and never runs; the turn still completes", async () => {
    const ws = workspace();
    h.mock.enqueue({ toolCalls: [{ name: "shell", arguments: { command: MARK_COMMAND } }] }, { text: "You declined." });
    const p = await exec("Mark it", "--approve", "never", "--approval-policy", "untrusted", "--cwd", ws);
    expect(p.exit, p.stderr).toEqual({ code: 0, signal: null });
    expect(markerCount(ws)).toBe(0);
    expect(p.stdout).toBe("You declined.");
    expect(p.stderrLines.some((l) => l.startsWith("declined: run `") && l.endsWith("(--approve never)"))).toBe(true);
    expect(p.stderrLines).toContain("  declined");
  });

  it("--approve ask without a terminal declines and says why", async () => {
    const ws = workspace();
    h.mock.enqueue({ toolCalls: [{ name: "shell", arguments: { command: MARK_COMMAND } }] }, { text: "Declined again." });
    const p = await exec("Mark it", "--approval-policy", "untrusted", "--cwd", ws);
    expect(p.exit, p.stderr).toEqual({ code: 0, signal: null });
    expect(markerCount(ws)).toBe(0);
    expect(p.stderr).toContain("approval needed but stdin is not a terminal");
  });

  it("--approve ask prompts on the terminal: y runs the command, n declines, anything else asks again", async () => {
    const ws = workspace();
    h.mock.enqueue(
      { toolCalls: [{ name: "shell", arguments: { command: MARK_COMMAND } }] },
      { toolCalls: [{ name: "shell", arguments: { command: MARK_COMMAND } }] },
      { text: "Asked twice." },
    );
    // script(1) runs exec on a pseudo-terminal (stdin and stderr are a TTY, as for a person).
    const cmd = [process.execPath, ...cliArgv(), "exec", "'Mark twice'", "--url", url, "--approval-policy", "untrusted", "--cwd", ws].join(" ");
    const child = spawn("script", ["-qfec", cmd, "/dev/null"], { cwd: REPO_ROOT, env: { ...cleanEnv(), NO_COLOR: "1" }, stdio: ["pipe", "pipe", "pipe"] });
    const answers = ["what", "y", "n"];
    let screen = "";
    let answered = 0;
    child.stdout.on("data", (d: Buffer) => {
      screen += d.toString();
      const prompts = screen.split("[c] cancel the turn > ").length - 1;
      while (answered < Math.min(prompts, answers.length)) child.stdin.write(`${answers[answered++]}\r`);
    });
    const closed = new Promise((resolve) => child.on("close", resolve));
    onTestFinished(() => {
      if (child.exitCode === null) child.kill("SIGKILL");
    });
    const code = await closed;
    expect(code, screen).toBe(0);
    expect(answered).toBe(3);
    expect(markerCount(ws)).toBe(1);
    expect(screen).toContain(`Allow the agent to run \`${MARK_COMMAND}\` in ${ws}?`);
    expect(screen).toContain("ran-1");
    expect(screen).toContain("  declined");
    expect(screen).toContain("Asked twice.");
  });

  it("--approve ask offers the proposed rule as [p]: saved, it answers the next matching command", async () => {
    const ws = workspace();
    h.mock.enqueue(
      { toolCalls: [{ name: "shell", arguments: { command: "touch p1.txt" } }] },
      { toolCalls: [{ name: "shell", arguments: { command: "touch p1.txt p2.txt" } }] },
      { text: "Asked once." },
    );
    const cmd = [process.execPath, ...cliArgv(), "exec", "'Touch twice'", "--url", url, "--approval-policy", "untrusted", "--cwd", ws].join(" ");
    const child = spawn("script", ["-qfec", cmd, "/dev/null"], { cwd: REPO_ROOT, env: { ...cleanEnv(), NO_COLOR: "1" }, stdio: ["pipe", "pipe", "pipe"] });
    let screen = "";
    let answered = false;
    child.stdout.on("data", (d: Buffer) => {
      screen += d.toString();
      if (answered || !screen.includes("[c] cancel the turn > ")) return;
      answered = true;
      child.stdin.write("p\r");
    });
    const closed = new Promise((resolve) => child.on("close", resolve));
    onTestFinished(() => {
      if (child.exitCode === null) child.kill("SIGKILL");
    });
    expect(await closed, screen).toBe(0);
    expect(screen.split("[c] cancel the turn > ").length - 1).toBe(1);
    expect(screen).toContain("[p] yes, and don't ask again for commands that start with `touch p1.txt`");
    expect(existsSync(path.join(ws, "p1.txt")) && existsSync(path.join(ws, "p2.txt"))).toBe(true);
    expect(screen).toContain("Asked once.");
  });

  it("--json prints every notification as one JSON line on stdout", async () => {
    const ws = workspace();
    h.mock.enqueue({ toolCalls: [{ name: "shell", arguments: { command: "echo json-mode" } }] }, { text: ["Do", "ne."] });
    const p = await exec("Echo", "--json", "--cwd", ws);
    expect(p.exit, p.stderr).toEqual({ code: 0, signal: null });
    const lines = p.stdoutLines.filter((l) => l !== "");
    const frames = lines.map((l) => JSON.parse(l));
    expect(frames.every((f) => f.jsonrpc === "2.0" && typeof f.method === "string" && f.id === undefined)).toBe(true);
    const methods = frames.map((f) => f.method);
    expect(methods).toContain("thread/started");
    expect(methods).toContain("item/agentMessage/delta");
    expect(methods[methods.length - 1]).toBe("turn/completed");
    const command = frames.find((f) => f.method === "item/completed" && f.params.item.type === "commandExecution");
    expect(command.params.item).toMatchObject({ command: shellInvocation("echo json-mode"), exitCode: 0, aggregatedOutput: "json-mode\n" });
    expect(frames.filter((f) => f.method === "item/agentMessage/delta").map((f) => f.params.delta).join("")).toBe("Done.");
  });

  it("--thread continues a thread; threads lists it (text and --json)", async () => {
    h.mock.enqueue({ text: "First answer." }, { text: "Second answer." });
    const first = await exec("Remember the word kumquat");
    expect(first.exit.code, first.stderr).toBe(0);
    const threadId = threadIdOf(first);
    const second = await exec("Which word?", "--thread", threadId);
    expect(second.exit.code, second.stderr).toBe(0);
    expect(second.stdout).toBe("Second answer.");
    expect(threadIdOf(second)).toBe(threadId);
    // The second model call carried the first turn.
    expect(JSON.stringify(h.mock.requests[1]!.body)).toContain("kumquat");

    const list = await runCli(["threads", "--url", url, "--search", "kumquat"]);
    expect(list.exit.code, list.stderr).toBe(0);
    expect(list.stdoutLines.filter(Boolean)).toHaveLength(1);
    expect(list.stdout).toMatch(new RegExp(`^${threadId}  \\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d  Remember the word kumquat$`));

    const all = await runCli(["threads", "--url", url, "--json"]);
    expect(all.exit.code, all.stderr).toBe(0);
    const threads = all.stdoutLines.filter(Boolean).map((l) => JSON.parse(l));
    expect(threads.length).toBeGreaterThanOrEqual(6);
    expect(threads.map((t) => t.id)).toContain(threadId);
  });

  it("the README's dozen-line client runs a turn, approval included, with the token the server made", async () => {
    const readme = readFileSync(path.join(REPO_ROOT, "README.md"), "utf8");
    const section = readme.slice(readme.indexOf("**Your own client.**"));
    const code = section.match(/```js\n([\s\S]*?)```/)![1]!;
    expect(code.split("\n").filter(Boolean).length).toBeLessThanOrEqual(14);
    // A server that requires its token, kept where the client reads it: $HOME/.agent-app-server/auth-token.
    const token = "readme-client-token-0123456789";
    const secured = await startTurnHarness(backend, "openai", { authToken: token });
    onTestFinished(() => secured.close());
    const clientHome = mkdtempSync(path.join(os.tmpdir(), "readme-client-home-"));
    onTestFinished(() => rmSync(clientHome, { recursive: true, force: true }));
    mkdirSync(path.join(clientHome, ".agent-app-server"), { mode: 0o700 });
    writeFileSync(path.join(clientHome, ".agent-app-server", "auth-token"), `${token}\n`, { mode: 0o600 });
    // Written inside the repository so that `import "ws"` resolves.
    const file = path.join(REPO_ROOT, "test-output", `readme-client-${process.pid}.mjs`);
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, code.replace('"ws://127.0.0.1:4500"', JSON.stringify(secured.ts.url)));
    onTestFinished(() => rmSync(file, { force: true }));
    // A command outside the workspace: under the default policy (on-request) the server asks.
    secured.mock.enqueue({ toolCalls: [{ name: "shell", arguments: { command: "echo readme-approved", workdir: "/" } }] }, { text: ["Two ", "files."] });
    const child = spawn(process.execPath, [file], { cwd: REPO_ROOT, env: cleanEnv({ HOME: clientHome }), stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const exitCode = await new Promise((resolve) => child.on("close", resolve));
    expect(exitCode, stderr).toBe(0);
    expect(stdout).toBe("Two files.\n[turn completed]\n");
    // The server asked, the client accepted, the command ran.
    const c = await TestClient.connect(secured.ts.url, { headers: { authorization: `Bearer ${token}` } });
    await c.request("initialize", { clientInfo: { name: "test", title: null, version: "0.0.1" }, capabilities: {} });
    c.notify("initialized", {});
    const [thread] = (await c.request("thread/list", { limit: 1, sortKey: "created_at" })).data;
    const events = (await c.request("thread/events/list", { threadId: thread.id })).data;
    await c.close();
    const waited = events.some((e: any) => e.method === "thread/status/changed" && e.params.status.activeFlags?.includes("waitingOnApproval"));
    expect(waited).toBe(true);
    const command = events.find((e: any) => e.method === "item/completed" && e.params.item.type === "commandExecution").params.item;
    expect(command).toMatchObject({ status: "completed", exitCode: 0, aggregatedOutput: "readme-approved\n" });
  });

  it("a failed turn exits 1 with the error on stderr, said once", async () => {
    h.mock.enqueue({ kind: "error", status: 400, message: "bad request from the mock" });
    const p = await exec("Fail please");
    expect(p.exit.code, p.stderr).toBe(1);
    expect(p.stderr).toContain("✗ turn failed");
    // The error notification and the turn's end carry the same message: one line says it.
    expect(p.stderr.match(/bad request from the mock/g)).toHaveLength(1);
    expect(p.stdout).toBe("");
  });

  it("a retried model call says what failed once, then only which retry comes", async () => {
    h.mock.enqueue({ kind: "error", status: 500, message: "mock outage" }, { kind: "error", status: 500, message: "mock outage" }, { text: "recovered" });
    const p = await exec("Try again");
    expect(p.exit.code, p.stderr).toBe(0);
    const said = p.stderrLines.filter((l) => l.startsWith("! "));
    expect(said).toEqual([
      expect.stringMatching(/^! openai: HTTP 500\b.*mock outage — retrying in \d+ ms \(retry 1 of 3\)$/),
      expect.stringMatching(/^! again — retrying in \d+ ms \(retry 2 of 3\)$/),
    ]);
    expect(p.stdout).toContain("recovered");
  });

  it("Ctrl-C sends turn/interrupt and exits 130", async () => {
    h.mock.enqueue({ kind: "hang" });
    const p = spawnCli(["exec", "Wait forever", "--url", url]);
    running.push(p);
    const threadId = threadIdOf({ stderr: await p.waitForLine("stderr", (l) => l.includes("thread ")) } as CliProcess);
    await h.mock.waitForRequests(1);
    p.child.kill("SIGINT");
    const exit = await p.exited;
    expect(exit, p.stderr).toEqual({ code: 130, signal: null });
    expect(p.stderr).toContain("interrupting the turn");
    expect(p.stderr).toContain("⊘ turn interrupted");
    // The server saw the interrupt: the turn is stored as interrupted.
    const c = await TestClient.initialized(url);
    const read = await c.request("thread/read", { threadId, includeTurns: true });
    await c.close();
    expect(read.thread.turns.map((t: any) => t.status)).toEqual(["interrupted"]);
  });

  it("usage errors exit 2", async () => {
    const cases = [[], ["a", "b"], ["hi", "--approve", "sometimes"], ["hi", "--approval-policy", "maybe"], ["hi", "--bogus"]];
    const runs = await Promise.all(cases.map((args) => exec(...args)));
    for (const [i, p] of runs.entries()) {
      expect(p.exit.code, `${cases[i]!.join(" ")}: ${p.stderr}`).toBe(2);
      expect(p.stderr).toMatch(/^app-server exec: /);
    }
    expect((await runCli(["threads", "--limit", "0", "--url", url])).exit.code).toBe(2);
  });

  it("exits 1 with a readable message when the server cannot be reached", async () => {
    const p = await runCli(["exec", "hi", "--url", "ws://127.0.0.1:1"]);
    expect(p.exit.code).toBe(1);
    expect(p.stderr).toContain("could not connect to ws://127.0.0.1:1");
  });
});

describe("app-server exec and threads send the token", () => {
  it("as Authorization: Bearer (--token or APP_SERVER_AUTH_TOKEN); a 401 exits 1 and says a token may be needed", async () => {
    // A server that records the upgrade's Authorization header and refuses it.
    const seen: Array<string | undefined> = [];
    const server = http.createServer((_req, res) => res.writeHead(404).end());
    server.on("upgrade", (req, socket) => {
      seen.push(req.headers.authorization);
      socket.end("HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    onTestFinished(() => new Promise<void>((resolve) => server.close(() => resolve())));
    const url = `ws://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const [flag, env, threads] = await Promise.all([
      runCli(["exec", "hi", "--url", url, "--token", "from-the-flag-0123456789"]),
      runCli(["exec", "hi", "--url", url], { env: { APP_SERVER_AUTH_TOKEN: "from-the-env-0123456789" } }),
      runCli(["threads", "--url", url, "--token", "threads-token-0123456789"]),
    ]);
    for (const p of [flag, env, threads]) {
      expect(p.exit.code, p.stderr).toBe(1);
      expect(p.stderr).toContain("refused the connection: HTTP 401 (is a token needed? --token)");
      expect(p.stderr).not.toMatch(/from-the|threads-token/);
    }
    expect(seen.sort()).toEqual(["Bearer from-the-env-0123456789", "Bearer from-the-flag-0123456789", "Bearer threads-token-0123456789"]);
  });
});

describe("app-server exec without --url (embedded server)", () => {
  let mock: MockModelServer;
  let home: { home: string; cleanup(): Promise<void> };

  beforeAll(async () => {
    mock = await startMockModelServer();
    home = await seededHome();
  });
  afterAll(async () => {
    await mock?.close();
    await home?.cleanup();
    await removeSeed();
  });

  it("starts a server on --home, runs the turn, stops it; threads then lists the thread", async () => {
    const env = { OPENAI_BASE_URL: mock.openaiBaseUrl, OPENAI_API_KEY: "test-key", APP_SERVER_MODEL_PROVIDER: "openai", APP_SERVER_MODEL: "mock-model" };
    mock.enqueue({ text: "Embedded hello." });
    const p = await runCli(["exec", "Hello embedded", "--home", home.home, "--approve", "never"], { env });
    expect(p.exit, p.stderr).toEqual({ code: 0, signal: null });
    expect(p.stdout).toBe("Embedded hello.");
    const threadId = threadIdOf(p);
    expect(mock.requests).toHaveLength(1);
    // No server log lines in the way (errors only), and the lock was released.
    expect(p.stderrLines.filter((l) => parseJson(l) !== undefined)).toEqual([]);
    expect(() => readFileSync(`${home.home}/pglite/app-server.lock`)).toThrow();

    const list = await runCli(["threads", "--home", home.home], { env });
    expect(list.exit.code, list.stderr).toBe(0);
    expect(list.stdout).toContain(`${threadId}  `);
    expect(list.stdout).toContain("Hello embedded");
  });
});
