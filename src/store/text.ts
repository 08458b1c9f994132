/**
 * PostgreSQL rejects U+0000 in text and jsonb. Client params containing it are refused
 * (rpc/connection.ts); model and tool output (binary files, odd providers) is stored with it
 * replaced by U+FFFD, the replacement character, so a stray NUL never fails a turn.
 */

const NUL = /\u0000/g;

/** Whether any string (key or value) in a JSON value contains NUL; iterative, bounded by size. */
export function containsNul(value: unknown): boolean {
  const stack: unknown[] = [value];
  while (stack.length) {
    const v = stack.pop();
    if (typeof v === "string") {
      if (v.includes("\u0000")) return true;
    } else if (v && typeof v === "object") {
      for (const [k, x] of Object.entries(v)) {
        if (k.includes("\u0000")) return true;
        stack.push(x);
      }
    }
  }
  return false;
}

/** A copy of a JSON value with NUL replaced in every string; the value itself when it has none. */
export function withoutNul<T>(value: T): T {
  if (!containsNul(value)) return value;
  const clean = (v: unknown): unknown => {
    if (typeof v === "string") return v.replace(NUL, "\uFFFD");
    if (Array.isArray(v)) return v.map(clean);
    if (v && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, x]) => [k.replace(NUL, "\uFFFD"), clean(x)]));
    return v;
  };
  return clean(value) as T;
}
