/**
 * apply_patch against a directory tree that changes under it: a concurrent process keeps swapping
 * `ws/sub` for a symbolic link to a directory outside the writable roots and back, while patches
 * are committed. No write may ever land outside (counted, not timed); every patch either lands
 * inside the workspace in a real directory or fails cleanly, leaving nothing behind.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, renameSync, unlinkSync, watch, writeFileSync, type FSWatcher } from "node:fs";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { builtinTools } from "../../src/tools/builtin.js";
import { commitFileWrites, type FileWrite } from "../../src/tools/patch.js";
import { makeDirs, RecordingContext, run, textOf, toolNamed, type Dirs } from "./helpers.js";

/**
 * The swapper: `sub` (a real directory) → `sub.real`, a symlink `sub` → outside, then back; as
 * fast as it can, bounded by a count and a time limit, and stopping when the stop file appears.
 * A directory that appears at `sub` meanwhile (apply_patch re-creating a missing parent) is moved
 * aside to `stray.N` so that the real directory can always come back. It ends with `sub` real.
 */
const SWAPPER = String.raw`
const fs = require("fs"), path = require("path");
const [ws, outside, stop, maxSwaps, maxMs] = process.argv.slice(1);
const sub = path.join(ws, "sub"), real = path.join(ws, "sub.real");
let strays = 0, swaps = 0;
const aside = () => { try { fs.renameSync(sub, path.join(ws, "stray." + strays++)); } catch {} };
const deadline = Date.now() + Number(maxMs);
process.stdout.write("ready\n");
while (swaps < Number(maxSwaps) && Date.now() < deadline) {
  if (swaps % 16 === 0 && fs.existsSync(stop)) break;
  fs.renameSync(sub, real);
  for (;;) { try { fs.symlinkSync(outside, sub); break; } catch (e) { if (e.code !== "EEXIST") throw e; aside(); } }
  fs.unlinkSync(sub);
  for (;;) { try { fs.renameSync(real, sub); break; } catch (e) { if (e.code !== "ENOTEMPTY" && e.code !== "EEXIST") throw e; aside(); } }
  swaps++;
}
process.stdout.write(JSON.stringify({ swaps, strays }) + "\n");
`;

const MIN_PATCHES = 120;
/**
 * Keep going past MIN_PATCHES until the swapper disturbed this many patches after their check
 * (proof that the race was exercised); a count, not a time.
 */
const MIN_DISTURBED = 5;
/** Through the tool most disturbed patches are refused at check time, so fewer are required. */
const MIN_DISTURBED_AFTER_CHECK = 3;
const MAX_PATCHES = 2000;

let d: Dirs;
let swapper: ChildProcess | null = null;
let watcher: FSWatcher | null = null;

beforeEach(() => {
  d = makeDirs();
  mkdirSync(path.join(d.ws, "sub"));
});

afterEach(async () => {
  watcher?.close();
  watcher = null;
  if (swapper && swapper.exitCode === null && swapper.signalCode === null) {
    const exited = new Promise((r) => swapper!.once("exit", r));
    swapper.kill("SIGKILL");
    await exited;
  }
  swapper = null;
  restoreSub();
  d.cleanup();
});

/** After a killed swapper: `sub` back as the real directory. */
function restoreSub(): void {
  const sub = path.join(d.ws, "sub");
  const real = path.join(d.ws, "sub.real");
  try {
    if (lstatSync(sub).isSymbolicLink()) unlinkSync(sub);
  } catch {
    /* absent */
  }
  if (existsSync(real) && !existsSync(sub)) renameSync(real, sub);
}

interface Swapper {
  stop(): Promise<{ swaps: number; strays: number }>;
}

async function startSwapper(): Promise<Swapper> {
  const stopFile = path.join(d.root, "stop");
  const child = spawn(process.execPath, ["-e", SWAPPER, d.ws, d.outside, stopFile, "10000000", "150000"], { stdio: ["ignore", "pipe", "pipe"] });
  swapper = child;
  let out = "";
  let err = "";
  child.stdout!.on("data", (b: Buffer) => (out += b.toString()));
  child.stderr!.on("data", (b: Buffer) => (err += b.toString()));
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  await new Promise<void>((resolve, reject) => {
    const onData = () => out.includes("ready\n") && resolve();
    child.stdout!.on("data", onData);
    child.once("exit", () => reject(new Error(`the swapper exited before starting: ${err}`)));
  });
  return {
    async stop() {
      writeFileSync(stopFile, "");
      await exited;
      if (child.exitCode !== 0) throw new Error(`the swapper failed (${child.exitCode}): ${err}`);
      return JSON.parse(out.trim().split("\n").pop()!) as { swaps: number; strays: number };
    },
  };
}

