/**
 * The README's commands, run as written (through bash, from the README's own text), with only what cannot run here replaced, each replacement spelled out: the
 * model's endpoint is the mock model server, ports and databases are this run's, placeholders
 * (`...`) get test values, and HOME and the server's home are temporary. The last test checks that
 * every README command is run by some test or by .ci/run.
 *
 * Uses the checkout's dist/ (npm start, npx app-server, npm link): the tests that do run one after
 * another in this file, and `npm start` builds dist/ first when the sources changed.
 */
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { TestClient } from "./support/client.js";
import { CODEX_BIN, codexEnv, noCodex } from "./support/codex.js";
import { TEST_DATABASE_URL } from "./support/db.js";
import { startMockModelServer, type MockModelServer } from "./support/mock-model-server.js";
import { CliProcess, cleanEnv, parseJson, REPO_ROOT } from "./support/process.js";
import { readmeCommand, readmeCommands } from "./support/readme.js";
import { startTurnHarness, turnCompleted } from "./support/turns.js";

const text = (t: string) => [{ type: "text", text: t, text_elements: [] }];
/** Model-related variables of this machine stay out: each test says what the command gets. */
const MODEL_VARIABLES = ["OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY_FILE", "ANTHROPIC_API_KEY_FILE"];

let mock: MockModelServer;
/** HOME of this test's commands (the server's home inside it). */
let home: string;
const groups: CliProcess[] = [];
const cleanups: Array<() => unknown> = [];

beforeAll(async () => {
  mock = await startMockModelServer();
});
beforeEach(() => {
  home = realpathSync(mkdtempSync(path.join(os.tmpdir(), "aas-readme-home-")));
  cleanups.push(() => rmSync(home, { recursive: true, force: true }));
});
afterEach(async () => {
  for (const p of groups.splice(0)) {
    if (p.exit) continue;
    process.kill(-p.child.pid!, "SIGKILL");
    await p.exited;
  }
  for (const c of cleanups.splice(0).reverse()) await c();
  mock.reset();
});
afterAll(async () => mock?.close());

/**
 * Runs `script` (README commands) with bash in a process group of its own, as a terminal would,
 * with the test's HOME and `env` on top.
 */
function run(script: string, env: Record<string, string> = {}, cwd = REPO_ROOT): CliProcess {
  const base = cleanEnv({ HOME: home, APP_SERVER_HOME: serverHome(), APP_SERVER_LISTEN: "ws://127.0.0.1:0" });
  // As a user runs them: the server requires the token it generates into its home.
  delete base.APP_SERVER_AUTH;
  for (const name of MODEL_VARIABLES) delete base[name];
  const p = new CliProcess(spawn("bash", ["-c", script], { cwd, env: { ...base, ...env }, detached: true, stdio: ["pipe", "pipe", "pipe"] }) as never);
  p.child.stdin.end();
  groups.push(p);
  return p;
}

/** The home of the servers the README's commands start (the default, under the test's HOME). */
const serverHome = () => path.join(home, ".agent-app-server");

/** A client of a server the README started, with the token that server generated into its home. */
async function clientOf(url: string): Promise<TestClient> {
  const token = readFileSync(path.join(serverHome(), "auth-token"), "utf8").trim();
  const c = await TestClient.connect(url, { headers: { authorization: `Bearer ${token}` } });
  await c.request("initialize", { clientInfo: { name: "readme", title: null, version: "0.0.1" }, capabilities: {} });
  c.notify("initialized", {});
  return c;
}

/** A token for a test server, kept where the README's clients read it: <home>/auth-token. */
function tokenInHome(token: string): void {
  mkdirSync(serverHome(), { recursive: true, mode: 0o700 });
  writeFileSync(path.join(serverHome(), "auth-token"), `${token}\n`, { mode: 0o600 });
}

/** Ctrl-C: SIGINT to the whole process group. */
async function ctrlC(p: CliProcess) {
  process.kill(-p.child.pid!, "SIGINT");
  return p.exited;
}

