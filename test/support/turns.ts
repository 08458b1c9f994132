/** Helpers for end-to-end turn tests: a server wired to the mock model, and wire-order helpers. */
import { startMockModelServer, type MockModelServer } from "./mock-model-server.js";
import { startTestServer, type TestServer } from "./server.js";
import type { Backend } from "./db.js";
import { TestClient, type Frame } from "./client.js";
import { LOOKUP_TOOL } from "./wire.js";
import type { StartOptions } from "../../src/server.js";

export const PROVIDERS = ["anthropic", "openai", "openai-chat"] as const;
export type ProviderName = (typeof PROVIDERS)[number];

export interface TurnHarness {
  ts: TestServer;
  mock: MockModelServer;
  close(): Promise<void>;
}

/** Provider options pointing all three providers at one mock model server. */
export function mockProviders(mock: MockModelServer): NonNullable<StartOptions["providers"]> {
  return {
    anthropic: { baseURL: mock.anthropicBaseUrl, apiKey: "test-key" },
    openai: { baseURL: mock.openaiBaseUrl, apiKey: "test-key" },
    "openai-chat": { baseURL: mock.openaiBaseUrl, apiKey: "test-key" },
  };
}

/** A test server whose three providers all point at one mock model server. */
export async function startTurnHarness(backend: Backend, provider: ProviderName, overrides: Partial<StartOptions> = {}): Promise<TurnHarness> {
  const mock = await startMockModelServer();
  const ts = await startTestServer(backend, {
    modelProvider: provider,
    model: "mock-model",
    providers: mockProviders(mock),
    turns: { retry: { maxRetries: 3, baseDelayMs: 5, maxDelayMs: 20, maxRetryAfterMs: 50 }, ...overrides.turns },
    ...overrides,
  });
  return {
    ts,
    mock,
    close: async () => {
      await ts.close();
      await mock.close();
    },
  };
}

/** Resolves with turn/completed of `turnId`. */
export function turnCompleted(client: TestClient, turnId: string, timeoutMs = 15_000): Promise<Frame> {
  return client.waitForNotification("turn/completed", (p) => p.turn.id === turnId, timeoutMs);
}

/**
 * The methods of a thread's notifications, in arrival order, with deltas collapsed into one
 * entry per run (the number of chunks varies by provider) — for asserting the wire order.
 */
export function methodSequence(client: TestClient, threadId: string): string[] {
  const out: string[] = [];
  for (const f of client.notifications()) {
    const p = f.params ?? {};
    if (p.threadId !== threadId && p.thread?.id !== threadId) continue;
    const label = f.method === "item/started" || f.method === "item/completed" ? `${f.method}:${p.item.type}` : f.method;
    if (label.endsWith("Delta") || label.endsWith("/delta")) {
      if (out[out.length - 1] === label) continue;
    }
    out.push(label);
  }
  return out;
}

export function text(t: string) {
  return [{ type: "text", text: t, text_elements: [] }];
}

/** A harness whose model calls retry fast, a client on it, and a thread with the lookup tool (test/support/wire.ts). */
export interface LookupThread {
  h: TurnHarness;
  client: TestClient;
  threadId: string;
  /** Starts a turn with this text and resolves with the turn as it completed. */
  run(input: string): Promise<any>;
  close(): Promise<void>;
}

export async function openLookupThread(backend: Backend, provider: ProviderName, turns: NonNullable<StartOptions["turns"]> = {}): Promise<LookupThread> {
  const h = await startTurnHarness(backend, provider, { turns: { retry: { maxRetries: 2, baseDelayMs: 5, maxDelayMs: 20, maxRetryAfterMs: 50 }, ...turns } });
  const client = await TestClient.initialized(h.ts.url);
  const threadId: string = (await client.request("thread/start", { dynamicTools: [LOOKUP_TOOL] })).thread.id;
  const run = async (input: string) => {
    const { turn } = await client.request("turn/start", { threadId, input: text(input) });
    return (await turnCompleted(client, turn.id)).params.turn;
  };
  return { h, client, threadId, run, close: async () => (await client.close(), await h.close()) };
}
