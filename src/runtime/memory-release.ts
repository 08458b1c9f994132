/**
 * Gives memory back once the process goes idle after a big thread was unloaded.
 *
 * Heap snapshots of a server after 20 turns and after a 32 MiB reply, with every client gone
 * (bench/memory-after-turns.ts, bench/heap-summary.mjs), show no JavaScript object holding on to
 * turns: the live heap is back at ~27 MiB, as when idle. The RSS that stays (118 MiB after 20
 * turns, ~290 MiB after the big reply) is heap V8 has not given back yet: it shrinks its spaces
 * only after a major GC, and an idle process may not run one for a long time. So when a thread
 * whose history held a lot of text unloads and no turn runs anywhere in the process, one major GC
 * runs a little later. Nothing runs while turns stream (a full GC there would stall deltas).
 */
import v8 from "node:v8";
import vm from "node:vm";

/** A thread's model history above this many UTF-16 code units counts as big. */
export const BIG_HISTORY_CHARS = 4 * 1024 * 1024;
const DELAY_MS = 1000;

let gcFn: (() => void) | null | undefined;
/** V8's gc(), made reachable without starting node with --expose-gc (the flag only adds the global). */
function gc(): (() => void) | null {
  if (gcFn !== undefined) return gcFn;
  try {
    v8.setFlagsFromString("--expose-gc");
    gcFn = vm.runInNewContext("gc") as () => void;
  } catch {
    gcFn = null;
  }
  return gcFn;
}

/** Rough size of a model history's text (strings only, walked without serialising). */
export function textChars(value: unknown, limit = BIG_HISTORY_CHARS): number {
  let total = 0;
  const stack: unknown[] = [value];
  while (stack.length && total < limit) {
    const v = stack.pop();
    if (typeof v === "string") total += v.length;
    else if (Array.isArray(v)) for (const x of v) stack.push(x);
    else if (v && typeof v === "object") for (const x of Object.values(v)) stack.push(x);
  }
  return total;
}

let timer: NodeJS.Timeout | null = null;

/** Schedules one major GC for when `busy()` says nothing runs (checked once, after a short delay). */
export function releaseWhenIdle(busy: () => boolean): void {
  if (timer) return;
  timer = setTimeout(() => {
    timer = null;
    if (!busy()) gc()?.();
  }, DELAY_MS);
  timer.unref();
}
