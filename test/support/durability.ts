/**
 * Helpers for the durability tests (test/durability-*.test.ts): comparing model request bodies as
 * prefix extensions at the granularity a provider's prompt cache sees, counting store rows, and
 * running the real server as a child process that can be killed with SIGKILL.
 */
import { afterEach, beforeEach, expect } from "vitest";
import { randomBytes } from "node:crypto";
import type { Sql } from "postgres";
import type { StartOptions } from "../../src/server.js";
import { TestClient, type Frame } from "./client.js";
import type { Backend } from "./db.js";
import type { MockModelServer, RecordedRequest } from "./mock-model-server.js";
import { spawnCli, type CliProcess } from "./process.js";
import { startTurnHarness, text, turnCompleted, type ProviderName, type TurnHarness } from "./turns.js";
import { messagesOf, stripCacheControl } from "./wire.js";

/** A deferred: a promise plus the function that resolves it (for the mock's `gate`). */
export function deferred(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}

/**
 * The conversation of a request as comparable units. Anthropic merges consecutive user-side
 * messages into one message (roles must alternate), so a request whose last user message gains a
 * block in the next request is still a cache prefix: there the unit is one content block tagged
 * with its role. Elsewhere the unit is one message/input item.
 */
export function conversationUnits(provider: ProviderName, body: unknown): string[] {
  const list = messagesOf(provider, stripCacheControl(body));
  if (provider !== "anthropic") return list.map((m) => JSON.stringify(m));
  return list.flatMap((m: any) =>
    typeof m.content === "string" ? [JSON.stringify({ role: m.role, block: { type: "text", text: m.content } })] : m.content.map((b: unknown) => JSON.stringify({ role: m.role, block: b })),
  );
}

/** The request fields that must be byte-identical across the requests of one conversation. */
export function stableFields(provider: ProviderName, body: any, opts: { sameThread?: boolean } = {}): Record<string, string> {
  const b = stripCacheControl(body);
  const keys =
    provider === "anthropic" ? ["model", "system", "tools"] : provider === "openai" ? ["model", "instructions", "tools", ...(opts.sameThread === false ? [] : ["prompt_cache_key"])] : ["model", "tools"];
  return Object.fromEntries(keys.map((k) => [k, JSON.stringify(b[k])]));
}

/**
 * `later` extends `earlier`: same system/instructions and tools, and the earlier conversation is an
 * exact prefix of the later one (serialised JSON, so key order counts: the bytes a cache sees).
 * `sameThread: false` for a fork (its own prompt_cache_key).
 */
export function expectExtends(provider: ProviderName, earlier: RecordedRequest, later: RecordedRequest, opts: { sameThread?: boolean } = {}): void {
  const a = JSON.parse(earlier.rawBody);
  const b = JSON.parse(later.rawBody);
  expect(stableFields(provider, b, opts)).toEqual(stableFields(provider, a, opts));
  const before = conversationUnits(provider, a);
  const after = conversationUnits(provider, b);
  expect(after.length, "the later request has more conversation").toBeGreaterThan(before.length);
  expect(after.slice(0, before.length)).toEqual(before);
}

/** The request carries this text somewhere in its conversation. */
export function requestMentions(req: RecordedRequest, needle: string): boolean {
  return req.rawBody.includes(needle);
}

/** How many times `needle` occurs in the raw body. */
export function occurrences(req: RecordedRequest, needle: string): number {
  return req.rawBody.split(needle).length - 1;
}

/** Row counts per table (all threads). */
export async function rowCounts(sql: Sql): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const table of ["threads", "turns", "items", "model_messages", "thread_events"]) {
    const [row] = await sql<{ n: number }[]>`select count(*)::int as n from ${sql(table)}`;
    out[table] = row!.n;
  }
  return out;
}

/** Row counts per table for one thread (threads: 1 when it exists). */
export async function threadRowCounts(sql: Sql, threadId: string): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  const [t] = await sql<{ n: number }[]>`select count(*)::int as n from threads where id = ${threadId}`;
  out.threads = t!.n;
  for (const table of ["turns", "items", "model_messages", "thread_events"]) {
    const [row] = await sql<{ n: number }[]>`select count(*)::int as n from ${sql(table)} where thread_id = ${threadId}`;
    out[table] = row!.n;
  }
  return out;
}