/** The ws:// URL `npm start` prints once it listens, and the playground address next to it. */
async function listening(p: CliProcess): Promise<{ url: string; page: string }> {
  const line = await p.waitForLine("stdout", (l) => l.startsWith("app-server is listening on "));
  // Not a terminal: the line names the token's file instead of carrying the token.
  const m = /^app-server is listening on (ws:\/\/\S+); the playground: (http:\/\/\S+) \(it asks for the token: (\S+)\)$/.exec(line);
  if (m && m[3] !== path.join(serverHome(), "auth-token")) throw new Error(`the banner names another token file: ${line}`);
  if (!m) throw new Error(`unexpected banner: ${line}\nstderr:\n${p.stderr}`);
  return { url: m[1]!, page: m[2]! };
}

/** A turn on a fresh thread of the server at `url`; the thread as started. */
async function oneTurn(url: string, reply: string): Promise<{ thread: any; turn: any }> {
  const c = await clientOf(url);
  try {
    const { thread } = await c.request("thread/start", {});
    mock.enqueue({ text: reply });
    const { turn } = await c.request("turn/start", { threadId: thread.id, input: text("hi") });
    return { thread, turn: (await turnCompleted(c, turn.id, 60_000)).params.turn };
  } finally {
    await c.close();
  }
}

const keyWarnings = (p: CliProcess) => p.stderrLines.map(parseJson).filter((m) => m?.level === 40 && /API_KEY/.test(m.msg));

describe("the README's quick start", { timeout: 300_000 }, () => {
  it("npm start: builds only if needed, says where the playground is, serves it; Ctrl-C stops it", async () => {
    const p = run(readmeCommand("npm start"));
    const { page } = await listening(p);
    const html = await fetch(page);
    expect(html.status).toBe(200);
    expect(html.headers.get("content-type")).toMatch(/^text\/html/);
    expect(p.stderr).toMatch(/^(dist\/ is up to date: not building|sources changed since the last build: building|dist\/ has no build record: building)$/m);
    expect(await ctrlC(p)).toEqual({ code: 0, signal: null });
  });

  it("npx app-server --help lists the commands", async () => {
    const p = run(readmeCommand("npx app-server --help"));
    expect(await p.exited).toEqual({ code: 0, signal: null });
    for (const command of ["serve", "exec", "threads", "app-server"]) expect(p.stdout).toContain(`app-server ${command}`);
  });

  it("an Anthropic key, then npm start -- --model-provider anthropic: turns run on claude-sonnet-5-5 with that key", async () => {
    // `...` is the README's placeholder for the key; Anthropic's endpoint is the mock's here.
    const script = [readmeCommand("export ANTHROPIC_API_KEY=..."), readmeCommand("npm start -- --model-provider anthropic")].join("\n").replace("=...", "=sk-ant-readme-0123");
    const p = run(script, { ANTHROPIC_BASE_URL: mock.anthropicBaseUrl });
    const { url } = await listening(p);
    expect(keyWarnings(p)).toEqual([]);
    const { thread, turn } = await oneTurn(url, "hello from claude");
    expect(thread).toMatchObject({ modelProvider: "anthropic" });
    expect(turn.status).toBe("completed");
    const request = mock.requests.at(-1)!;
    expect(request.api).toBe("anthropic");
    // The key, as the SDK sends it (x-api-key, or a bearer token).
    expect(request.headers["x-api-key"] ?? request.headers.authorization).toMatch(/^(Bearer )?sk-ant-readme-0123$/);
    expect((request.body as { model: string }).model).toBe("claude-sonnet-5-5");
    expect(await ctrlC(p)).toEqual({ code: 0, signal: null });
  });

  it("a local OpenAI-compatible server (Ollama) needs no key: no warning, turns run on llama3.1", async () => {
    const command = readmeCommand("OPENAI_BASE_URL=http://127.0.0.1:11434/v1 npm start -- --model-provider openai-chat --model llama3.1");
    // The mock stands in for Ollama: a server on this machine too.
    const p = run(command.replace("http://127.0.0.1:11434/v1", mock.openaiBaseUrl));
    const { url } = await listening(p);
    expect(keyWarnings(p)).toEqual([]);
    const { thread, turn } = await oneTurn(url, "hello from llama");
    expect(thread).toMatchObject({ modelProvider: "openai-chat", model: "llama3.1" });
    expect(turn.status).toBe("completed");
    expect((mock.requests.at(-1)!.body as { model: string }).model).toBe("llama3.1");
    expect(await ctrlC(p)).toEqual({ code: 0, signal: null });
  });

  it("npm link, then app-server exec in another project; the IDE's path $(npm prefix -g)/bin/app-server; npm unlink -g removes it", async () => {
    // npm's global prefix is the test's own, so nothing outside it changes.
    const prefix = mkdtempSync(path.join(os.tmpdir(), "aas-readme-prefix-"));
    cleanups.push(() => rmSync(prefix, { recursive: true, force: true }));
    const npmEnv = { npm_config_prefix: prefix, PATH: `${path.join(prefix, "bin")}:${process.env.PATH}` };
    const link = run(readmeCommand("npm link"), npmEnv);
    expect((await link.exited).code, link.stderr).toBe(0);
    mkdirSync(path.join(home, "src", "my-project"), { recursive: true });
    mock.enqueue({ text: "A project of yours." });
    const exec = run(readmeCommand('cd ~/src/my-project && app-server exec "What does this repository do?"'), { ...npmEnv, OPENAI_BASE_URL: mock.openaiBaseUrl, OPENAI_API_KEY: "sk-readme-0123" });
    expect((await exec.exited).code, exec.stderr).toBe(0);
    expect(exec.stdout).toContain("A project of yours.");
    expect(exec.stderr).toContain(`in ${path.join(home, "src", "my-project")}`);
    // What the README tells the IDE extension to run.
    const ide = run('"$(npm prefix -g)/bin/app-server" --version', npmEnv);
    expect((await ide.exited).code, ide.stderr).toBe(0);
    const unlink = run("npm unlink -g agent-app-server", npmEnv);
    expect((await unlink.exited).code, unlink.stderr).toBe(0);
    expect(existsSync(path.join(prefix, "bin", "app-server"))).toBe(false);
  });
});

