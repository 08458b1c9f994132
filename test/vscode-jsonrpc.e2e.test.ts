/**
 * The server driven by stock vscode-jsonrpc (the JSON-RPC library of VS Code extensions and LSP
 * clients), unmodified: over a WebSocket through a small reader/writer adapter on `ws`, and over
 * stdio of the real process with vscode-jsonrpc's own LSP (`Content-Length`) framing. Includes
 * cancellation: vscode-jsonrpc sends `$/cancelRequest` when a CancellationToken fires and expects
 * the request to be answered -32800.
 */
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import {
  AbstractMessageReader,
  AbstractMessageWriter,
  CancellationTokenSource,
  createMessageConnection,
  ResponseError,
  StreamMessageReader,
  StreamMessageWriter,
  type DataCallback,
  type Disposable,
  type Message,
  type MessageConnection,
} from "vscode-jsonrpc/node";
import WebSocket from "ws";
import { eventually } from "./support/cluster.js";
import { cleanEnv, cliArgv, REPO_ROOT, removeSeed, seededHome, type TestHome } from "./support/process.js";
import { startTestServer, type TestServer } from "./support/server.js";

const clientInfo = { name: "vscode-jsonrpc-test", title: null, version: "1.0.0" };
const REQUEST_CANCELLED = -32800;

/** vscode-jsonrpc's MessageReader over a ws socket: one JSON message per text frame. Keeps every message received. */
class WebSocketMessageReader extends AbstractMessageReader {
  private callback: DataCallback | undefined;
  readonly received: Message[] = [];
  constructor(ws: WebSocket) {
    super();
    ws.on("message", (data) => {
      const message = JSON.parse(data.toString()) as Message;
      this.received.push(message);
      this.callback?.(message);
    });
    ws.on("error", (err) => this.fireError(err));
    ws.on("close", () => this.fireClose());
  }
  listen(callback: DataCallback): Disposable {
    this.callback = callback;
    return { dispose: () => (this.callback = undefined) };
  }
}

class WebSocketMessageWriter extends AbstractMessageWriter {
  constructor(private readonly ws: WebSocket) {
    super();
  }
  async write(message: Message): Promise<void> {
    this.ws.send(JSON.stringify(message));
  }
  end(): void {}
}

/** Runs a command that records its pid and sleeps, cancels the request, and checks the answer and the process. */
async function cancelLongCommand(conn: MessageConnection, dir: string): Promise<void> {
  const pidFile = path.join(dir, `sleeper-${Math.random().toString(36).slice(2)}.pid`);
  const source = new CancellationTokenSource();
  const pending = conn.sendRequest(
    "command/exec",
    { command: ["bash", "-c", `echo $$ > ${pidFile}; exec sleep 600`], cwd: dir, timeoutMs: 600_000, sandboxPolicy: { type: "dangerFullAccess" } },
    source.token,
  );
  const pid = await eventually(async () => Number((await readFile(pidFile, "utf8").catch(() => "")).trim()), 1000, 20, `the command's pid in ${pidFile}`);
  expect(alive(pid)).toBe(true);
  source.cancel();
  const error = await pending.then(
    () => null,
    (err: unknown) => err,
  );
  expect(error).toBeInstanceOf(ResponseError);
  expect((error as ResponseError<unknown>).code).toBe(REQUEST_CANCELLED);
  // The handler's signal killed the process (it would otherwise sleep for 10 minutes).
  await eventually(async () => !alive(pid), 1000, 20, `the end of the cancelled command's process ${pid}`);

}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function handshake(conn: MessageConnection, home: string) {
  const init = await conn.sendRequest<{ codexHome: string }>("initialize", { clientInfo });
  expect(init.codexHome).toBe(home);
  await conn.sendNotification("initialized", {});
}

