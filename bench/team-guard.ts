/**
 * Issue 28: what a shared server's checks cost. Measured on a real server (in process, Postgres,
 * over a real WebSocket):
 *
 *  1. a user token's first sign-in (scrypt, once per token and process) and a later one (cached);
 *  2. thread/read of a thread as its owner with the thread loaded here (no lookup), as a user it is
 *     shared with (one indexed query), and — the baseline — as the local user with no users at all;
 *  3. thread/start of a confined user (its cwd resolved and checked against its roots) against the
 *     local user's.
 *
 * Run: npx tsx bench/team-guard.ts [--pg-url=postgres://postgres@127.0.0.1:5432/postgres]
 */
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import pino from "pino";
import WebSocket from "ws";
import { issueToken } from "../src/identity/tokens.js";
import { startServer } from "../src/server.js";
import { fmtMs, summarize } from "./lib/stats.js";

const pgUrl = process.argv.find((a) => a.startsWith("--pg-url="))?.slice(9) ?? process.env.BENCH_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
const SERVER_TOKEN = randomBytes(24).toString("hex");

/** A minimal JSON-RPC client: request → response, in order. */
async function client(url: string, token: string) {
  const ws = new WebSocket(url, { headers: { authorization: `Bearer ${token}` }, perMessageDeflate: false });
  await new Promise<void>((resolve, reject) => (ws.once("open", () => resolve()), ws.once("error", reject)));
  let next = 1;
  const pending = new Map<number, (f: any) => void>();
  ws.on("message", (d) => {
    const f = JSON.parse(d.toString());
    if (f.id !== undefined && f.method === undefined) pending.get(f.id)?.(f);
  });
  const request = (method: string, params: unknown) =>
    new Promise<any>((resolve, reject) => {
      const id = next++;
      pending.set(id, (f) => (f.error ? reject(new Error(f.error.message)) : resolve(f.result)));
      ws.send(JSON.stringify({ id, method, params }));
    });
  await request("initialize", { clientInfo: { name: "bench", title: null, version: "1" }, capabilities: {} });
  return { request, close: () => ws.close() };
}

async function timed(n: number, fn: () => Promise<unknown>): Promise<number[]> {
  for (let i = 0; i < Math.min(20, n); i++) await fn(); // warm-up
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await fn();
    out.push(performance.now() - t);
  }
  return out;
}

const row = (what: string, samples: number[]) => {
  const s = summarize(samples);
  console.log(`| ${what} | ${fmtMs(s.p50)} ms | ${fmtMs(s.p99)} ms |`);
};

const home = mkdtempSync(path.join(os.tmpdir(), "aas-bench-team-"));
const schema = `bench_team_${randomBytes(4).toString("hex")}`;
const server = await startServer({
  listen: "ws://127.0.0.1:0",
  databaseUrl: pgUrl,
  database: { schema },
  home,
  modelProvider: "openai",
  model: "bench",
  maxFrameBytes: 16 * 1024 * 1024,
  auth: "token-any-user",
  authToken: SERVER_TOKEN,
  log: pino({ level: "silent" }),
});
try {
  const users = server.app.team.users;
  const roots = (name: string) => {
    const dir = path.join(home, "work", name);
    mkdirSync(dir, { recursive: true });
    return [dir];
  };
  const add = async (name: string) => {
    const t = await issueToken();
    await users.add({ name, admin: false, roots: roots(name), dangerFullAccess: false, tokenId: t.tokenId, tokenHash: t.hash });
    return t.token;
  };
  const [aliceToken, bobToken] = [await add("alice"), await add("bob")];

  console.log("| what | p50 | p99 |\n|---|---|---|");
  const first: number[] = [];
  for (let i = 0; i < 5; i++) {
    const token = await add(`u${i}`);
    const t = performance.now();
    (await client(server.url, token)).close();
    first.push(performance.now() - t);
  }
  row("connect + initialize, a token's first sign-in (scrypt N=2^15)", first);
  row("connect + initialize, the same token again (cached)", await timed(50, async () => (await client(server.url, aliceToken)).close()));
  row("connect + initialize, the server's token (local user)", await timed(50, async () => (await client(server.url, SERVER_TOKEN)).close()));

  const [local, alice, bob] = [await client(server.url, SERVER_TOKEN), await client(server.url, aliceToken), await client(server.url, bobToken)];
  const localThread = (await local.request("thread/start", {})).thread.id;
  const alicesThread = (await alice.request("thread/start", {})).thread.id;
  await alice.request("thread/share", { threadId: alicesThread, user: "bob", access: "read" });
  row("thread/read, local user, its own loaded thread", await timed(300, () => local.request("thread/read", { threadId: localThread })));
  row("thread/read, owner, loaded here (no lookup)", await timed(300, () => alice.request("thread/read", { threadId: alicesThread })));
  row("thread/read, a user it is shared with (one lookup)", await timed(300, () => bob.request("thread/read", { threadId: alicesThread })));
  row("thread/start + unsubscribe, local user", await timed(100, async () => local.request("thread/unsubscribe", { threadId: (await local.request("thread/start", { ephemeral: true })).thread.id })));
  row("thread/start + unsubscribe, confined user (cwd checked, audited)", await timed(100, async () => alice.request("thread/unsubscribe", { threadId: (await alice.request("thread/start", { ephemeral: true })).thread.id })));
  for (const c of [local, alice, bob]) c.close();
} finally {
  await server.close();
  const postgres = (await import("postgres")).default;
  const sql = postgres(pgUrl, { max: 1, onnotice: () => {} });
  await sql`drop schema if exists ${sql(schema)} cascade`;
  await sql.end();
  rmSync(home, { recursive: true, force: true });
}
console.log(`load average: ${os.loadavg().map((l) => l.toFixed(2)).join(" ")}`);
