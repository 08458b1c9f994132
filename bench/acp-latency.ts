/**
 * Issue 27: what the ACP bridge costs. `app-server acp` (the built CLI, dist/) driven by the ACP
 * SDK's client in this process, against the mock model server in this process too, so "the mock
 * wrote the chunk" and "the editor got it" are both process.hrtime of one process:
 *
 *   - start: spawn → initialize answered (embedded on an existing home; --remote to a running server)
 *   - per prompt (message-only turns, 5 text chunks): chunk latency = agent_message_chunk received −
 *     mock wrote that chunk; end = session/prompt answered − mock's last frame
 *   - the same turns straight over the Codex protocol (WebSocket to the server of the remote case):
 *     item/agentMessage/delta received − mock wrote it; turn/completed − mock's last frame
 *
 * Run: npm run build && npx tsx bench/acp-latency.ts [--prompts=30]
 */
import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { Readable, Writable } from "node:stream";
import { fileURLToPath } from "node:url";
import { client, ndJsonStream, type ClientConnection } from "@agentclientprotocol/sdk/unstable";
import { RpcClient } from "../src/client/rpc-client.js";
import { startMockModelServer, type ChunkSentInfo } from "../test/support/mock-model-server.js";
import { summarize, fmtMs } from "./lib/stats.js";

const arg = (name: string, def: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? def;
const PROMPTS = Number(arg("prompts", "30"));
const APP = fileURLToPath(new URL("..", import.meta.url));
const BIN = path.join(APP, "bin", "app-server.js");
const CHUNKS = ["one ", "two ", "three ", "four ", "five"];

const mock = await startMockModelServer({ defaultReply: { text: CHUNKS } });
const sent: ChunkSentInfo[] = [];
mock.onChunk = (info) => sent.push(info);
const now = () => process.hrtime.bigint();
const ms = (ns: bigint) => Number(ns) / 1e6;

function env(): NodeJS.ProcessEnv {
  const e: NodeJS.ProcessEnv = { ...process.env, OPENAI_BASE_URL: mock.openaiBaseUrl, OPENAI_API_KEY: "bench", APP_SERVER_MODEL_PROVIDER: "openai", APP_SERVER_MODEL: "mock-model", APP_SERVER_AUTH: "none" };
  for (const k of Object.keys(e)) if (k === "DATABASE_URL" || (k.startsWith("APP_SERVER_") && !["APP_SERVER_MODEL_PROVIDER", "APP_SERVER_MODEL", "APP_SERVER_AUTH"].includes(k))) delete e[k];
  return e;
}

/** The mock's text chunk frames of request `seq`, and its last frame. */
function framesOf(seq: number) {
  const mine = sent.filter((s) => s.requestSeq === seq);
  return { text: mine.filter((s) => s.textDelta !== undefined), last: mine[mine.length - 1]!.sentAtNs };
}

interface Samples {
  start: number;
  chunk: number[];
  end: number[];
}

async function viaAcp(args: string[], cwd: string): Promise<Samples> {
  const t0 = now();
  const child = spawn(process.execPath, [BIN, "acp", ...args], { cwd, env: env(), stdio: ["pipe", "pipe", "inherit"] });
  const arrivals: bigint[] = [];
  const conn: ClientConnection = client({ name: "bench" })
    .onNotification("session/update", ({ params }) => {
      if (params.update.sessionUpdate === "agent_message_chunk") arrivals.push(now());
    })
    .connect(ndJsonStream(Writable.toWeb(child.stdin) as WritableStream<Uint8Array>, Readable.toWeb(child.stdout) as ReadableStream<Uint8Array>));
  await conn.agent.request("initialize", { protocolVersion: 1, clientCapabilities: {} });
  const start = ms(now() - t0);
  const { sessionId } = await conn.agent.request("session/new", { cwd, mcpServers: [] });
  const out: Samples = { start, chunk: [], end: [] };
  for (let i = 0; i < PROMPTS + 3; i++) {
    arrivals.length = 0;
    const seq = mock.requests.length + 1;
    await conn.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: `prompt ${i}` }] });
    const done = now();
    if (i < 3) continue; // warm-up
    const { text, last } = framesOf(seq);
    text.forEach((f, k) => arrivals[k] !== undefined && out.chunk.push(ms(arrivals[k]! - f.sentAtNs)));
    out.end.push(ms(done - last));
  }
  conn.close();
  child.stdin.end();
  await new Promise((resolve) => child.on("close", resolve));
  return out;
}

