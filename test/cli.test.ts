/** The `app-server` command as a real process: help, schema generation, serve, signals, config errors. */
import { existsSync, statSync } from "node:fs";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { TestClient } from "./support/client.js";
import { TEST_DATABASE_URL } from "./support/db.js";
import { parseJson, postgresSchemaUrl, REPO_ROOT, runCli, removeSeed, seededHome, spawnCli, type CliProcess } from "./support/process.js";
import { startMockModelServer } from "./support/mock-model-server.js";
import { quietHome } from "./support/server.js";
import { SERVE_OPTIONS } from "../src/config.js";
import { EXEC_OPTIONS } from "../src/client/exec.js";
import { THREADS_OPTIONS } from "../src/client/threads.js";

const clientInfo = { name: "cli-test", title: null, version: "1.0.0" };

const running: CliProcess[] = [];
const cleanups: Array<() => Promise<void>> = [];

afterEach(async () => {
  await Promise.all(running.splice(0).map((p) => p.kill()));
  for (const c of cleanups.splice(0)) await c();
});
afterAll(removeSeed);

async function home(): Promise<string> {
  const h = await seededHome();
  cleanups.push(h.cleanup);
  return h.home;
}

function serve(args: string[], env: Record<string, string> = {}): CliProcess {
  const p = spawnCli(["serve", ...args], { env });
  running.push(p);
  return p;
}

const httpOf = (wsUrl: string) => wsUrl.replace(/^ws:/, "http:");

describe.concurrent("app-server --help, --version, unknown commands", () => {
  it("--help exits 0 and lists the commands, pointing at each command's own help", async () => {
    for (const args of [["--help"], ["-h"], []]) {
      const p = await runCli(args);
      expect(p.exit, args.join(" ")).toEqual({ code: 0, signal: null });
      for (const command of ["serve", "exec", "threads", "generate-json-schema", "app-server"]) expect(p.stdout).toContain(`app-server ${command}`);
      expect(p.stdout).toContain("app-server COMMAND --help");
    }
  });

  // Every flag a command accepts is in its own help (the option tables are the parsers' own).
  it.each([
    ["serve", Object.keys(SERVE_OPTIONS)],
    ["exec", Object.keys(EXEC_OPTIONS)],
    ["threads", Object.keys(THREADS_OPTIONS)],
    ["generate-json-schema", ["out"]],
  ])("%s --help prints that command's help with every flag it takes", async (command, flags) => {
    const [p, alias] = await Promise.all([runCli([command, "--help"]), runCli(["help", command])]);
    expect(p.exit).toEqual({ code: 0, signal: null });
    expect(p.stdout).toMatch(new RegExp(`^Usage: app-server ${command}`));
    for (const flag of flags) expect(p.stdout, `--${flag}`).toMatch(new RegExp(`--${flag}\\b`));
    expect(alias.stdout).toBe(p.stdout);
    // Not the global help.
    expect(p.stdout).not.toContain("app-server COMMAND --help");
  });

  it("serve --help names the environment variable of each setting", async () => {
    const p = await runCli(["serve", "--help"]);
    for (const env of ["APP_SERVER_LISTEN", "DATABASE_URL", "APP_SERVER_DATABASE_SCHEMA", "APP_SERVER_HOME", "APP_SERVER_MODEL_PROVIDER", "APP_SERVER_MODEL", "APP_SERVER_AUTH_TOKEN_FILE", "APP_SERVER_INSECURE_NO_AUTH", "APP_SERVER_ALLOWED_ORIGINS", "APP_SERVER_MAX_CONNECTIONS", "APP_SERVER_MAX_CONCURRENT_TURNS", "APP_SERVER_BWRAP", "APP_SERVER_COMMAND_ENV"])
      expect(p.stdout).toContain(env);
  });

  it("--version prints the package version", async () => {
    const p = await runCli(["--version"]);
    expect(p.exit.code).toBe(0);
    const pkg = JSON.parse(await readFile(path.join(REPO_ROOT, "package.json"), "utf8"));
    expect(p.stdout.trim()).toBe(pkg.version);
  });

  it("an unknown command exits 2 and says so", async () => {
    const p = await runCli(["frobnicate"]);
    expect(p.exit.code).toBe(2);
    expect(p.stderr).toContain("unknown command: frobnicate");
  });
});

