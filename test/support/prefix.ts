/**
 * The prompt-prefix property (DESIGN.md §5) over the mock model's recorded requests: for
 * consecutive requests of one thread, the earlier request's canonical (system, tools, messages)
 * is an exact prefix of the later one's. Cache hints (Anthropic `cache_control`) move between
 * requests by design and are stripped; everything else is compared byte for byte.
 */
import { expect } from "vitest";
import type { RecordedRequest } from "./mock-model-server.js";

export interface CanonicalPrompt {
  system: string;
  tools: string;
  messages: string[];
}

function stripCacheControl(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(stripCacheControl);
  if (v && typeof v === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) if (k !== "cache_control") out[k] = stripCacheControl(x);
    return out;
  }
  return v;
}

/** Serialises each part as the provider received it (key order kept: it is part of the bytes). */
export function canonicalPrompt(req: RecordedRequest): CanonicalPrompt {
  const body = stripCacheControl(JSON.parse(req.rawBody)) as Record<string, any>;
  switch (req.api) {
    case "anthropic":
      return { system: JSON.stringify(body.system ?? null), tools: JSON.stringify(body.tools ?? []), messages: (body.messages ?? []).map((m: unknown) => JSON.stringify(m)) };
    case "openai-responses":
      return { system: JSON.stringify(body.instructions ?? null), tools: JSON.stringify(body.tools ?? []), messages: (body.input ?? []).map((m: unknown) => JSON.stringify(m)) };
    case "openai-chat": {
      const [first, ...rest] = body.messages ?? [];
      const hasSystem = first?.role === "system";
      return {
        system: JSON.stringify(hasSystem ? first : null),
        tools: JSON.stringify(body.tools ?? []),
        messages: (hasSystem ? rest : body.messages ?? []).map((m: unknown) => JSON.stringify(m)),
      };
    }
  }
}

/** Asserts that `earlier`'s prompt is an exact prefix of `later`'s. */
export function expectPrefix(earlier: RecordedRequest, later: RecordedRequest, label = ""): void {
  const a = canonicalPrompt(earlier);
  const b = canonicalPrompt(later);
  expect(b.system, `${label} system prompt changed`).toBe(a.system);
  expect(b.tools, `${label} tool list changed`).toBe(a.tools);
  expect(b.messages.length, `${label} later request is shorter`).toBeGreaterThanOrEqual(a.messages.length);
  for (let i = 0; i < a.messages.length; i++) expect(b.messages[i], `${label} message ${i} changed`).toBe(a.messages[i]);
}

/** Asserts the prefix property over every consecutive pair of `requests`. */
export function expectPrefixChain(requests: RecordedRequest[], label = ""): void {
  for (let i = 1; i < requests.length; i++) expectPrefix(requests[i - 1]!, requests[i]!, `${label} request ${i - 1} → ${i}:`);
}