async function viaCodex(url: string, cwd: string): Promise<Samples> {
  const t0 = now();
  const c = await RpcClient.connect(url);
  await c.initialize("bench");
  const start = ms(now() - t0);
  const arrivals: bigint[] = [];
  let completed: (() => void) | null = null;
  c.onNotification((method) => {
    if (method === "item/agentMessage/delta") arrivals.push(now());
    if (method === "turn/completed") completed?.();
  });
  const { thread } = await c.request("thread/start", { cwd });
  const out: Samples = { start, chunk: [], end: [] };
  for (let i = 0; i < PROMPTS + 3; i++) {
    arrivals.length = 0;
    const seq = mock.requests.length + 1;
    const ended = new Promise<void>((resolve) => (completed = resolve));
    await c.request("turn/start", { threadId: thread.id, input: [{ type: "text", text: `prompt ${i}`, text_elements: [] }] });
    await ended;
    const done = now();
    if (i < 3) continue;
    const { text, last } = framesOf(seq);
    text.forEach((f, k) => arrivals[k] !== undefined && out.chunk.push(ms(arrivals[k]! - f.sentAtNs)));
    out.end.push(ms(done - last));
  }
  await c.close();
  return out;
}

/** A running `app-server serve` on a home, until stop(). */
async function serve(home: string): Promise<{ url: string; stop(): Promise<void> }> {
  const child = spawn(process.execPath, [BIN, "serve", "--listen", "ws://127.0.0.1:0", "--home", home], { cwd: home, env: env(), stdio: ["ignore", "ignore", "pipe"] });
  const url = await new Promise<string>((resolve, reject) => {
    let buf = "";
    child.stderr.on("data", (d) => {
      buf += d;
      const m = /"msg":"listening"[^\n]*"url":"([^"]+)"|"url":"([^"]+)"[^\n]*"msg":"listening"/.exec(buf);
      if (m) resolve(m[1] ?? m[2]!);
    });
    child.on("close", () => reject(new Error(`serve exited: ${buf}`)));
  });
  return { url, stop: () => new Promise((resolve) => (child.on("close", resolve), child.kill("SIGTERM"))) };
}

const row = (label: string, s: Samples) => {
  const c = summarize(s.chunk);
  const e = summarize(s.end);
  return `| ${label} | ${s.start.toFixed(0)} | ${fmtMs(c.p50)} / ${fmtMs(c.p99)} / ${fmtMs(c.max)} | ${fmtMs(e.p50)} / ${fmtMs(e.p99)} |`;
};

const load = () => readFileSync("/proc/loadavg", "utf8").split(" ")[0];
const home = await mkdtemp(path.join(os.tmpdir(), "aas-acp-bench-"));
try {
  console.log(`### app-server acp: start, chunk and end latency (${PROMPTS} prompts of ${CHUNKS.length} chunks) — ${new Date().toISOString()}, load ${load()}\n`);
  console.log("| path | start → initialize ms | chunk: mock write → received, p50 / p99 / max | prompt end − mock's last frame, p50 / p99 |");
  console.log("|---|---|---|---|");
  // The embedded engine first creates the home (its first start; not the number reported).
  await viaAcp(["--home", home], home);
  console.log(row("ACP, embedded engine (existing home)", await viaAcp(["--home", home], home)));
  const server = await serve(home);
  try {
    console.log(row("ACP --remote (bridge → WebSocket → server)", await viaAcp(["--remote", server.url], home)));
    console.log(row("Codex protocol, straight to the server", await viaCodex(server.url, home)));
  } finally {
    await server.stop();
  }
} finally {
  await mock.close();
  await rm(home, { recursive: true, force: true });
}
console.log(`\nload after: ${load()}`);