describe("the README's clients", { timeout: 300_000 }, () => {
  it('npx app-server exec "What does this repository do?" in the checkout: an embedded server, the answer on stdout', async () => {
    mock.enqueue({ text: "It serves coding agents." });
    const p = run(readmeCommand('npx app-server exec "What does this repository do?"'), { OPENAI_BASE_URL: mock.openaiBaseUrl, OPENAI_API_KEY: "sk-readme-0123" });
    expect((await p.exited).code, p.stderr).toBe(0);
    expect(p.stdout).toBe("It serves coding agents.");
  });

  it("npx app-server exec --url: a turn on a running server, with the token from its home", async () => {
    const token = "readme-exec-url-token-0123456789";
    const h = await startTurnHarness("pglite", "openai", { authToken: token });
    cleanups.push(() => h.close());
    tokenInHome(token);
    h.mock.enqueue({ text: "Hello there." });
    const p = run(readmeCommand('npx app-server exec "Hello" --url ws://127.0.0.1:4500').replace("ws://127.0.0.1:4500", h.ts.url));
    expect((await p.exited).code, p.stderr).toBe(0);
    expect(p.stdout).toBe("Hello there.");
  });

  it.skipIf(noCodex)("codex exec --remote: a turn through Codex's own CLI, in a git repository, with the server's token", async () => {
    const token = "readme-codex-token-0123456789ab";
    const h = await startTurnHarness("pglite", "openai", { authToken: token });
    cleanups.push(() => h.close());
    tokenInHome(token);
    const codex = codexEnv();
    cleanups.push(() => codex.cleanup());
    const project = mkdtempSync(path.join(os.tmpdir(), "aas-readme-repo-"));
    cleanups.push(() => rmSync(project, { recursive: true, force: true }));
    expect(spawnSync("git", ["init", "-q"], { cwd: project }).status).toBe(0);
    h.mock.enqueue({ text: "A git repository." });
    const command = [
      readmeCommand("export APP_TOKEN=$(cat ~/.agent-app-server/auth-token)"),
      readmeCommand('codex exec --remote ws://127.0.0.1:4500 --remote-auth-token-env APP_TOKEN "What does this repository do?"'),
    ]
      .join("\n")
      .replace("ws://127.0.0.1:4500", h.ts.url);
    // codex's own home stays codex.env's; `~` (HOME) is where the server's token is.
    const p = new CliProcess(spawn("bash", ["-c", command], { cwd: project, env: { ...codex.env, HOME: home, PATH: `${path.dirname(CODEX_BIN)}:${process.env.PATH}` }, detached: true, stdio: ["pipe", "pipe", "pipe"] }) as never);
    p.child.stdin.end();
    groups.push(p);
    expect((await p.exited).code, p.stderr).toBe(0);
    expect(p.stdout).toContain("A git repository.");
  });
});

