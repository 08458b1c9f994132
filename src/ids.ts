/**
 * Time-ordered UUIDv7 ids (as Codex uses for threads and turns): sortable, unguessable. Ids made
 * in the same millisecond stay in creation order: the 12-bit `rand_a` field counts up within a
 * millisecond (RFC 9562, method 1), so ordering by id never contradicts ordering by creation.
 */
import { randomBytes } from "node:crypto";

let lastMs = -1;
let counter = 0;

export function uuidv7(nowMs = Date.now()): string {
  let ms = nowMs;
  if (ms <= lastMs) {
    ms = lastMs;
    counter++;
    if (counter > 0xfff) {
      ms = lastMs + 1; // 4096 ids in one millisecond: borrow the next one
      counter = 0;
    }
  } else counter = 0;
  lastMs = ms;
  const b = randomBytes(16);
  b.writeUIntBE(ms, 0, 6);
  b[6] = 0x70 | ((counter >> 8) & 0x0f); // version 7 + counter high bits
  b[7] = counter & 0xff;
  b[8] = (b[8]! & 0x3f) | 0x80; // RFC 9562 variant
  const h = b.toString("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}
