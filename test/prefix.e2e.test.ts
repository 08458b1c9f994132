/**
 * Prefix-stable prompts (DESIGN.md §5): every model request of a thread is an exact prefix
 * extension of the previous one — across turns with tool calls, settings changes, dynamic tools
 * registered in any order, a server restart with thread/resume, and a fork.
 */
import { mkdirSync } from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import { BACKENDS, freshDatabase, type TestDatabase } from "./support/db.js";
import { TestClient } from "./support/client.js";
import { startMockModelServer, type MockModelServer, type RecordedRequest } from "./support/mock-model-server.js";
import { canonicalPrompt, expectPrefix, expectPrefixChain } from "./support/prefix.js";
import { startServerOn, type TestServer } from "./support/server.js";
import { mockProviders, PROVIDERS, text, turnCompleted, type ProviderName } from "./support/turns.js";

const TOOLS = [
  { name: "lookup", description: "Look a key up", inputSchema: { type: "object", properties: { key: { type: "string" }, exact: { type: "boolean" } }, required: ["key"] } },
  { name: "alpha", description: "First tool", inputSchema: { properties: { n: { type: "number" } }, type: "object" } },
  { name: "zeta", description: "Last tool", inputSchema: { type: "object", required: [], properties: {} } },
];
/** The same tools, registered in another order with other key orders inside the schemas. */
const TOOLS_SHUFFLED = [
  { inputSchema: { properties: {}, required: [], type: "object" }, name: "zeta", description: "Last tool" },
  { name: "lookup", inputSchema: { required: ["key"], properties: { exact: { type: "boolean" }, key: { type: "string" } }, type: "object" }, description: "Look a key up" },
  { description: "First tool", name: "alpha", inputSchema: { type: "object", properties: { n: { type: "number" } } } },
];

interface Env {
  db: TestDatabase;
  mock: MockModelServer;
  server: TestServer;
  client: TestClient;
}

async function boot(db: TestDatabase, mock: MockModelServer, provider: ProviderName, reopen: boolean): Promise<{ server: TestServer; client: TestClient }> {
  const server = await startServerOn(
    db,
    {
      modelProvider: provider,
      model: "mock-model",
      providers: mockProviders(mock),
      turns: { retry: { maxRetries: 0, baseDelayMs: 1, maxDelayMs: 1, maxRetryAfterMs: 1 } },
    },
    reopen,
  );
  const client = await TestClient.initialized(server.url);
  client.onServerRequest("item/tool/call", (p) => ({ contentItems: [{ type: "inputText", text: `result of ${p.tool}` }], success: true }));
  return { server, client };
}

async function runTurn(client: TestClient, threadId: string, input: string, extra: Record<string, unknown> = {}): Promise<void> {
  const { turn } = await client.request("turn/start", { threadId, input: text(input), ...extra });
  const done = await turnCompleted(client, turn.id);
  expect(done.params.turn.status).toBe("completed");
}

const bodiesOf = (mock: MockModelServer, from = 0): RecordedRequest[] => mock.requests.slice(from);

let env: Partial<Env> = {};
afterEach(async () => {
  await env.client?.close();
  await env.server?.close();
  await env.mock?.close();
  await env.db?.cleanup();
  env = {};
});

async function setup(backend: (typeof BACKENDS)[number], provider: ProviderName): Promise<Env> {
  const db = await freshDatabase(backend);
  const mock = await startMockModelServer();
  const { server, client } = await boot(db, mock, provider, false);
  env = { db, mock, server, client };
  return env as Env;
}

const fastBackend = BACKENDS[BACKENDS.length - 1]!;