/** Every entry created in the outside directory, as seen by inotify, plus what is left there. */
function watchOutside(): { seen: string[]; settle(): Promise<void> } {
  const seen: string[] = [];
  let sentinelSeen: (() => void) | null = null;
  watcher = watch(d.outside, (_event, name) => {
    if (name === ".sentinel") sentinelSeen?.();
    else seen.push(String(name));
  });
  return {
    seen,
    // Events arrive in order: once our own sentinel's event is in, every earlier one is too.
    async settle() {
      const arrived = new Promise<void>((r) => (sentinelSeen = r));
      writeFileSync(path.join(d.outside, ".sentinel"), "");
      await arrived;
      unlinkSync(path.join(d.outside, ".sentinel"));
    },
  };
}

/** How many patches (by the number in their file names) left an entry in the outside directory. */
const patchesIn = (names: string[]) => new Set(names.map((n) => /\d+/.exec(n)?.[0] ?? n)).size;

/** Files under `dir`, walking real directories only (a symbolic link is listed, never entered). */
function filesUnder(dir: string): Map<string, string> {
  const found = new Map<string, string>();
  const walk = (p: string) => {
    for (const name of readdirSync(p)) {
      const full = path.join(p, name);
      const st = lstatSync(full);
      if (st.isDirectory()) walk(full);
      else found.set(path.relative(d.ws, full), st.isSymbolicLink() ? "<symlink>" : readFileSync(full, "utf8"));
    }
  };
  walk(dir);
  return found;
}

const CLEAN_FAILURE =
  /changed while the patch was being applied \(a path component became a symbolic link\); nothing was written|changed after the patch was checked; nothing was written|nothing was changed|every file was restored|No files were changed/;
const SYMLINK_FAILURE = /a path component became a symbolic link|is a symbolic link/;

interface Tally {
  patches: number;
  succeeded: number;
  failed: number;
  symlinkFailures: number;
  unexpected: string[];
}

