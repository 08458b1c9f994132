/**
 * The stdio transport, end to end: the real process (`app-server serve
 * --listen stdio://`) spoken to in JSON lines, on PGlite and (when TEST_DATABASE_URL is set)
 * on Postgres.
 */
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { BACKENDS, type Backend } from "./support/db.js";
import { parseJson, postgresSchemaUrl, removeSeed, seededHome, spawnCli, type CliProcess } from "./support/process.js";

const clientInfo = { name: "stdio-test", title: null, version: "1.0.0" };

interface Target {
  home: string;
  args: string[];
  cleanup(): Promise<void>;
}

async function target(backend: Backend): Promise<Target> {
  const home = await seededHome();
  if (backend === "pglite") return { home: home.home, args: ["--home", home.home], cleanup: home.cleanup };
  const pg = await postgresSchemaUrl();
  return {
    home: home.home,
    args: ["--home", home.home, "--database-url", pg.url],
    cleanup: async () => {
      await pg.cleanup();
      await home.cleanup();
    },
  };
}

/** The JSON-RPC messages on stdout. */
const messages = (p: CliProcess) => p.stdoutLines.filter((l) => l !== "").map((l) => JSON.parse(l));

async function response(p: CliProcess, id: number | string): Promise<Record<string, any>> {
  const line = await p.waitForLine("stdout", (l) => parseJson(l)?.id === id && parseJson(l)?.method === undefined);
  return JSON.parse(line);
}

afterAll(removeSeed);

describe.each(BACKENDS)("stdio transport (%s)", (backend) => {
  const running: CliProcess[] = [];
  const cleanups: Array<() => Promise<void>> = [];
  const serve = async (t: Target, extra: string[] = []) => {
    const p = spawnCli(["serve", "--listen", "stdio://", ...t.args, ...extra]);
    running.push(p);
    return p;
  };
  const newTarget = async () => {
    const t = await target(backend);
    cleanups.push(t.cleanup);
    return t;
  };

  afterEach(async () => {
    await Promise.all(running.splice(0).map((p) => p.kill()));
    for (const c of cleanups.splice(0)) await c();
  });

  it("speaks JSON-RPC in JSON lines: stdout carries only messages, logs stay on stderr, EOF exits 0", async () => {
    const t = await newTarget();
    const p = await serve(t);
    expect(await p.listening()).toBe("stdio://");

    p.writeLine({ id: 1, method: "initialize", params: { clientInfo } });
    const init = await response(p, 1);
    expect(init).toMatchObject({ jsonrpc: "2.0", result: { codexHome: t.home, platformFamily: expect.any(String) } });
    p.writeLine({ method: "initialized" });

    p.writeLine({ jsonrpc: "2.0", id: "start", method: "thread/start", params: { cwd: t.home, model: "stdio-model" } });
    const started = await response(p, "start");
    const threadId = started.result.thread.id;
    expect(started.result).toMatchObject({ model: "stdio-model", cwd: t.home });
    const note = JSON.parse(await p.waitForLine("stdout", (l) => parseJson(l)?.method === "thread/started"));
    expect(note).toMatchObject({ jsonrpc: "2.0", params: { thread: { id: threadId }, seq: 1 }, emittedAtMs: expect.any(Number) });

    p.writeLine({ id: 3, method: "thread/list", params: {} });
    const list = await response(p, 3);
    expect(list.result.data.map((th: { id: string }) => th.id)).toEqual([threadId]);

    p.writeLine("{ not json");
    const parseError = JSON.parse(await p.waitForLine("stdout", (l) => parseJson(l)?.error?.code === -32700));
    expect(parseError).toEqual({ jsonrpc: "2.0", id: null, error: { code: -32700, message: "Parse error" } });
    p.writeLine(""); // blank lines are skipped, not parse errors
    p.writeLine({ id: 4, method: "thread/read", params: { threadId } });
    expect((await response(p, 4)).result.thread.id).toBe(threadId);

    p.child.stdin.end();
    expect(await p.exited).toEqual({ code: 0, signal: null });

    // stdout: nothing but JSON-RPC 2.0 messages, one per line.
    const out = messages(p);
    expect(out.length).toBeGreaterThanOrEqual(6);
    for (const m of out) {
      expect(m.jsonrpc).toBe("2.0");
      expect("result" in m || "error" in m || typeof m.method === "string").toBe(true);
    }
    expect(out.filter((m) => m.error)).toHaveLength(1);
    // stderr: JSON log lines only, including the listening line.
    const logs = p.stderrLines.filter((l) => l !== "").map((l) => JSON.parse(l));
    for (const l of logs) expect(l).toMatchObject({ level: expect.any(Number), time: expect.any(Number), msg: expect.any(String) });
    expect(logs.find((l) => l.msg === "listening")).toMatchObject({ url: "stdio://" });
    expect(logs.map((l) => l.msg)).toContain("stopped");
  });

  it("answers requests written just before stdin closes, then exits 0; the data persists", async () => {
    const t = await newTarget();
    const p = await serve(t);
    p.writeLine({ id: 1, method: "initialize", params: { clientInfo } });
    p.writeLine({ id: 2, method: "thread/start", params: { cwd: t.home } });
    p.writeLine({ id: 3, method: "thread/list", params: {} });
    p.child.stdin.end();
    expect(await p.exited).toEqual({ code: 0, signal: null });
    const byId = new Map(messages(p).filter((m) => m.id !== undefined).map((m) => [m.id, m]));
    expect(byId.get(1)?.result?.codexHome).toBe(t.home);
    const threadId = byId.get(2)?.result?.thread?.id;
    expect(threadId).toEqual(expect.any(String));
    expect(byId.get(3)?.result).toBeDefined();

    // A new process on the same home/database sees the thread.
    const again = await serve(t);
    again.writeLine({ id: 1, method: "initialize", params: { clientInfo } });
    again.writeLine({ id: 2, method: "thread/read", params: { threadId } });
    const read = await response(again, 2);
    expect(read.result.thread).toMatchObject({ id: threadId, cwd: t.home, status: { type: "notLoaded" } });
    again.child.stdin.end();
    expect((await again.exited).code).toBe(0);
  });

  it("answers a line longer than --max-frame-bytes with -32600 and keeps serving", async () => {
    const t = await newTarget();
    const p = await serve(t, ["--max-frame-bytes", "2048"]);
    p.writeLine({ id: 1, method: "initialize", params: { clientInfo } });
    await response(p, 1);
    p.writeLine({ id: 2, method: "thread/list", params: { searchTerm: "x".repeat(4096) } });
    const tooBig = JSON.parse(await p.waitForLine("stdout", (l) => parseJson(l)?.error?.code === -32600));
    expect(tooBig).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32600, message: expect.stringMatching(/2048/) } });
    p.writeLine({ id: 3, method: "thread/list", params: {} });
    expect((await response(p, 3)).result.data).toEqual([]);
    p.child.stdin.end();
    expect((await p.exited).code).toBe(0);
  });

  it("exits 0 on SIGTERM while a client keeps stdin open", async () => {
    const t = await newTarget();
    const p = await serve(t);
    await p.listening();
    p.writeLine({ id: 1, method: "initialize", params: { clientInfo } });
    await response(p, 1);
    p.child.kill("SIGTERM");
    expect(await p.exited).toEqual({ code: 0, signal: null });
    expect(p.stderrLines.map((l) => parseJson(l)?.msg)).toContain("stopped");
  });
});
