/**
 * Two things a JavaScript string can hold that PostgreSQL cannot store: U+0000 (text and jsonb
 * refuse it) and an unpaired UTF-16 surrogate (JSON.stringify writes it as a lone "\ud800"
 * escape, which jsonb refuses). Client params holding either are refused up front
 * (rpc/connection.ts); model and tool output (binary files, odd providers) is stored with each
 * replaced by U+FFFD, the replacement character, so neither ever fails a turn.
 */

export type UnstorableText = "nul" | "unpairedSurrogate";

const NUL = /\u0000/g;
// Without the `u` flag a regex sees UTF-16 code units: a high surrogate not followed by a low
// one, or a low one not preceded by a high one.
const UNPAIRED_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
const UNPAIRED_SURROGATE_TEST = new RegExp(UNPAIRED_SURROGATE.source);

function problemIn(s: string): UnstorableText | null {
  if (s.includes("\u0000")) return "nul";
  return UNPAIRED_SURROGATE_TEST.test(s) ? "unpairedSurrogate" : null;
}

/** The first string (key or value) of a JSON value that PostgreSQL cannot store, by its problem; iterative. */
export function unstorableTextIn(value: unknown): UnstorableText | null {
  const stack: unknown[] = [value];
  while (stack.length) {
    const v = stack.pop();
    if (typeof v === "string") {
      const problem = problemIn(v);
      if (problem) return problem;
    } else if (v && typeof v === "object") {
      for (const [k, x] of Object.entries(v)) {
        const problem = problemIn(k);
        if (problem) return problem;
        stack.push(x);
      }
    }
  }
  return null;
}

const storableString = (s: string) => s.replace(NUL, "\uFFFD").replace(UNPAIRED_SURROGATE, "\uFFFD");

/** A copy of a JSON value that PostgreSQL can store (see above); the value itself when it already is. */
export function storableText<T>(value: T): T {
  if (!unstorableTextIn(value)) return value;
  const clean = (v: unknown): unknown => {
    if (typeof v === "string") return storableString(v);
    if (Array.isArray(v)) return v.map(clean);
    if (v && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, x]) => [storableString(k), clean(x)]));
    return v;
  };
  return clean(value) as T;
}
