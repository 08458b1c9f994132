/**
 * Helpers for the turns-wire end-to-end tests: per-provider event indices into the mock's SSE
 * streams, reading tool results and user messages back out of recorded request bodies (each
 * provider has its own shape), the full wire sequence including server requests, and stripping
 * cache markers for prefix comparisons.
 */
import { expect } from "vitest";
import type { Frame, TestClient } from "./client.js";
import type { RecordedRequest } from "./mock-model-server.js";
import type { ProviderName } from "./turns.js";

/** The client-implemented tool every tool test declares in thread/start. */
export const LOOKUP_TOOL = {
  name: "lookup",
  description: "Looks a key up in the client's table.",
  inputSchema: { type: "object", properties: { key: { type: "string" } }, required: ["key"] },
};

/** The mock's default tool-call id for call `i` of request `seq` (see mock-model-server.ts). */
export function mockCallId(provider: ProviderName, seq: number, i = 0): string {
  return provider === "anthropic" ? `toolu_mock_${seq}_${i}` : `call_mock_${seq}_${i}`;
}

/**
 * "After N events" for a text-only reply whose first text delta has just gone out: the place to
 * cut, corrupt or gate a stream halfway through the agent message.
 *   Anthropic: message_start, content_block_start, ping, delta₀ → 4
 *   Responses: created, in_progress, output_item.added, content_part.added, delta₀ → 5
 *   Chat:      role chunk, delta₀ → 2
 */
export function afterFirstTextDelta(provider: ProviderName): number {
  return { anthropic: 4, openai: 5, "openai-chat": 2 }[provider];
}

/**
 * Every thread-scoped frame, in arrival order: notifications as in methodSequence (deltas
 * collapsed per run) and server requests as `request:<method>`.
 */
export function wireSequence(client: TestClient, threadId: string): string[] {
  const out: string[] = [];
  for (const f of client.frames) {
    if (!f.method) continue;
    const p = f.params ?? {};
    if (p.threadId !== threadId && p.thread?.id !== threadId) continue;
    let label: string;
    if (f.id !== undefined) label = `request:${f.method}`;
    else if (f.method === "item/started" || f.method === "item/completed") label = `${f.method}:${p.item.type}`;
    else label = f.method;
    if ((label.endsWith("Delta") || label.endsWith("/delta")) && out[out.length - 1] === label) continue;
    out.push(label);
  }
  return out;
}

/** The thread's notifications carry strictly increasing `seq` values, in arrival order. */
export function expectSeqIncreasing(client: TestClient, threadId: string): void {
  const seqs = client
    .notifications()
    .filter((f) => f.params?.threadId === threadId || f.params?.thread?.id === threadId)
    .map((f) => f.params.seq as number);
  for (let i = 1; i < seqs.length; i++) expect(seqs[i], `seq at notification ${i}: ${JSON.stringify(seqs)}`).toBeGreaterThan(seqs[i - 1]!);
}

export function itemsCompleted(client: TestClient, type: string): any[] {
  return client
    .notifications("item/completed")
    .filter((f) => f.params.item.type === type)
    .map((f) => f.params.item);
}

export function itemsStarted(client: TestClient, type: string): any[] {
  return client
    .notifications("item/started")
    .filter((f) => f.params.item.type === type)
    .map((f) => f.params.item);
}

export function serverRequests(client: TestClient, method: string): Frame[] {
  return client.frames.filter((f) => f.method === method && f.id !== undefined);
}

export interface SentToolResult {
  callId: string;
  text: string;
  isError: boolean;
  /** Position in the provider's message/input array. */
  position: number;
}