describe("app-server generate-json-schema", () => {
  it("writes files byte-identical to protocol/schema/", async () => {
    const out = await mkdtemp(path.join(os.tmpdir(), "aas-schema-"));
    cleanups.push(() => rm(out, { recursive: true, force: true }));
    const p = await runCli(["generate-json-schema", "--out", path.join(out, "nested", "dir")]);
    expect(p.exit).toEqual({ code: 0, signal: null });
    const committedDir = path.join(REPO_ROOT, "protocol", "schema");
    const committed = (await readdir(committedDir)).sort();
    const written = (await readdir(path.join(out, "nested", "dir"))).sort();
    expect(written).toEqual(committed);
    expect(written.length).toBeGreaterThan(10);
    for (const f of committed) {
      expect(await readFile(path.join(out, "nested", "dir", f), "utf8"), f).toBe(await readFile(path.join(committedDir, f), "utf8"));
    }
    expect(p.stdout).toBe("");
  });

  it("exits 2 without --out or with an unknown flag", async () => {
    const [noOut, badFlag] = await Promise.all([runCli(["generate-json-schema"]), runCli(["generate-json-schema", "--output", "/tmp/x"])]);
    expect(noOut.exit.code).toBe(2);
    expect(noOut.stderr).toContain("--out");
    expect(badFlag.exit.code).toBe(2);
    expect(badFlag.stderr).toMatch(/--output/);
  });
});