describe("vscode-jsonrpc over WebSocket", () => {
  let ts: TestServer | undefined;
  let ws: WebSocket | undefined;
  let conn: MessageConnection | undefined;
  afterEach(async () => {
    conn?.dispose();
    ws?.terminate();
    await ts?.close();
    ts = ws = conn = undefined;
  });

  it("initializes, starts and lists threads, gets typed errors, and cancels a running command/exec", async () => {
    ts = await startTestServer("pglite");
    ws = new WebSocket(ts.url);
    await new Promise((resolve, reject) => ws!.once("open", resolve).once("error", reject));
    const reader = new WebSocketMessageReader(ws);
    conn = createMessageConnection(reader, new WebSocketMessageWriter(ws));
    const notes: string[] = [];
    conn.onNotification((method) => void notes.push(method));
    conn.listen();

    await handshake(conn, ts.home);
    const started = await conn.sendRequest<{ thread: { id: string } }>("thread/start", { cwd: ts.home });
    const list = await conn.sendRequest<{ data: Array<{ id: string }> }>("thread/list", {});
    expect(list.data.map((t) => t.id)).toEqual([started.thread.id]);
    expect(notes).toContain("thread/started");

    const invalid = await conn.sendRequest("thread/list", { limit: "many" }).catch((e: unknown) => e);
    expect(invalid).toBeInstanceOf(ResponseError);
    expect((invalid as ResponseError<unknown>).code).toBe(-32602);

    await cancelLongCommand(conn, ts.home);
    // After the cancellation the connection carries on; the cancelled request got exactly one answer.
    expect((await conn.sendRequest<{ data: unknown[] }>("thread/list", {})).data).toHaveLength(1);
    const answers = reader.received.filter((m) => "id" in m && !("method" in m)) as unknown as Array<{ id: number; error?: { code: number } }>;
    const ids = answers.map((m) => m.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(answers.filter((m) => m.error?.code === REQUEST_CANCELLED)).toHaveLength(1);
  });
});

describe("vscode-jsonrpc over stdio (LSP framing)", () => {
  let child: ChildProcessWithoutNullStreams | undefined;
  let home: TestHome | undefined;
  afterEach(async () => {
    if (child && child.exitCode === null && child.signalCode === null) {
      child.kill("SIGKILL");
      await new Promise((r) => child!.once("close", r));
    }
    await home?.cleanup();
    child = home = undefined;
  });
  afterAll(removeSeed);

  it("frames its answers with Content-Length, serves requests, cancels a command, and exits 0 on EOF", async () => {
    home = await seededHome();
    const work = await mkdtemp(path.join(os.tmpdir(), "aas-lsp-"));
    try {
      child = spawn(process.execPath, [...cliArgv(), "serve", "--listen", "stdio://", "--home", home.home], {
        cwd: REPO_ROOT,
        env: cleanEnv(),
        stdio: ["pipe", "pipe", "pipe"],
      });
      const stdout: Buffer[] = [];
      child.stdout.on("data", (chunk: Buffer) => stdout.push(chunk));
      child.stderr.resume();
      const exited = new Promise<number | null>((resolve) => child!.once("close", (code) => resolve(code)));
      const conn = createMessageConnection(new StreamMessageReader(child.stdout), new StreamMessageWriter(child.stdin));
      conn.listen();

      await handshake(conn, home.home);
      const started = await conn.sendRequest<{ thread: { id: string; cwd: string } }>("thread/start", { cwd: work });
      expect(started.thread.cwd).toBe(work);
      const unknown = await conn.sendRequest("no/such/method", {}).catch((e: unknown) => e);
      expect((unknown as ResponseError<unknown>).code).toBe(-32601);
      await cancelLongCommand(conn, work);
      const read = await conn.sendRequest<{ thread: { id: string } }>("thread/read", { threadId: started.thread.id });
      expect(read.thread.id).toBe(started.thread.id);

      conn.dispose();
      child.stdin.end();
      expect(await exited).toBe(0);
      // Every byte on stdout is an LSP-framed message: no JSON lines, no logs.
      const text = Buffer.concat(stdout).toString("utf8");
      let rest = Buffer.from(text);
      let count = 0;
      while (rest.length > 0) {
        const m = /^Content-Length: (\d+)\r\n\r\n/.exec(rest.toString("latin1", 0, 64));
        expect(m, `unframed output: ${rest.toString("utf8", 0, 80)}`).not.toBeNull();
        const start = m![0].length;
        const body = rest.subarray(start, start + Number(m![1]));
        expect(JSON.parse(body.toString("utf8")).jsonrpc).toBe("2.0");
        rest = rest.subarray(start + Number(m![1]));
        count++;
      }
      expect(count).toBeGreaterThanOrEqual(6);
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  });
});
