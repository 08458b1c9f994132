/**
 * Request ids as JSON-RPC 2.0 allows them: a string, a number or null, each echoed exactly as
 * received. Strings, null and safe integers survive JSON.parse/JSON.stringify unchanged; other
 * numbers do not (9007199254740993 parses to …992, 1e400 to Infinity, which serialises as null),
 * so for those the raw text is recovered from the message and written back verbatim. Node 20's
 * JSON.parse has no access to source text in revivers, hence the small scanner below; it runs
 * only for messages that carry such a number, and it skips strings with indexOf, so even a
 * multi-megabyte params object costs little.
 */

/** A numeric id a JS number cannot reproduce: kept as the text the client sent. */
export class RawNumberId {
  constructor(readonly text: string) {}
  /** For logs (pino): the number as sent. */
  toJSON(): string {
    return this.text;
  }
}

/** Any id a request may carry on the wire. */
export type WireId = string | number | null | RawNumberId;

/** A number whose JSON text JSON.stringify reproduces (up to spelling, e.g. 1.0 → 1). */
const exact = (n: number) => Number.isSafeInteger(n);

/** Valid as a request id: string, number or null (JSON-RPC 2.0 §4). */
export const isRequestId = (id: unknown): id is string | number | null => typeof id === "string" || typeof id === "number" || id === null;

/** Whether a parsed id needs its raw text (a number that would not round-trip). */
export const needsRawText = (id: unknown): boolean => typeof id === "number" && !exact(id);

/** A map key for an id: the same id (same type, same text) always gives the same key. */
export function idKey(id: WireId): string {
  if (id === null) return "null";
  if (id instanceof RawNumberId) return `n:${id.text}`;
  return typeof id === "string" ? `s:${id}` : `n:${id}`;
}

/**
 * Serialises a message whose `id` may be a RawNumberId: the id's text goes in verbatim, every
 * other member through JSON.stringify. Members keep the order jsonrpc, id, rest.
 */
export function stringifyMessage(message: Record<string, unknown>): string {
  const { id, ...rest } = message;
  if (!(id instanceof RawNumberId)) return JSON.stringify(message);
  const { jsonrpc, ...others } = rest;
  const tail = JSON.stringify(others);
  return `{"jsonrpc":${JSON.stringify(jsonrpc ?? "2.0")},"id":${id.text}${tail === "{}" ? "}" : `,${tail.slice(1)}`}`;
}

// ---- scanner over text already known to be valid JSON (JSON.parse accepted it) ----

const isWs = (c: number) => c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d;

function skipWs(t: string, i: number): number {
  while (i < t.length && isWs(t.charCodeAt(i))) i++;
  return i;
}

/** i at an opening quote; returns the index after the closing one. */
function stringEnd(t: string, i: number): number {
  let from = i + 1;
  for (;;) {
    const q = t.indexOf('"', from);
    if (q < 0) return t.length;
    let backslashes = 0;
    for (let k = q - 1; t.charCodeAt(k) === 0x5c; k--) backslashes++;
    if (backslashes % 2 === 0) return q + 1;
    from = q + 1;
  }
}

/** i at the first character of a value; returns the index after it (iterative: nesting depth is unbounded). */
function valueEnd(t: string, i: number): number {
  const c = t.charCodeAt(i);
  if (c === 0x22) return stringEnd(t, i);
  if (c === 0x7b || c === 0x5b) {
    let depth = 0;
    for (let j = i; j < t.length; ) {
      const ch = t.charCodeAt(j);
      if (ch === 0x22) {
        j = stringEnd(t, j);
        continue;
      }
      if (ch === 0x7b || ch === 0x5b) depth++;
      else if ((ch === 0x7d || ch === 0x5d) && --depth === 0) return j + 1;
      j++;
    }
    return t.length;
  }
  let j = i; // number or literal: up to the next delimiter
  while (j < t.length) {
    const ch = t.charCodeAt(j);
    if (ch === 0x2c || ch === 0x7d || ch === 0x5d || isWs(ch)) break;
    j++;
  }
  return j;
}

type Span = [start: number, end: number];

/** The span of member `name` of the object starting at i (the last one, as JSON.parse keeps). */
function memberSpan(t: string, i: number, name: string): Span | undefined {
  if (t.charCodeAt(i) !== 0x7b) return undefined;
  let found: Span | undefined;
  let j = skipWs(t, i + 1);
  while (j < t.length && t.charCodeAt(j) === 0x22) {
    const keyEnd = stringEnd(t, j);
    const key = JSON.parse(t.slice(j, keyEnd)) as string; // keys may be escaped ("\u0069d")
    const start = skipWs(t, skipWs(t, keyEnd) + 1); // past the colon
    const end = valueEnd(t, start);
    if (key === name) found = [start, end];
    j = skipWs(t, end);
    if (t.charCodeAt(j) !== 0x2c) break;
    j = skipWs(t, j + 1);
  }
  return found;
}

/** Where each message starts: the top-level value, or each element of a top-level array (a batch). */
export function messageStarts(t: string): number[] {
  const i = skipWs(t, 0);
  if (t.charCodeAt(i) !== 0x5b) return [i];
  const starts: number[] = [];
  let j = skipWs(t, i + 1);
  while (j < t.length && t.charCodeAt(j) !== 0x5d) {
    starts.push(j);
    j = skipWs(t, valueEnd(t, j));
    if (t.charCodeAt(j) === 0x2c) j = skipWs(t, j + 1);
  }
  return starts;
}

/** The raw text at a member path (e.g. ["id"] or ["params", "id"]) of the message starting at `start`. */
export function rawTextAt(t: string, start: number, path: readonly string[]): string | undefined {
  let span: Span | undefined = [start, start];
  for (const name of path) {
    span = memberSpan(t, span[0], name);
    if (!span) return undefined;
  }
  return t.slice(span[0], span[1]);
}

/** The id to echo for a parsed id, given a way to fetch its raw text when it needs one. */
export function wireId(parsed: string | number | null, raw: () => string | undefined): WireId {
  if (!needsRawText(parsed)) return parsed;
  const text = raw();
  return text === undefined ? parsed : new RawNumberId(text);
}