/** The thread-scoped notifications a client received, in arrival order. */
export function threadNotifications(client: TestClient, threadId: string): Frame[] {
  return client.notifications().filter((f) => f.params?.threadId === threadId || f.params?.thread?.id === threadId);
}

export const isDelta = (method: string) => method.endsWith("Delta") || method.endsWith("/delta");

/** Every stored event of a thread, paged through thread/events/list with `limit`. */
export async function allEvents(client: TestClient, threadId: string, afterSeq = 0, limit = 7): Promise<any[]> {
  const out: any[] = [];
  let cursor: number | null = afterSeq;
  while (cursor !== null) {
    const page: { data: any[]; nextAfterSeq: number | null } = await client.request("thread/events/list", { threadId, afterSeq: cursor, limit });
    expect(page.data.length).toBeLessThanOrEqual(limit);
    out.push(...page.data);
    cursor = page.nextAfterSeq;
    if (cursor !== null) expect(cursor).toBe(page.data[page.data.length - 1].seq);
  }
  return out;
}

// ---- the server as a child process -------------------------------------------------------------

export interface ChildServer {
  proc: CliProcess;
  url: string;
}

/** `app-server serve` on a free port with all providers pointed at the mock. */
export async function spawnServer(opts: { home: string; databaseUrl?: string; provider: ProviderName; mock: MockModelServer }): Promise<ChildServer> {
  const args = ["serve", "--listen", "ws://127.0.0.1:0", "--home", opts.home, ...(opts.databaseUrl ? ["--database-url", opts.databaseUrl] : [])];
  const proc = spawnCli(args, {
    env: {
      OPENAI_BASE_URL: opts.mock.openaiBaseUrl,
      OPENAI_API_KEY: "test",
      ANTHROPIC_BASE_URL: opts.mock.anthropicBaseUrl,
      ANTHROPIC_API_KEY: "test",
      APP_SERVER_MODEL_PROVIDER: opts.provider,
      APP_SERVER_MODEL: "mock-model",
    },
  });
  try {
    return { proc, url: await proc.listening() };
  } catch (err) {
    await proc.kill();
    throw err;
  }
}

/** A new, empty Postgres database (not a schema: the spawned server uses the URL as given). */
export async function freshPostgresDatabase(adminUrl: string): Promise<{ url: string; name: string; drop(): Promise<void> }> {
  const postgres = (await import("postgres")).default;
  const name = `aas_dur_${randomBytes(6).toString("hex")}`;
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  try {
    await admin.unsafe(`create database ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    name,
    drop: async () => {
      const sql = postgres(adminUrl, { max: 1, onnotice: () => {} });
      try {
        await sql.unsafe(`drop database if exists ${name} with (force)`);
      } finally {
        await sql.end();
      }
    },
  };
}

/**
 * Registers beforeEach/afterEach that give every test a fresh server + mock + initialized client,
 * plus helpers to run a text turn to completion and to read a thread with its turns.
 */
export function useTurnSession(backend: Backend, provider: ProviderName = "openai", overrides: Partial<StartOptions> = {}) {
  const ctx = {} as { h: TurnHarness; client: TestClient };
  beforeEach(async () => {
    ctx.h = await startTurnHarness(backend, provider, overrides);
    ctx.client = await TestClient.initialized(ctx.h.ts.url);
  });
  afterEach(async () => {
    await ctx.client?.close();
    await ctx.h?.close();
  });
  /** Runs one turn to completion; the mock answers `reply`. */
  const turn = async (threadId: string, input: string, reply = `re:${input}`) => {
    ctx.h.mock.enqueue({ text: reply });
    const { turn: t } = await ctx.client.request("turn/start", { threadId, input: text(input) });
    const done = await turnCompleted(ctx.client, t.id);
    expect(done.params.turn.status).toBe("completed");
    return { id: t.id as string, request: ctx.h.mock.requests[ctx.h.mock.requests.length - 1]! };
  };
  const read = async (threadId: string) => (await ctx.client.request("thread/read", { threadId, includeTurns: true })).thread;
  return { ctx, turn, read };
}
