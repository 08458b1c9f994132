/** Small pure helpers used by more than one adapter. */
import type { ImageBlock, TextBlock, Usage } from "../agent/messages.js";

export interface DataUrl {
  mediaType: string;
  data: string;
}

/** `data:image/png;base64,AAAA` → { mediaType, data }; null for anything else. */
export function parseDataUrl(url: string): DataUrl | null {
  const m = /^data:([^;,]+)(?:;[^,]*)?;base64,(.*)$/s.exec(url);
  return m ? { mediaType: m[1], data: m[2] } : null;
}

/**
 * Text of a tool result / developer message for wire formats that only take a string.
 * Images have no place there; a marker keeps the model aware that something was omitted.
 */
export function joinText(content: ReadonlyArray<TextBlock | ImageBlock>, imageMarker = "[image omitted]"): string {
  return content.map((b) => (b.type === "text" ? b.text : imageMarker)).join("\n");
}

/**
 * Tool-call arguments as a JSON object for APIs that want structured input (Anthropic).
 * Invalid or non-object JSON becomes `{}`: the API rejects anything else, and the original text
 * stays in our history untouched.
 */
export function argumentsAsObject(args: string): Record<string, unknown> {
  if (args.trim() === "") return {};
  try {
    const v: unknown = JSON.parse(args);
    return v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

export function makeUsage(u: Omit<Usage, "totalTokens"> & { totalTokens?: number | null }): Usage {
  return {
    inputTokens: u.inputTokens,
    cachedInputTokens: u.cachedInputTokens,
    cacheWriteInputTokens: u.cacheWriteInputTokens,
    outputTokens: u.outputTokens,
    reasoningOutputTokens: u.reasoningOutputTokens,
    totalTokens: u.totalTokens ?? u.inputTokens + u.outputTokens,
  };
}

/**
 * `body` with its `undefined`-valued keys deleted, the other keys keeping their order. A request
 * body is written as one object literal typed with the SDK's param type, its keys in wire order
 * and an absent optional field as `undefined`: the literal fixes the key order (which the
 * provider's prompt cache depends on, the body being serialised in insertion order) and gets the
 * type's checks (a misspelled field is an error). Deleting the absent keys leaves the object
 * holding just what is sent, as JSON.stringify would.
 */
export function withoutUndefined<T extends object>(body: T): T {
  for (const key of Object.keys(body)) if (Reflect.get(body, key) === undefined) Reflect.deleteProperty(body, key);
  return body;
}

/** Non-negative finite number or 0: providers send null/absent fields freely. */
export function num(v: unknown): number {
  return typeof v === "number" && Number.isFinite(v) && v > 0 ? v : 0;
}
