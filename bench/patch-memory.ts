/**
 * `npx tsx bench/patch-memory.ts [--app=DIR] [--mib=20,30] [--pg-url=URL]` (issue 24, item 7):
 * what one big apply_patch costs the server. The built CLI of DIR (default this tree; build it
 * first) serves on embedded PGlite (or, with --pg-url, a throwaway Postgres database), its `openai`
 * provider pointed at the bench's mock model, which answers one turn with a single apply_patch
 * call adding a file of N MiB (64-character lines). Measured per size, in a fresh server:
 *   - VmHWM (peak RSS) before the turn and at its end, and the growth;
 *   - the turn's wall time and the tool's outcome (applied, or refused by the size limit);
 *   - /healthz latency, polled every 50 ms from the start of the turn to its end (max and p99):
 *     how long the event loop was unavailable.
 * Only 127.0.0.1 traffic; every phase is bounded.
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import postgres from "postgres";
import { BenchMock } from "./lib/mock.js";
import { procMemory, spawnServer } from "./lib/proc.js";
import { StreamClient } from "./lib/stream-client.js";

const argv = process.argv.slice(2);
const opt = (name: string) => argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const ROOT = fileURLToPath(new URL("..", import.meta.url));
const APP = path.resolve(opt("app") ?? ROOT);
const SIZES = (opt("mib") ?? "20,30").split(",").map(Number);
const PG = opt("pg-url");
/** `--kind=text`: the model answers N MiB of text instead (what the same bytes cost without apply_patch). */
const KIND = opt("kind") ?? "patch";

function patchOf(mib: number): string {
  const line = "+" + "x".repeat(63);
  const lines = Math.floor((mib * 1024 * 1024) / 65);
  return ["*** Begin Patch", "*** Add File: big.txt", ...Array.from({ length: lines }, () => line), "*** End Patch"].join("\n");
}

async function healthz(url: string): Promise<number> {
  const t = performance.now();
  const r = await fetch(`${url}/healthz`);
  await r.text();
  return performance.now() - t;
}

async function one(mib: number) {
  const home = await mkdtemp(path.join(os.tmpdir(), "aas-patch-mem-"));
  const ws = await mkdtemp(path.join(os.tmpdir(), "aas-patch-ws-"));
  let dbName: string | null = null;
  let admin: postgres.Sql | null = null;
  if (PG) {
    admin = postgres(PG, { max: 1, onnotice: () => {} });
    dbName = `aas_bench_${randomBytes(4).toString("hex")}`;
    await admin.unsafe(`create database ${dbName}`);
  }
  const mock = await BenchMock.start({ text: "done" }, false);
  const server = await spawnServer({
    command: [process.execPath, path.join(APP, "bin", "app-server.js")],
    cwd: ws,
    home,
    ...(dbName ? { databaseUrl: `${PG!.replace(/\/[^/]*$/, "")}/${dbName}` } : {}),
    timeoutMs: 120_000,
    env: { OPENAI_BASE_URL: mock.openaiBaseUrl, OPENAI_API_KEY: "bench", APP_SERVER_MODEL_PROVIDER: "openai", APP_SERVER_MODEL: "mock-model", APP_SERVER_AUTH: "none" },
  });
  try {
    const c = await StreamClient.connect(server.url);
    const { thread } = await c.request("thread/start", { cwd: ws, approvalPolicy: "never", sandbox: "workspace-write" });
    await new Promise((r) => setTimeout(r, 1000));
    const before = procMemory(server.pid);
    if (KIND === "text") mock.mock.enqueue({ text: patchOf(mib) });
    else mock.mock.enqueue({ toolCalls: [{ name: "apply_patch", arguments: { patch: patchOf(mib) } }] }, { text: "done" });
    const done = c.waitFor("turn/completed", (p) => p.threadId === thread.id, 600_000);
    const t0 = performance.now();
    await c.request("turn/start", { threadId: thread.id, input: [{ type: "text", text: "write it", text_elements: [] }] });
    const lat: number[] = [];
    let finished = false;
    void done.then(() => (finished = true));
    while (!finished && performance.now() - t0 < 600_000) {
      lat.push(await healthz(server.httpUrl));
      await new Promise((r) => setTimeout(r, 50));
    }
    await done;
    const wall = (performance.now() - t0) / 1000;
    const after = procMemory(server.pid);
    const written = await stat(path.join(ws, "big.txt")).then((s) => s.size, () => 0);
    const result = mock.mock.requests.at(-1)?.rawBody ?? "";
    const outcome = written > 0 ? `applied (${(written / 1048576).toFixed(1)} MiB written)` : /too large|exceeds/.test(result) ? "refused: over the size limit" : "not applied";
    lat.sort((a, b) => a - b);
    await c.close();
    return {
      mib,
      hwmBefore: before.hwmMB,
      hwmAfter: after.hwmMB,
      growth: after.hwmMB - before.hwmMB,
      wall,
      outcome,
      healthMax: lat.at(-1) ?? NaN,
      healthP99: lat[Math.floor(lat.length * 0.99)] ?? NaN,
      polls: lat.length,
    };
  } finally {
    await server.stop();
    await mock.close();
    await rm(home, { recursive: true, force: true });
    await rm(ws, { recursive: true, force: true });
    if (admin && dbName) {
      await admin.unsafe(`drop database if exists ${dbName} with (force)`);
      await admin.end();
    }
  }
}

async function main() {
  const version = JSON.parse(await readFile(path.join(APP, "package.json"), "utf8")).version;
  console.log(`patch memory: ${APP} (${version}), ${PG ? "Postgres" : "PGlite"}`);
  console.log("| patch | peak RSS before | peak RSS after | growth | growth / size | turn | /healthz max | /healthz p99 | outcome |");
  console.log("|---|---|---|---|---|---|---|---|---|");
  for (const mib of SIZES) {
    const r = await one(mib);
    console.log(
      `| ${mib} MiB | ${r.hwmBefore.toFixed(0)} MiB | ${r.hwmAfter.toFixed(0)} MiB | ${r.growth.toFixed(0)} MiB | ${(r.growth / mib).toFixed(1)}× | ${r.wall.toFixed(1)} s | ${r.healthMax.toFixed(0)} ms | ${r.healthP99.toFixed(0)} ms | ${r.outcome} |`,
    );
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
