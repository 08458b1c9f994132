/**
 * Events that refer to item rows instead of repeating them (issue 16: store each text once).
 *
 * An item/completed carries the item's payload, exactly what its row in `items` holds; turn/completed
 * carries the turn's final items again. Stored as is, an answer's text was written three times. A
 * stored event may instead hold a reference `{"$item": id, ...overrides}` where the item was, and
 * name the referenced ids in `thread_events.item_ids`; replay reads those rows and puts
 * `{...payload, ...overrides}` back. Only references whose row payload equals the announced item
 * (apart from `overrides`, whose keys the payload has) are made, so the replayed notification is
 * the same JSON, key order included, as the event stored whole: jsonb orders an object's keys
 * canonically, and overriding existing keys keeps their places.
 */
import type { ThreadItem } from "../protocol/items.js";

export const ITEM_REF = "$item";
/** In a reference: the row's `text` is cut to this many UTF-16 units on replay (see capText). */
export const TEXT_CAP = "$textCap";

/** `text` cut to at most `cap` UTF-16 units, never between the halves of a surrogate pair. */
export function capText(text: string, cap: number): string {
  if (text.length <= cap) return text;
  const last = text.charCodeAt(cap - 1);
  return text.slice(0, last >= 0xd800 && last <= 0xdbff ? cap - 1 : cap);
}

/**
 * A reference to `item`'s row, with `overrides` (keys the item has) applied on replay, and its
 * text capped to `textCap` units (the live notification carried `capText(text, textCap)`).
 */
export function itemRef(item: ThreadItem, overrides: Record<string, unknown> = {}, textCap?: number): Record<string, unknown> {
  for (const k of Object.keys(overrides)) if (!(k in item)) throw new Error(`item reference override ${k} is not a field of ${item.type}`);
  if (textCap !== undefined && !("text" in item)) throw new Error(`item reference text cap on ${item.type}, which has no text`);
  return textCap === undefined ? { [ITEM_REF]: item.id, ...overrides } : { [ITEM_REF]: item.id, [TEXT_CAP]: textCap, ...overrides };
}

/** `value` with every reference replaced by its item's payload (a reference to a missing row stays). */
export function resolveItemRefs(value: unknown, payloads: Record<string, unknown>): unknown {
  if (Array.isArray(value)) return value.map((v) => resolveItemRefs(v, payloads));
  if (!value || typeof value !== "object") return value;
  const obj = value as Record<string, unknown>;
  const id = obj[ITEM_REF];
  if (typeof id === "string") {
    const payload = payloads[id];
    if (!payload || typeof payload !== "object") return obj;
    const { [ITEM_REF]: _ref, [TEXT_CAP]: cap, ...overrides } = obj;
    const out: Record<string, unknown> = { ...(payload as Record<string, unknown>), ...overrides };
    // Assigning an existing key keeps its place: the same key order as the live notification.
    if (typeof cap === "number" && typeof out.text === "string") out.text = capText(out.text, cap);
    return out;
  }
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(obj)) out[k] = resolveItemRefs(v, payloads);
  return out;
}
