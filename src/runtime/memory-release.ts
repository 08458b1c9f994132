/**
 * Gives memory back once the process goes idle after work: promptly after a big thread was
 * unloaded, and after ordinary work (turns) at most every MIN_INTERVAL_MS.
 *
 * Heap snapshots of a server after 20 turns and after a 32 MiB reply, with every client gone
 * (bench/memory-after-turns.ts, bench/heap-summary.mjs), show no JavaScript object holding on to
 * turns: the live heap is back at ~27 MiB, as when idle. The RSS that stays (118 MiB after 20
 * turns, ~290 MiB after the big reply) is heap V8 has not given back yet: it shrinks its spaces
 * only after a major GC, and an idle process may not run one for a long time. So when a thread
 * whose history held a lot of text unloads and no turn runs anywhere in the process, one major GC
 * runs a little later. Nothing runs while turns stream (a full GC there would stall deltas).
 *
 * Ordinary turns leave garbage too: 2 000 one-turn threads made in a minute left V8's heap at
 * 165 MiB used / 190 MiB committed for ~45 MiB live (issue 33 item 4, bench/loaded-threads-memory.ts),
 * and that headroom, not the threads, was most of the "RSS per loaded thread". So any turn's end
 * (or a thread's unload) also schedules one major GC for when the process has been idle a second.
 */
import v8 from "node:v8";
import vm from "node:vm";

/** A thread's model history above this many UTF-16 code units counts as big. */
export const BIG_HISTORY_CHARS = 4 * 1024 * 1024;
const DELAY_MS = 1000;
/** Ordinary work schedules a GC no more often than this (a big thread's unload does not wait). */
const MIN_INTERVAL_MS = 10_000;

/**
 * V8's "last resort" collection (V8 12 on: Node 22 and 24): a major GC that also gives back the
 * young generation's semi-spaces, down to their minimum (2 x 16 → 2 x 0.5 MiB; idle RSS on Node 24
 * 85 → 74 MiB). V8 11 (Node 20) has no such flavour: it keeps the plain gc() and the young
 * generation's limit below. The pause is longer (~60 ms against ~20 ms for a 150k-object heap,
 * measured on Node 24), and it only runs when the process is idle.
 */
const LAST_RESORT = { type: "major", execution: "sync", flavor: "last-resort" } as const;
const GC_SHRINKS_YOUNG_GENERATION = Number(process.versions.v8.split(".")[0]) >= 12;

type Gc = (options?: typeof LAST_RESORT) => void;
let gcFn: Gc | null | undefined;
/** V8's gc(), made reachable without starting node with --expose-gc (the flag only adds the global). */
function gc(): Gc | null {
  if (gcFn !== undefined) return gcFn;
  try {
    v8.setFlagsFromString("--expose-gc");
    gcFn = vm.runInNewContext("gc") as Gc;
  } catch {
    gcFn = null;
  }
  return gcFn;
}

/**
 * Keeps V8's young generation at the size it has when called (the server calls it once ready),
 * where the idle collection cannot give it back (V8 11, Node 20; from V8 12 on it can, and the
 * young generation grows under load and shrinks when idle).
 * V8 doubles the semi-spaces whenever many objects survive a scavenge, up to 16 MiB each, and
 * never shrinks them in a plain major GC: a server's turns doubled the 2 x 8 MiB start-up
 * gives it to 2 x 16 MiB — 16 MiB more RSS for good — within 20 turns (bench/memory-after-turns.ts).
 * Kept from start-up on rather than at its 2 x 1 MiB minimum: that small, objects of turns in flight
 * were promoted before they died and the old generation grew instead (2 000 threads made 4 at a
 * time, bench/loaded-threads-memory.ts: old space 108 vs 49 MiB). `--max-semi-space-size` would
 * need a launch flag; the growth factor is read at each resize, so it works from here.
 */
export function limitYoungGeneration(): void {
  if (GC_SHRINKS_YOUNG_GENERATION) return;
  v8.setFlagsFromString("--semi-space-growth-factor=1");
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
/** When the scheduled GC may run (pushed back by more work); whether it skips the interval. */
let due = 0;
let urgent = false;
let busyNow: () => boolean = () => false;
let lastGcAt = -Infinity;

function schedule(busy: () => boolean, isUrgent: boolean): void {
  busyNow = busy;
  urgent ||= isUrgent;
  due = Math.max(due, Date.now() + DELAY_MS);
  if (!timer) arm(DELAY_MS);
}

function arm(ms: number): void {
  timer = setTimeout(fire, ms);
  timer.unref();
}

function fire(): void {
  timer = null;
  const now = Date.now();
  // Work came in meanwhile, or (for ordinary work) a GC ran a moment ago: later.
  const wait = Math.max(due - now, urgent ? 0 : lastGcAt + MIN_INTERVAL_MS - now);
  if (wait > 0) return arm(wait);
  urgent = false;
  if (busyNow()) return; // a turn runs: the turn's end schedules again
  lastGcAt = now;
  collectGarbage();
}

/** One major GC, giving back what V8 can (exported for tests). */
export function collectGarbage(): void {
  if (GC_SHRINKS_YOUNG_GENERATION) gc()?.(LAST_RESORT);
  else gc()?.();
}

/** Schedules one major GC for when `busy()` says nothing runs (checked after a short delay). */
export function releaseWhenIdle(busy: () => boolean): void {
  schedule(busy, true);
}

/**
 * Ordinary work ended (a turn, a thread unloaded): once the process has been idle for a moment,
 * one major GC gives back the garbage the work left in the old generation, which V8 would keep
 * committed until its own memory reducer runs (seconds to never). At most once per
 * MIN_INTERVAL_MS, so a server that is never idle for long pays ~1 full GC per 10 s at most.
 */
export function releaseAfterWork(busy: () => boolean): void {
  schedule(busy, false);
}