describe("apply_patch while the tree is swapped for a symlink", () => {
  it("commitFileWrites never writes outside the checked directory", async () => {
    // Paths checked once, while `sub` is a real directory; the race is between that and the write.
    const sub = path.join(d.ws, "sub");
    for (let i = 0; i < MAX_PATCHES; i++) if (i % 3 === 2) writeFileSync(path.join(sub, `u${i}.txt`), "old\n");
    const writeFor = (i: number): FileWrite & { name: string } => {
      if (i % 3 === 0) return { name: `sub/a${i}.txt`, real: path.join(sub, `a${i}.txt`), display: `a${i}`, before: null, after: Buffer.from(`a${i}\n`) };
      if (i % 3 === 1) return { name: `sub/deep${i}/x${i}.txt`, real: path.join(sub, `deep${i}`, `x${i}.txt`), display: `x${i}`, before: null, after: Buffer.from(`x${i}\n`) };
      return { name: `sub/u${i}.txt`, real: path.join(sub, `u${i}.txt`), display: `u${i}`, before: Buffer.from("old\n"), after: Buffer.from(`new${i}\n`) };
    };

    const outside = watchOutside();
    const swap = await startSwapper();
    const results: Array<{ i: number; error: string | null }> = [];
    let disturbed = 0;
    for (let i = 0; i < MAX_PATCHES && (i < MIN_PATCHES || disturbed < MIN_DISTURBED); i++) {
      const { name: _name, ...w } = writeFor(i);
      try {
        await commitFileWrites([w]);
        results.push({ i, error: null });
      } catch (err) {
        results.push({ i, error: (err as Error).message });
        disturbed++;
      }
    }
    const swapped = await swap.stop();
    await outside.settle();

    const leaked = [...new Set([...outside.seen, ...readdirSync(d.outside)])];
    const tally: Tally = { patches: results.length, succeeded: 0, failed: 0, symlinkFailures: 0, unexpected: [] };
    const files = filesUnder(d.ws);
    const located = (rel: string): string[] => [...files.keys()].filter((k) => path.basename(k) === path.basename(rel));
    for (const r of results) {
      const w = writeFor(r.i);
      const where = located(w.name);
      if (r.error === null) {
        tally.succeeded++;
        // Inside the workspace, in a real directory, exactly once, with the new content.
        if (where.length !== 1 || files.get(where[0]) !== w.after!.toString()) tally.unexpected.push(`#${r.i} succeeded but is at [${where}]`);
      } else {
        tally.failed++;
        if (SYMLINK_FAILURE.test(r.error)) tally.symlinkFailures++;
        if (!CLEAN_FAILURE.test(r.error)) tally.unexpected.push(`#${r.i} failed unclearly: ${r.error}`);
        if (w.before === null ? where.length !== 0 : where.length !== 1 || files.get(where[0]) !== "old\n") tally.unexpected.push(`#${r.i} failed but left [${where}]`);
      }
    }
    const leftovers = [...files.keys()].filter((k) => /\.(tmp|orig)$/.test(k));
    console.log(`[patch-race] commitFileWrites: ${tally.patches} patches, ${tally.succeeded} ok, ${tally.failed} failed (${tally.symlinkFailures} symlink refusals), ${patchesIn(leaked)} landed outside [${leaked.join(" ")}]; swapper: ${swapped.swaps} swaps, ${swapped.strays} strays`);

    expect(leaked, "files written outside the writable roots").toEqual([]);
    expect(tally.unexpected).toEqual([]);
    expect(leftovers).toEqual([]);
    expect(lstatSync(sub).isDirectory()).toBe(true);
    expect(tally.patches).toBeGreaterThanOrEqual(MIN_PATCHES);
    expect(disturbed, "the swapper never disturbed a patch: the race was not exercised").toBeGreaterThanOrEqual(MIN_DISTURBED);
  }, 180_000);

  it("the apply_patch tool never writes outside the writable roots", async () => {
    const ctx = new RecordingContext(d.ws, "workspace-write", "never");
    const tool = toolNamed(builtinTools(ctx), "apply_patch");
    const sub = path.join(d.ws, "sub");
    for (let i = 0; i < MAX_PATCHES; i++) if (i % 2 === 1) writeFileSync(path.join(sub, `u${i}.txt`), "old\n");
    const patchFor = (i: number) =>
      i % 2 === 0
        ? { name: `t${i}.txt`, before: null, after: `t${i}\n`, text: `*** Begin Patch\n*** Add File: sub/n${i}/t${i}.txt\n+t${i}\n*** End Patch` }
        : { name: `u${i}.txt`, before: "old\n", after: `new${i}\n`, text: `*** Begin Patch\n*** Update File: sub/u${i}.txt\n@@\n-old\n+new${i}\n*** End Patch` };

    const outside = watchOutside();
    const swap = await startSwapper();
    const results: Array<{ i: number; error: string | null }> = [];
    let disturbed = 0;
    for (let i = 0; i < MAX_PATCHES && (i < MIN_PATCHES || disturbed < MIN_DISTURBED_AFTER_CHECK); i++) {
      const out = await run(tool, { patch: patchFor(i).text });
      results.push({ i, error: out.isError ? textOf(out) : null });
      // Refusals at check time (the link was already there) do not exercise the check-then-write race.
      if (out.isError && !textOf(out).startsWith("Refused")) disturbed++;
    }
    const swapped = await swap.stop();
    await outside.settle();

    const leaked = [...new Set([...outside.seen, ...readdirSync(d.outside)])];
    const files = filesUnder(d.ws);
    const unexpected: string[] = [];
    let symlinkFailures = 0;
    for (const r of results) {
      const p = patchFor(r.i);
      const where = [...files.keys()].filter((k) => path.basename(k) === p.name);
      if (r.error === null) {
        if (where.length !== 1 || files.get(where[0]) !== p.after) unexpected.push(`#${r.i} succeeded but is at [${where}]`);
      } else {
        if (SYMLINK_FAILURE.test(r.error)) symlinkFailures++;
        if (!CLEAN_FAILURE.test(r.error)) unexpected.push(`#${r.i} failed unclearly: ${r.error}`);
        if (p.before === null ? where.length !== 0 : where.length !== 1 || files.get(where[0]) !== p.before) unexpected.push(`#${r.i} failed but left [${where}]`);
      }
    }
    const leftovers = [...files.keys()].filter((k) => /\.(tmp|orig)$/.test(k));
    const failed = results.filter((r) => r.error !== null).length;
    const refused = results.filter((r) => r.error?.startsWith("Refused")).length;
    console.log(`[patch-race] apply_patch tool: ${results.length} patches, ${results.length - failed} ok, ${refused} refused at check, ${failed - refused} failed later (${symlinkFailures} symlink refusals), ${patchesIn(leaked)} landed outside [${leaked.join(" ")}]; swapper: ${swapped.swaps} swaps, ${swapped.strays} strays`);

    expect(leaked, "files written outside the writable roots").toEqual([]);
    expect(unexpected).toEqual([]);
    expect(leftovers).toEqual([]);
    expect(results.length).toBeGreaterThanOrEqual(MIN_PATCHES);
    expect(disturbed, "the swapper never disturbed a patch after its check: the race was not exercised").toBeGreaterThanOrEqual(MIN_DISTURBED_AFTER_CHECK);
  }, 180_000);
});
