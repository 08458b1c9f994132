/** The `app-server` command as a real process: help, schema generation, serve, signals, config errors. */
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { TestClient } from "./support/client.js";
import { TEST_DATABASE_URL } from "./support/db.js";
import { parseJson, postgresSchemaUrl, REPO_ROOT, runCli, removeSeed, seededHome, spawnCli, type CliProcess } from "./support/process.js";

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
  it("--help exits 0 and lists the commands and serve's options", async () => {
    for (const args of [["--help"], ["-h"], [], ["serve", "--help"]]) {
      const p = await runCli(args);
      expect(p.exit, args.join(" ")).toEqual({ code: 0, signal: null });
      expect(p.stdout).toContain("serve");
      expect(p.stdout).toContain("generate-json-schema");
      for (const flag of ["--listen", "--database-url", "--home", "--model-provider", "--model"]) expect(p.stdout).toContain(flag);
      for (const env of ["APP_SERVER_LISTEN", "DATABASE_URL", "APP_SERVER_HOME", "APP_SERVER_MODEL_PROVIDER", "APP_SERVER_MODEL"]) expect(p.stdout).toContain(env);
    }
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
    ["a listen URL that is not a URL", ["--listen", "not a url"], /invalid listen URL: not a url/],
    ["a listen URL with another scheme", ["--listen", "http://127.0.0.1:4500"], /unsupported listen URL scheme: http:/],
    ["a listen port out of range", ["--listen", "ws://127.0.0.1:99999"], /invalid listen URL/],
    ["an unknown model provider", ["--model-provider", "gemini"], /unknown model provider: gemini/],
    ["a bad --max-frame-bytes", ["--max-frame-bytes", "lots"], /invalid max frame size: lots/],
  ])("%s", async (_what, args, message) => {
    const p = await runCli(["serve", ...args], { env: { APP_SERVER_HOME: path.join(os.tmpdir(), "aas-never-created") } });
    expect(p.exit).toEqual({ code: 2, signal: null });
    expect(p.stderr).toMatch(message);
    expect(p.stderr).toMatch(/^app-server: /m);
    expect(p.stdout).toBe("");
  });

  it.each(["ws://0.0.0.0:0", "ws://192.168.1.10:0", "ws://[::]:0", "ws://example.com:0", "ws://127.0.0.1.nip.io:0"])(
    "refuses the non-loopback listen address %s",
    async (listen) => {
      const p = await runCli(["serve", "--listen", listen]);
      expect(p.exit.code).toBe(2);
      expect(p.stderr).toMatch(/refusing to listen on non-loopback address/);
    },
  );

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
    expect(p.stderr).toMatch(/could not start/);
    expect(p.stderr).not.toContain("s3cr3t-pw");
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
    expect(url).toMatch(/^ws:\/\/127\.0\.0\.1:\d+$/);
    expect(url).not.toBe("ws://127.0.0.1:0");
    const ready = await fetch(`${httpOf(url)}/readyz`);
    expect(ready.status).toBe(200);
    expect((await fetch(`${httpOf(url)}/healthz`)).status).toBe(200);

    const c = await TestClient.initialized(url);
    const { thread } = await c.request("thread/start", {});
    expect(thread.modelProvider).toBe("openai");

    p.child.kill(signal);
    await c.closed;
    expect(c.closeCode).toBe(1001);
    expect(await p.exited).toEqual({ code: 0, signal: null });
    const msgs = p.stderrLines.map((l) => parseJson(l));
    expect(msgs.every((m) => m !== undefined)).toBe(true); // stderr holds JSON lines only
    expect(msgs.find((m) => m.msg === "shutting down")).toMatchObject({ reason: signal });
    expect(msgs.map((m) => m.msg)).toContain("stopped");
    expect(p.stdout).toBe("");
    await expect(fetch(`${httpOf(url)}/healthz`)).rejects.toThrow();
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
    expect((await readFile(path.join(h, "pglite", "app-server.lock"), "utf8")).trim()).toBe(String(first.child.pid));

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