describe.skipIf(!TEST_DATABASE_URL)("the README's PostgreSQL", { timeout: 300_000 }, () => {
  it("DATABASE_URL=… npm start: serves from that database", async () => {
    // A database of this test's own instead of agent_app (tests of other runs share the server).
    const name = `aas_readme_${process.pid}_${Date.now()}`;
    const postgres = (await import("postgres")).default;
    const admin = postgres(TEST_DATABASE_URL!, { max: 1, onnotice: () => {} });
    await admin.unsafe(`create database ${name}`);
    cleanups.push(async () => {
      await admin.unsafe(`drop database if exists ${name} with (force)`);
      await admin.end();
    });
    const server = new URL(TEST_DATABASE_URL!);
    const command = readmeCommand("DATABASE_URL=postgres://postgres@127.0.0.1:5432/agent_app npm start").replace(
      "postgres://postgres@127.0.0.1:5432/agent_app",
      `postgres://${server.username}${server.password ? `:${server.password}` : ""}@${server.host}/${name}`,
    );
    const p = run(command);
    const { url } = await listening(p);
    const c = await clientOf(url);
    const { thread } = await c.request("thread/start", {});
    await c.close();
    const [row] = await admin.unsafe(`select 1 from pg_database where datname = '${name}'`);
    expect(row).toBeDefined();
    const db = postgres({ ...Object.fromEntries(new URL(TEST_DATABASE_URL!).searchParams), host: server.hostname, port: Number(server.port || 5432), user: server.username, database: name, max: 1, onnotice: () => {} });
    expect((await db`select id from threads`).map((r) => r.id)).toEqual([thread.id]);
    await db.end();
    expect(await ctrlC(p)).toEqual({ code: 0, signal: null });
  });
});

describe("every README command", () => {
  /** The commands tests take with readmeCommand and a string literal, and the lines .ci/run runs. */
  function exercised(): Map<string, string[]> {
    const by = new Map<string, string[]>();
    const add = (command: string, where: string) => by.set(command, [...(by.get(command) ?? []), where]);
    const files = (readdirSync(path.join(REPO_ROOT, "test"), { recursive: true }) as string[]).filter((f) => f.endsWith(".ts"));
    for (const file of files) {
      const source = readFileSync(path.join(REPO_ROOT, "test", file), "utf8");
      for (const m of source.matchAll(/readmeCommand\(\s*(?:"((?:[^"\\]|\\.)*)"|'((?:[^'\\]|\\.)*)')\s*\)/g))
        add(m[1] !== undefined ? (JSON.parse(`"${m[1]}"`) as string) : m[2]!.replace(/\\'/g, "'"), `test/${file}`);
    }
    for (const line of readFileSync(path.join(REPO_ROOT, ".ci", "run"), "utf8").split("\n")) add(line.trim(), ".ci/run");
    return by;
  }

  it("is run by a test or by .ci/run, and every command a test claims is still in the README", () => {
    const commands = readmeCommands();
    expect(commands.length).toBeGreaterThan(10);
    const by = exercised();
    expect(commands.filter((c) => !by.has(c)), "README commands no test runs").toEqual([]);
    const claimed = [...by.entries()].filter(([, where]) => where.some((w) => w.startsWith("test/"))).map(([c]) => c);
    expect(claimed.filter((c) => !commands.includes(c)), "commands tests take from the README that it no longer has").toEqual([]);
  });
});