// These processes stop before opening any database: cheap enough to run side by side.
describe.concurrent("app-server serve: configuration errors exit 2 with a clear message", () => {
  it.each([
    ["an unknown flag", ["--bogus"], /Unknown option '--bogus'/],
    ["a flag without its value", ["--listen"], /--listen/],
    ["a positional argument", ["extra"], /extra/],
    ["a listen URL that is not a URL", ["--listen", "not a url"], /invalid --listen URL: not a url/],
    ["a listen URL with another scheme", ["--listen", "http://127.0.0.1:4500"], /unsupported --listen URL scheme: http:/],
    ["a listen port out of range", ["--listen", "ws://127.0.0.1:99999"], /invalid --listen URL/],
    ["an unknown model provider", ["--model-provider", "gemini"], /unknown model provider: gemini/],
    ["a bad --max-frame-bytes", ["--max-frame-bytes", "lots"], /invalid max frame size: lots/],
    ["a database URL that is not a URL", ["--database-url", "localhost:5432/app"], /invalid --database-url: /],
    ["a database schema without a database", ["--database-schema", "aas"], /--database-schema needs a PostgreSQL database/],
  ])("%s", async (_what, args, message) => {
    const p = await runCli(["serve", ...args], { env: { APP_SERVER_HOME: path.join(os.tmpdir(), "aas-never-created") } });
    expect(p.exit).toEqual({ code: 2, signal: null });
    // One line, once: not a JSON log line repeating it.
    expect(p.stderrLines.filter(Boolean)).toHaveLength(1);
    expect(p.stderr).toMatch(message);
    expect(p.stderr).toMatch(/^app-server: /m);
    expect(p.stdout).toBe("");
  });

  it("an invalid APP_SERVER_LOG_LEVEL: one line naming the variable and the valid levels, not the logging library's internals", async () => {
    const p = await runCli(["serve"], { env: { APP_SERVER_LOG_LEVEL: "loud", APP_SERVER_HOME: path.join(os.tmpdir(), "aas-never-created") } });
    expect(p.exit).toEqual({ code: 2, signal: null });
    expect(p.stderrLines.filter(Boolean)).toEqual(['app-server: invalid log level "loud" (APP_SERVER_LOG_LEVEL): use one of trace, debug, info, warn, error, fatal, silent']);
  });

  it.each(["ws://0.0.0.0:0", "ws://192.168.1.10:0", "ws://[::]:0", "ws://example.com:0", "ws://127.0.0.1.nip.io:0"])(
    "refuses the non-loopback listen address %s",
    async (listen) => {
      const p = await runCli(["serve", "--listen", listen]);
      expect(p.exit.code).toBe(2);
      expect(p.stderr).toMatch(/refusing to listen on non-loopback address/);
    },
  );

  it("refuses a --home that is a file, saying so (not EEXIST … mkdir)", async () => {
    // Its own cleanup (not afterEach's: the tests of this block run concurrently).
    const dir = await mkdtemp(path.join(os.tmpdir(), "aas-cli-"));
    try {
      const file = path.join(dir, "not-a-dir");
      await writeFile(file, "x");
      const p = await runCli(["serve", "--home", file]);
      expect(p.exit).toEqual({ code: 2, signal: null });
      expect(p.stderr).toContain(`app-server: --home ${file} is not a directory`);
      expect(p.stderr).not.toMatch(/EEXIST|\n\s+at /);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("refuses a non-loopback address from APP_SERVER_LISTEN too", async () => {
    const p = await runCli(["serve"], { env: { APP_SERVER_LISTEN: "ws://0.0.0.0:0" } });
    expect(p.exit.code).toBe(2);
    expect(p.stderr).toMatch(/refusing to listen on non-loopback address 0\.0\.0\.0/);
  });
});

describe("app-server serve on ws://", () => {
  it("fails with exit 1 and no secret in its output when the database is unreachable", async () => {
    const h = await mkdtemp(path.join(os.tmpdir(), "aas-cli-"));
    cleanups.push(() => rm(h, { recursive: true, force: true }));
    const p = await runCli(["serve", "--listen", "ws://127.0.0.1:0", "--home", h, "--database-url", "postgres://app:s3cr3t-pw@127.0.0.1:1/app"]);
    expect(p.exit.code).toBe(1);
    // Says what failed, without the password and without a stack trace at the default log level.
    expect(p.stderr).toContain("app-server: could not start: cannot connect to the database at postgres://app:***@127.0.0.1:1/app: ECONNREFUSED");
    expect(p.stderr).not.toContain("s3cr3t-pw");
    // Said once: the only line that is not a JSON log line, and no log line repeats it.
    expect(p.stderrLines.filter((l) => l && parseJson(l) === undefined)).toEqual([expect.stringMatching(/^app-server: could not start: /)]);
    expect(p.stderr.match(/cannot connect to the database/g)).toHaveLength(1);
    expect(p.stderr).not.toMatch(/"stack"|\n\s+at /);
  });

  it("fails with exit 1 and says why when the listen port is taken", async () => {
    const blocker = net.createServer();
    await new Promise<void>((r) => blocker.listen(0, "127.0.0.1", r));
    const port = (blocker.address() as net.AddressInfo).port;
    const h = await mkdtemp(path.join(os.tmpdir(), "aas-cli-"));
    cleanups.push(async () => {
      blocker.close();
      await rm(h, { recursive: true, force: true });
    });
    const p = await runCli(["serve", "--listen", `ws://127.0.0.1:${port}`, "--home", h]);
    expect(p.exit.code).toBe(1);
    expect(p.stderr).toMatch(/could not start: .*EADDRINUSE/);
  });

  it.each(["SIGTERM", "SIGINT"] as const)("logs the real url, serves /readyz and JSON-RPC, and exits 0 on %s after closing", async (signal) => {
    const h = await home();
    const p = serve(["--listen", "ws://127.0.0.1:0", "--home", h]);
    const url = await p.listening();
    // Where new threads run: a folder of its own in the user's home, made at start — not the
    // directory serve started in (here the checkout).
    const workspace = path.join(quietHome(), "agent-workspace");
    expect((await p.waitForLog(`new threads run in ${workspace} unless the client sends a cwd`)).cwd).toBe(workspace);
    expect(url).toMatch(/^ws:\/\/127\.0\.0\.1:\d+$/);
    expect(url).not.toBe("ws://127.0.0.1:0");
    const ready = await fetch(`${httpOf(url)}/readyz`);
    expect(ready.status).toBe(200);
    expect((await fetch(`${httpOf(url)}/healthz`)).status).toBe(200);
    // The address it prints for people is the playground page.
    const page = /the playground: (\S+)$/.exec(await p.waitForLine("stdout", (l) => l.includes("the playground: ")))![1]!;
    const html = await fetch(page);
    expect(html.status).toBe(200);
    expect(html.headers.get("content-type")).toMatch(/^text\/html/);

    const c = await TestClient.initialized(url);
    const { thread } = await c.request("thread/start", {});
    expect(thread.modelProvider).toBe("openai");
    expect(thread.cwd).toBe(workspace);
    expect(statSync(workspace).isDirectory()).toBe(true);

    p.child.kill(signal);
    await c.closed;
    expect(c.closeCode).toBe(1001);
    expect(await p.exited).toEqual({ code: 0, signal: null });
    const msgs = p.stderrLines.map((l) => parseJson(l));
    expect(msgs.every((m) => m !== undefined)).toBe(true); // stderr holds JSON lines only
    expect(msgs.find((m) => m.msg === "shutting down")).toMatchObject({ reason: signal });
    expect(msgs.map((m) => m.msg)).toContain("stopped");
    expect(p.stdout).toBe(`app-server is listening on ${url}; the playground: ${httpOf(url)}/`);
    await expect(fetch(`${httpOf(url)}/healthz`)).rejects.toThrow();
  });

  it("a second SIGINT while it stops (npm start delivers one Ctrl-C twice) does not cut the graceful stop short", async () => {
    const p = serve(["--listen", "ws://127.0.0.1:0", "--home", await home()]);
    await p.listening();
    p.child.kill("SIGINT");
    await p.waitForLog("shutting down");
    if (!p.exit) p.child.kill("SIGINT");
    expect(await p.exited).toEqual({ code: 0, signal: null });
    expect(p.stderrLines.map((l) => parseJson(l)?.msg)).toContain("stopped");
  });

  it("takes listen, home, model provider and model from the environment, flags winning over it", async () => {
    const h = await home();
    const p = serve([], {
      APP_SERVER_LISTEN: "ws://127.0.0.1:0",
      APP_SERVER_HOME: h,
      APP_SERVER_MODEL_PROVIDER: "anthropic",
      APP_SERVER_MODEL: "env-model",
    });
    const url = await p.listening();
    expect(url).toMatch(/^ws:\/\/127\.0\.0\.1:\d+$/);
    const c = await TestClient.connect(url);
    const init = await c.request("initialize", { clientInfo });
    expect(init.codexHome).toBe(h);
    const started = await c.request("thread/start", {});
    expect(started).toMatchObject({ model: "env-model", modelProvider: "anthropic" });
    await c.close();
    p.child.kill("SIGTERM");
    expect((await p.exited).code).toBe(0);

    const other = await home();
    const q = serve(["--home", other, "--model", "flag-model"], {
      APP_SERVER_LISTEN: "ws://127.0.0.1:0",
      APP_SERVER_HOME: h,
      APP_SERVER_MODEL: "env-model",
    });
    const c2 = await TestClient.connect(await q.listening());
    expect((await c2.request("initialize", { clientInfo })).codexHome).toBe(other);
    expect((await c2.request("thread/start", {})).model).toBe("flag-model");
    await c2.close();
    q.child.kill("SIGTERM");
    expect((await q.exited).code).toBe(0);
  });

  it("refuses a second process on the same --home (PGlite) without disturbing the first", async () => {
    const h = await home();
    const first = serve(["--listen", "ws://127.0.0.1:0", "--home", h]);
    const url = await first.listening();
    const c = await TestClient.initialized(url);
    const before = (await c.request("thread/start", {})).thread.id;

    const second = serve(["--listen", "ws://127.0.0.1:0", "--home", h]);
    const exit = await second.exited;
    expect(exit.code).not.toBe(0);
    expect(exit.code).not.toBeNull();
    expect(second.stderr).toMatch(/data directory .* is in use by process \d+/);
    expect(second.stderr).toContain(String(first.child.pid));
    // The failed start left the first one's lock alone.
    expect((await readFile(path.join(h, "pglite", "app-server.lock"), "utf8")).split("\n")[0]).toBe(String(first.child.pid));

    // The first is untouched: it still answers, writes and reads.
    expect((await fetch(`${httpOf(url)}/readyz`)).status).toBe(200);
    const after = (await c.request("thread/start", {})).thread.id;
    const listed = (await c.request("thread/list", {})).data.map((t: { id: string }) => t.id);
    expect(listed).toEqual([after, before]);
    await c.close();
    first.child.kill("SIGTERM");
    expect((await first.exited).code).toBe(0);

    // Once the first has stopped, the home is free again and holds both threads.
    const third = serve(["--listen", "ws://127.0.0.1:0", "--home", h]);
    const c3 = await TestClient.initialized(await third.listening());
    expect((await c3.request("thread/list", {})).data.map((t: { id: string }) => t.id)).toEqual([after, before]);
    await c3.close();
  });

  it("takes over the lock of a process that was killed (SIGKILL) and keeps its data", async () => {
    const h = await home();
    const first = serve(["--listen", "ws://127.0.0.1:0", "--home", h]);
    const c = await TestClient.initialized(await first.listening());
    const id = (await c.request("thread/start", {})).thread.id;
    first.child.kill("SIGKILL");
    expect((await first.exited).signal).toBe("SIGKILL");

    const next = serve(["--listen", "ws://127.0.0.1:0", "--home", h]);
    const c2 = await TestClient.initialized(await next.listening());
    expect((await c2.request("thread/read", { threadId: id })).thread.id).toBe(id);
    await c2.close();
  });

  // Postgres only (there is no Postgres to point at without TEST_DATABASE_URL).
  if (TEST_DATABASE_URL) it("uses DATABASE_URL from the environment and logs it without the password", async () => {
    const pg = await postgresSchemaUrl();
    cleanups.push(pg.cleanup);
    const h = await home();
    const withPassword = new URL(pg.url);
    withPassword.password = "not-needed-with-trust";
    const p = serve(["--listen", "ws://127.0.0.1:0", "--home", h], { DATABASE_URL: withPassword.toString() });
    const url = await p.listening();
    const storeReady = await p.waitForLog("store ready");
    expect(storeReady.database).toMatch(/^postgres:\/\//);
    expect(p.stderr).not.toContain("not-needed-with-trust");
    const c = await TestClient.initialized(url);
    const id = (await c.request("thread/start", {})).thread.id;
    await c.close();
    // The thread is in that Postgres schema.
    const postgres = (await import("postgres")).default;
    const sql = postgres(TEST_DATABASE_URL!, { max: 1, onnotice: () => {} });
    try {
      const rows = await sql`select id from ${sql(pg.schema)}.threads`;
      expect(rows.map((r) => r.id)).toEqual([id]);
    } finally {
      await sql.end();
    }
  });
});

describe("app-server serve: warnings at start-up", () => {
  it("warns once when the provider has no API key, and not when it has one", async () => {
    const [without, withKey] = [await home(), await home()];
    const p = serve(["--listen", "ws://127.0.0.1:0", "--home", without, "--model-provider", "anthropic"], { ANTHROPIC_API_KEY: "" });
    await p.listening();
    // Only the key warnings: a machine without bubblewrap also warns that the sandbox is unavailable.
    const warnings = p.stderrLines.map(parseJson).filter((m) => m?.level === 40 && /API_KEY/.test(m.msg));
    expect(warnings.map((m) => m.msg)).toEqual([
      "ANTHROPIC_API_KEY is not set: turns with the anthropic provider will fail until it is (export it, or name a file holding it in ANTHROPIC_API_KEY_FILE, and restart)",
    ]);
    const q = serve(["--listen", "ws://127.0.0.1:0", "--home", withKey, "--model-provider", "anthropic"], { ANTHROPIC_API_KEY: "k" });
    await q.listening();
    expect(q.stderrLines.map(parseJson).filter((m) => m?.level === 40 && /API_KEY/.test(m.msg))).toEqual([]);
  });

  it("the SDK's deprecation notice for a model becomes one JSON warning, not text on every request", async () => {
    const mock = await startMockModelServer();
    cleanups.push(() => mock.close());
    const h = await home();
    const p = serve(["--listen", "ws://127.0.0.1:0", "--home", h, "--model-provider", "anthropic", "--model", "claude-sonnet-4-5"], {
      ANTHROPIC_BASE_URL: mock.anthropicBaseUrl,
      ANTHROPIC_API_KEY: "test-key",
    });
    const c = await TestClient.initialized(await p.listening());
    const { thread } = await c.request("thread/start", {});
    for (const text of ["one", "two"]) {
      mock.enqueue({ text: `reply ${text}` });
      const { turn } = await c.request("turn/start", { threadId: thread.id, input: [{ type: "text", text, text_elements: [] }] });
      await c.waitFor((m) => m.method === "turn/completed" && m.params.turn.id === turn.id);
    }
    await c.close();
    p.child.kill("SIGTERM");
    await p.exited;
    expect(mock.requests.filter((r) => r.api === "anthropic")).toHaveLength(2);
    const lines = p.stderrLines.filter((l) => l.trim() !== "");
    expect(lines.filter((l) => parseJson(l) === undefined)).toEqual([]); // JSON lines only
    const notices = lines.map(parseJson).filter((m) => /deprecated/.test(m.msg ?? ""));
    expect(notices).toHaveLength(1);
    expect(notices[0]).toMatchObject({ level: 40, component: "library" });
    expect(notices[0].msg).toContain("The model 'claude-sonnet-4-5' is deprecated");
  });
});

describe("app-server serve: stopping while it starts, and a home it cannot create", () => {
  async function tempHome(): Promise<string> {
    const h = await mkdtemp(path.join(os.tmpdir(), "aas-cli-"));
    cleanups.push(() => rm(h, { recursive: true, force: true }));
    return h;
  }

  it("SIGTERM while the database connection is being made stops it at once (exit 0), not when the connection times out", async () => {
    // Accepts TCP connections and never answers: postgres.js would wait 30 s for the handshake.
    const sockets = new Set<net.Socket>();
    const silent = net.createServer((s) => {
      sockets.add(s);
      s.on("error", () => {});
    });
    await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
    cleanups.push(async () => {
      for (const s of sockets) s.destroy();
      await new Promise((r) => silent.close(r));
    });
    const connected = new Promise<void>((r) => silent.once("connection", () => r()));
    const port = (silent.address() as net.AddressInfo).port;
    const p = serve(["--listen", "ws://127.0.0.1:0", "--home", await tempHome(), "--database-url", `postgres://app@127.0.0.1:${port}/app`]);
    await connected;
    p.child.kill("SIGTERM");
    expect(await p.exited).toEqual({ code: 0, signal: null });
    const msgs = p.stderrLines.map(parseJson);
    expect(msgs.find((m) => m?.msg === "shutting down")).toMatchObject({ reason: "SIGTERM" });
    expect(msgs.map((m) => m?.msg)).toContain("stopped");
    expect(p.stderr).not.toMatch(/could not start|CONNECT_TIMEOUT|did not stop in time/);
    expect(p.stdout).toBe(""); // it never got to serve clients
  });

  it("SIGTERM while the embedded database opens: exit 0, and the home opens again", async () => {
    const h = await tempHome();
    const args = ["--listen", "ws://127.0.0.1:0", "--home", h];
    const p = serve(args);
    // The embedded database's lock file appears as it starts to open (then the seed is unpacked and
    // PGlite started, a second or more): signal then.
    const lock = path.join(h, "pglite", "app-server.lock");
    for (let waited = 0; !existsSync(lock); waited += 10) {
      if (waited > 60_000 || p.exit) throw new Error(`no ${lock} after ${waited} ms (exit ${JSON.stringify(p.exit)}); stderr:\n${p.stderr}`);
      await new Promise((r) => setTimeout(r, 10));
    }
    p.child.kill("SIGTERM");
    expect(await p.exited).toEqual({ code: 0, signal: null });
    expect(p.stderr).not.toMatch(/could not start|did not stop in time/);
    // Nothing was left half-made: the same home serves the next start.
    const q = serve(args);
    const c = await TestClient.initialized(await q.listening());
    expect((await c.request("thread/start", {})).thread.id).toEqual(expect.any(String));
    await c.close();
    q.child.kill("SIGTERM");
    expect(await q.exited).toEqual({ code: 0, signal: null });
  });

  it("--workspace: threads without a cwd run there (made at start); one that cannot be made stops the start with one line", async () => {
    const h = await tempHome();
    const workspace = path.join(h, "projects", "ws");
    const p = serve(["--listen", "ws://127.0.0.1:0", "--home", path.join(h, "home")], { APP_SERVER_WORKSPACE: workspace });
    const c = await TestClient.initialized(await p.listening());
    expect((await c.request("thread/start", {})).thread.cwd).toBe(workspace);
    // A cwd the client sends wins.
    expect((await c.request("thread/start", { cwd: h })).thread.cwd).toBe(h);
    await c.close();
    p.child.kill("SIGTERM");
    expect(await p.exited).toEqual({ code: 0, signal: null });
    expect(statSync(workspace).isDirectory()).toBe(true);

    const bad = serve(["--listen", "ws://127.0.0.1:0", "--home", path.join(h, "home"), "--workspace", `/proc/aas-ws-${process.pid}`]);
    expect(await bad.exited).toEqual({ code: 1, signal: null });
    expect(bad.stderrLines.filter((l) => l && parseJson(l) === undefined)).toEqual([
      `app-server: could not start: cannot create the workspace /proc/aas-ws-${process.pid} (--workspace / APP_SERVER_WORKSPACE): ENOENT`,
    ]);
  });

  it.runIf(process.platform === "linux")("a home it cannot create (inside /proc) fails at once with one line, where Node's recursive mkdir spins forever", async () => {
    const home = `/proc/aas-home-${process.pid}`;
    const p = serve(["--listen", "ws://127.0.0.1:0", "--home", home]);
    expect(await p.exited).toEqual({ code: 1, signal: null });
    expect(p.stderrLines.filter((l) => l && parseJson(l) === undefined)).toEqual([
      `app-server: could not start: cannot create the home directory ${home} (--home / APP_SERVER_HOME): ENOENT`,
    ]);
  });
});