describe.each(PROVIDERS)("prompt prefix with %s", (provider) => {
  it("holds across turns with tool calls and a settings change", async () => {
    const { mock, client, db } = await setup(fastBackend, provider);
    const threadId = (await client.request("thread/start", { dynamicTools: TOOLS })).thread.id;
    mock.enqueue({ toolCalls: [{ name: "lookup", arguments: { key: "a" } }] }, { text: "first answer" });
    await runTurn(client, threadId, "turn one");
    mock.enqueue({ text: "second answer" });
    await runTurn(client, threadId, "turn two");
    mock.enqueue({ toolCalls: [{ name: "alpha", arguments: { n: 1 } }, { name: "zeta", arguments: {} }] }, { text: "third answer" });
    mkdirSync(`${db.home}/sub`); // a turn runs only in a directory that exists
    await runTurn(client, threadId, "turn three", { approvalPolicy: "never", cwd: `${db.home}/sub` });
    mock.enqueue({ text: "fourth answer" });
    await runTurn(client, threadId, "turn four");
    const requests = bodiesOf(mock);
    expect(requests).toHaveLength(6);
    expectPrefixChain(requests);
    // The settings change is one developer-side message appended before turn three's input.
    const beforeChange = canonicalPrompt(requests[2]!).messages.join("\n");
    const afterChange = canonicalPrompt(requests[3]!).messages.join("\n");
    expect(beforeChange).not.toContain("settings_changed");
    expect(afterChange).toContain("<approval_policy>never</approval_policy>");
    expect(afterChange.match(/settings_changed/g)?.length).toBe(2); // opening and closing tag, once
  });

  it("sends byte-identical tools whatever order they were registered in", async () => {
    const { mock, client } = await setup(fastBackend, provider);
    const a = (await client.request("thread/start", { dynamicTools: TOOLS })).thread.id;
    const b = (await client.request("thread/start", { dynamicTools: TOOLS_SHUFFLED })).thread.id;
    mock.enqueue({ text: "x" }, { text: "x" });
    await runTurn(client, a, "same input");
    await runTurn(client, b, "same input");
    const [ra, rb] = bodiesOf(mock);
    // The only thread-specific field is OpenAI's prompt_cache_key (the thread id, by design).
    const withoutKey = (r: RecordedRequest) => {
      const body = JSON.parse(r.rawBody);
      delete body.prompt_cache_key;
      return JSON.stringify(body);
    };
    expect(withoutKey(rb!)).toBe(withoutKey(ra!));
    if (provider === "anthropic") expect(rb!.rawBody).toBe(ra!.rawBody);
    const names = JSON.parse(ra!.rawBody).tools.map((t: any) => t.name ?? t.function?.name);
    expect(names).toEqual([...names].sort());
    expect(names).toEqual(expect.arrayContaining(["alpha", "lookup", "zeta", "shell", "apply_patch"]));
    if (provider === "openai") expect(JSON.parse(ra!.rawBody).prompt_cache_key).toBe(a);
  });

  it("keeps the fork's first request an extension of the parent's prefix at the fork point", async () => {
    const { mock, client } = await setup(fastBackend, provider);
    const parent = (await client.request("thread/start", { dynamicTools: TOOLS })).thread.id;
    mock.enqueue({ toolCalls: [{ name: "lookup", arguments: { key: "k" } }] }, { text: "parent one" });
    await runTurn(client, parent, "parent turn one");
    const atFork = mock.requests.length;
    const firstTurnId = (await client.request("thread/read", { threadId: parent, includeTurns: true })).thread.turns[0].id;
    mock.enqueue({ text: "parent two" });
    await runTurn(client, parent, "parent turn two");
    const fork = (await client.request("thread/fork", { threadId: parent, lastTurnId: firstTurnId })).thread.id;
    mock.enqueue({ text: "fork one" });
    await runTurn(client, fork, "fork turn one");
    const forkFirst = mock.requests[mock.requests.length - 1]!;
    expectPrefix(mock.requests[atFork - 1]!, forkFirst, "parent at fork point → fork:");
    // …and the parent's second turn is not in the fork.
    expect(canonicalPrompt(forkFirst).messages.join("\n")).not.toContain("parent turn two");
  });
});

describe.each(BACKENDS)("prompt prefix across a server restart (%s)", (backend) => {
  it.each(PROVIDERS)("holds for %s after thread/resume in a new process", async (provider) => {
    const e = await setup(backend, provider);
    const threadId = (await e.client.request("thread/start", { dynamicTools: TOOLS })).thread.id;
    e.mock.enqueue({ toolCalls: [{ name: "lookup", arguments: { key: "r" } }] }, { text: "before restart" });
    await runTurn(e.client, threadId, "turn before restart");
    await e.client.close();
    await e.server.close();
    const again = await boot(e.db, e.mock, provider, true);
    env.server = again.server;
    env.client = again.client;
    const resumed = await again.client.request("thread/resume", { threadId });
    expect(resumed.thread.turns).toHaveLength(1);
    e.mock.enqueue({ text: "after restart" });
    await runTurn(again.client, threadId, "turn after restart");
    const requests = bodiesOf(e.mock);
    expect(requests).toHaveLength(3);
    expectPrefixChain(requests);
  });
});
