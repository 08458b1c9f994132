/** Shared fixtures for the provider adapter tests (not a test file itself). */
import { expect } from "vitest";
import type { AssistantMessage, Message, Usage } from "../../src/agent/messages.js";
import { createProvider, type ProviderId, type ProviderOptions } from "../../src/providers/index.js";
import { ProviderError, type ModelProvider, type ModelRequest, type ProviderStopReason, type ProviderStreamEvent } from "../../src/providers/types.js";
import type { MockApi, MockModelServer, RecordedRequest } from "../support/mock-model-server.js";

export const TEST_KEY = "sk-test-secret-key-0123456789";

export const API_OF: Record<ProviderId, MockApi> = {
  anthropic: "anthropic",
  openai: "openai-responses",
  "openai-chat": "openai-chat",
};

export function providerFor(id: ProviderId, mock: MockModelServer, opts: ProviderOptions = {}): ModelProvider {
  const baseURL = id === "anthropic" ? mock.anthropicBaseUrl : mock.openaiBaseUrl;
  return createProvider(id, { apiKey: TEST_KEY, baseURL, ...opts });
}

export interface Collected {
  events: ProviderStreamEvent[];
  done: { message: AssistantMessage; stopReason: ProviderStopReason; usage: Usage };
}

/** Runs one stream to the end, checking the "exactly one done, and it is last" contract. */
export async function collect(provider: ModelProvider, request: ModelRequest, signal: AbortSignal = new AbortController().signal): Promise<Collected> {
  const events: ProviderStreamEvent[] = [];
  for await (const ev of provider.stream(request, signal)) events.push(ev);
  const dones = events.filter((e) => e.type === "done");
  expect(dones).toHaveLength(1);
  const last = events[events.length - 1];
  expect(last.type).toBe("done");
  if (last.type !== "done") throw new Error("unreachable");
  return { events, done: { message: last.message, stopReason: last.stopReason, usage: last.usage } };
}

/** Runs a stream expected to fail and returns the ProviderError (events before it included). */
export async function collectError(
  provider: ModelProvider,
  request: ModelRequest,
  signal: AbortSignal = new AbortController().signal,
): Promise<{ error: ProviderError; events: ProviderStreamEvent[] }> {
  const events: ProviderStreamEvent[] = [];
  try {
    for await (const ev of provider.stream(request, signal)) events.push(ev);
  } catch (err) {
    expect(err).toBeInstanceOf(ProviderError);
    return { error: err as ProviderError, events };
  }
  throw new Error(`expected the stream to fail; got ${events.length} events ending with ${events.at(-1)?.type}`);
}

/** Replays deltas the way a UI would, to check that indices route to the final blocks. */
export function replayDeltas(events: readonly ProviderStreamEvent[]): Map<number, { text: string; summary: string[]; args: string }> {
  const out = new Map<number, { text: string; summary: string[]; args: string }>();
  const at = (i: number) => {
    let v = out.get(i);
    if (!v) out.set(i, (v = { text: "", summary: [], args: "" }));
    return v;
  };
  for (const e of events) {
    if (e.type === "textDelta" || e.type === "reasoningTextDelta") at(e.index).text += e.delta;
    else if (e.type === "reasoningSummaryDelta") {
      const s = at(e.index).summary;
      while (s.length <= e.summaryIndex) s.push("");
      s[e.summaryIndex] += e.delta;
    } else if (e.type === "toolCallDelta") at(e.index).args += e.delta;
  }
  return out;
}

export function baseRequest(messages: Message[], extra: Partial<ModelRequest> = {}): ModelRequest {
  return {
    model: "mock-model",
    system: "You are a careful coding agent.",
    tools: [
      {
        name: "read_file",
        description: "Read a file",
        inputSchema: { type: "object", properties: { path: { type: "string" } }, required: ["path"], additionalProperties: false },
      },
      {
        name: "shell",
        description: "Run a command",
        inputSchema: { type: "object", properties: { cmd: { type: "string" } }, required: ["cmd"], additionalProperties: false },
      },
    ],
    messages,
    ...extra,
  };
}

export const user = (text: string): Message => ({ role: "user", content: [{ type: "text", text }] });
export const developer = (text: string): Message => ({ role: "developer", content: [{ type: "text", text }] });
export const toolResult = (toolCallId: string, toolName: string, text: string, isError = false): Message => ({
  role: "toolResult",
  toolCallId,
  toolName,
  content: [{ type: "text", text }],
  isError,
});

/** Deep copy without any `cache_control` keys (Anthropic cache hints move between requests). */
export function stripCacheControl(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(stripCacheControl);
  if (v && typeof v === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, val] of Object.entries(v)) if (k !== "cache_control") out[k] = stripCacheControl(val);
    return out;
  }
  return v;
}

/** The conversation part of a recorded body, per API, and the static part that must not change. */
export function conversationOf(api: MockApi, req: RecordedRequest): { history: unknown[]; prefix: unknown } {
  const body = stripCacheControl(req.body) as Record<string, unknown>;
  if (api === "openai-responses") return { history: body.input as unknown[], prefix: { instructions: body.instructions, tools: body.tools } };
  return { history: body.messages as unknown[], prefix: { system: body.system, tools: body.tools } };
}

export function countCacheControl(v: unknown): number {
  if (Array.isArray(v)) return v.reduce((n: number, x) => n + countCacheControl(x), 0);
  if (v && typeof v === "object") {
    let n = "cache_control" in v ? 1 : 0;
    for (const val of Object.values(v)) n += countCacheControl(val);
    return n;
  }
  return 0;
}
