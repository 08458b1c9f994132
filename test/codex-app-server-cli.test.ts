/**
 * `app-server app-server [flags]` as a real child process, spawned the way Codex's IDE extension
 * spawns `codex app-server`: stdio by default, `--listen ws://…`, Codex's flags accepted (unknown
 * ones warned about on stderr, never fatal), `-c model=…`, and listen URLs it cannot serve refused.
 */
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { TestClient } from "./support/client.js";
import { parseJson, removeSeed, runCli, seededHome, spawnCli, type CliProcess, type TestHome } from "./support/process.js";

afterAll(removeSeed);

describe("app-server app-server (Codex's command line)", () => {
  const running: CliProcess[] = [];
  const homes: TestHome[] = [];
  afterEach(async () => {
    await Promise.all(running.splice(0).map((p) => p.kill()));
    for (const h of homes.splice(0)) await h.cleanup();
  });
  const start = async (args: string[]) => {
    const home = await seededHome();
    homes.push(home);
    const p = spawnCli(["app-server", ...args, "--home", home.home]);
    running.push(p);
    return { p, home: home.home };
  };
  const response = async (p: CliProcess, id: number) => JSON.parse(await p.waitForLine("stdout", (l) => parseJson(l)?.id === id && parseJson(l)?.method === undefined));

  it("speaks stdio by default; Codex flags it does not use are warned about, not fatal; -c model= sets the model", async () => {
    const { p, home } = await start(["--enable", "some_feature", "--analytics-default-enabled", "--brand-new-flag", "-c", "sandbox_mode=\"read-only\"", "-c", 'model="cfg-model"']);
    expect(await p.listening()).toBe("stdio://");
    p.writeLine({ id: 1, method: "initialize", params: { clientInfo: { name: "codex_vscode", title: null, version: "0.171.0" } } });
    expect((await response(p, 1)).result).toMatchObject({ codexHome: home });
    p.writeLine({ method: "initialized" });
    p.writeLine({ id: 2, method: "thread/start", params: {} });
    const started = await response(p, 2);
    expect(started.result.model).toBe("cfg-model");
    expect(started.result.thread.source).toBe("vscode");
    for (const flag of ["--enable", "--analytics-default-enabled", "--brand-new-flag", "sandbox_mode"]) expect(p.stderr).toContain(flag);
    p.child.stdin.end();
    expect((await p.exited).code).toBe(0);
  });

  it("--listen ws://127.0.0.1:0 serves WebSocket clients", async () => {
    const { p } = await start(["--listen", "ws://127.0.0.1:0"]);
    const url = await p.listening();
    expect(url).toMatch(/^ws:\/\/127\.0\.0\.1:\d+$/);
    const c = await TestClient.initialized(url);
    try {
      expect((await c.request("thread/start", {})).thread.id).toEqual(expect.any(String));
    } finally {
      await c.close();
    }
  });

  it.each([["unix:///tmp/codex.sock"], ["unix://"], ["off"]])("--listen %s is refused with exit 2 and a reason", async (listen) => {
    const home = await seededHome();
    homes.push(home);
    const p = await runCli(["app-server", "--listen", listen, "--home", home.home]);
    expect(p.exit.code).toBe(2);
    expect(p.stderr).toContain(`--listen ${listen} is not supported here`);
  });

  it("--help describes Codex's flags and exits 0", async () => {
    const p = await runCli(["app-server", "--help"]);
    expect(p.exit.code).toBe(0);
    expect(p.stdout).toContain("--listen URL");
    expect(p.stdout).toContain("stdio by default");
  });
});