/** The tool results a request sent back to the model, in the provider's own format. */
export function toolResultsIn(provider: ProviderName, body: any): SentToolResult[] {
  const out: SentToolResult[] = [];
  if (provider === "anthropic") {
    body.messages.forEach((m: any, position: number) => {
      if (m.role !== "user" || typeof m.content === "string") return;
      for (const b of m.content) {
        if (b.type !== "tool_result") continue;
        const text = typeof b.content === "string" ? b.content : (b.content ?? []).map((c: any) => c.text ?? "").join("");
        out.push({ callId: b.tool_use_id, text, isError: b.is_error === true, position });
      }
    });
  } else if (provider === "openai") {
    body.input.forEach((item: any, position: number) => {
      if (item.type !== "function_call_output") return;
      const text = typeof item.output === "string" ? item.output : item.output.map((c: any) => c.text ?? "").join("");
      // Responses has no error flag on a function_call_output: the text says it.
      out.push({ callId: item.call_id, text, isError: false, position });
    });
  } else {
    body.messages.forEach((m: any, position: number) => {
      if (m.role !== "tool") return;
      out.push({ callId: m.tool_call_id, text: m.content, isError: false, position });
    });
  }
  return out;
}

/** The tool calls an assistant turn in a request carries: [callId, name, position]. */
export function toolCallsIn(provider: ProviderName, body: any): Array<{ callId: string; name: string; position: number }> {
  const out: Array<{ callId: string; name: string; position: number }> = [];
  if (provider === "anthropic") {
    body.messages.forEach((m: any, position: number) => {
      if (m.role !== "assistant") return;
      for (const b of m.content) if (b.type === "tool_use") out.push({ callId: b.id, name: b.name, position });
    });
  } else if (provider === "openai") {
    body.input.forEach((item: any, position: number) => {
      if (item.type === "function_call") out.push({ callId: item.call_id, name: item.name, position });
    });
  } else {
    body.messages.forEach((m: any, position: number) => {
      for (const c of m.tool_calls ?? []) out.push({ callId: c.id, name: c.function.name, position });
    });
  }
  return out;
}

/** The plain texts of user-role input in a request, in order (Anthropic tool results excluded). */
export function userTextsIn(provider: ProviderName, body: any): string[] {
  const out: string[] = [];
  const list: any[] = provider === "openai" ? body.input : body.messages;
  for (const m of list) {
    if (m.role !== "user") continue;
    if (typeof m.content === "string") out.push(m.content);
    else for (const b of m.content) if (b.type === "text" || b.type === "input_text") out.push(b.text);
  }
  return out;
}

/** The model-facing message list of a request: Anthropic/Chat `messages`, Responses `input`. */
export function messagesOf(provider: ProviderName, body: any): any[] {
  return provider === "openai" ? body.input : body.messages;
}

/** A deep copy without any `cache_control` field (Anthropic's cache breakpoints move every call). */
export function stripCacheControl<T>(value: T): T {
  if (Array.isArray(value)) return value.map(stripCacheControl) as T;
  if (value && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) if (k !== "cache_control") out[k] = stripCacheControl(v);
    return out as T;
  }
  return value;
}

/**
 * The later request extends the earlier one: same system/instructions and tools (byte-equal JSON
 * once cache markers are stripped), and the earlier message list is an exact prefix of the later.
 */
export function expectPrefixExtension(provider: ProviderName, earlier: RecordedRequest, later: RecordedRequest): void {
  const a = stripCacheControl(JSON.parse(earlier.rawBody));
  const b = stripCacheControl(JSON.parse(later.rawBody));
  const stable = provider === "anthropic" ? ["model", "system", "tools"] : provider === "openai" ? ["model", "instructions", "tools", "prompt_cache_key"] : ["model", "tools"];
  for (const key of stable) expect(JSON.stringify(b[key]), `request field ${key}`).toBe(JSON.stringify(a[key]));
  const before = messagesOf(provider, a);
  const after = messagesOf(provider, b);
  expect(after.length).toBeGreaterThan(before.length);
  // Compare serialised JSON so key order counts too (the bytes a provider's cache sees).
  expect(JSON.stringify(after.slice(0, before.length))).toBe(JSON.stringify(before));
}

/** The opening of every first turn on a fresh thread (methodSequence labels). */
export const OPENING = ["thread/started", "thread/status/changed", "turn/started", "item/started:userMessage", "item/completed:userMessage"];
/** A streamed text answer. */
export const ANSWER = ["item/started:agentMessage", "item/agentMessage/delta", "item/completed:agentMessage", "thread/tokenUsage/updated"];
/** The end of a turn. */
export const END = ["thread/status/changed", "turn/completed"];
