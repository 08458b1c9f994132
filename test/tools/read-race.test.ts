/**
 * read_file, list_dir and grep against a tree that changes under them: a concurrent process keeps
 * swapping `ws/sub` for a symbolic link to a hidden directory (as the server hides its home) and
 * back, while the tools read `sub`. A read must never return what is in the hidden directory
 * (counted over a bounded number of calls, not timed): the path is checked, then opened component
 * by component without following links, so a swap after the check is refused, not followed.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, lstatSync, mkdirSync, renameSync, unlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { CommandRunner } from "../../src/sandbox/runner.js";
import { builtinTools } from "../../src/tools/builtin.js";
import { makeDirs, RecordingContext, run, textOf, toolNamed, type Dirs } from "./helpers.js";

const SWAPPER = String.raw`
const fs = require("fs"), path = require("path");
const [ws, outside, stop, maxMs] = process.argv.slice(1);
const sub = path.join(ws, "sub"), real = path.join(ws, "sub.real");
let swaps = 0;
const deadline = Date.now() + Number(maxMs);
process.stdout.write("ready\n");
while (Date.now() < deadline) {
  if (swaps % 16 === 0 && fs.existsSync(stop)) break;
  fs.renameSync(sub, real);
  fs.symlinkSync(outside, sub);
  fs.unlinkSync(sub);
  fs.renameSync(real, sub);
  swaps++;
}
process.stdout.write(JSON.stringify({ swaps }) + "\n");
`;

const MIN_CALLS = 300;
/** Keep going past MIN_CALLS until this many calls saw the link (proof the race was exercised). */
const MIN_DISTURBED = 5;
const MAX_CALLS = 3000;
const SECRET = "SECRET-0424";

let d: Dirs;
let swapper: ChildProcess | null = null;

beforeEach(() => {
  d = makeDirs();
  mkdirSync(path.join(d.ws, "sub"));
  writeFileSync(path.join(d.ws, "sub", "f.txt"), "inside\n");
  writeFileSync(path.join(d.outside, "f.txt"), `${SECRET}\n`);
  writeFileSync(path.join(d.outside, `${SECRET}.name`), "");
});

afterEach(async () => {
  if (swapper && swapper.exitCode === null && swapper.signalCode === null) {
    const exited = new Promise((r) => swapper!.once("exit", r));
    swapper.kill("SIGKILL");
    await exited;
  }
  swapper = null;
  const sub = path.join(d.ws, "sub");
  try {
    if (lstatSync(sub).isSymbolicLink()) unlinkSync(sub);
  } catch {
    /* absent */
  }
  if (existsSync(path.join(d.ws, "sub.real")) && !existsSync(sub)) renameSync(path.join(d.ws, "sub.real"), sub);
  d.cleanup();
});

async function startSwapper(): Promise<() => Promise<number>> {
  const stopFile = path.join(d.root, "stop");
  const child = spawn(process.execPath, ["-e", SWAPPER, d.ws, d.outside, stopFile, "150000"], { stdio: ["ignore", "pipe", "pipe"] });
  swapper = child;
  let out = "";
  let err = "";
  child.stdout!.on("data", (b: Buffer) => (out += b.toString()));
  child.stderr!.on("data", (b: Buffer) => (err += b.toString()));
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on("data", () => out.includes("ready\n") && resolve());
    child.once("exit", () => reject(new Error(`the swapper exited before starting: ${err}`)));
  });
  return async () => {
    writeFileSync(stopFile, "");
    await exited;
    if (child.exitCode !== 0) throw new Error(`the swapper failed (${child.exitCode}): ${err}`);
    return (JSON.parse(out.trim().split("\n").pop()!) as { swaps: number }).swaps;
  };
}

const CASES = [
  { tool: "read_file", args: { path: "sub/f.txt" }, inside: /^\s+1\tinside$/ },
  { tool: "list_dir", args: { path: "sub" }, inside: /^sub\/ \(1 entry\)\nf\.txt$/ },
  { tool: "grep", args: { pattern: "SECRET|inside", path: "sub" }, inside: /^sub\/f\.txt:1: inside$/ },
] as const;

describe("reads race a parent directory swapped for a link to a hidden directory", () => {
  it.each(CASES)("$tool never returns what the hidden directory holds", async ({ tool, args, inside }) => {
    // The server hides d.outside (as it hides its home): the link's target is refused at check time.
    const runner = new CommandRunner({ hiddenPaths: [d.outside] });
    const t = toolNamed(builtinTools(new RecordingContext(d.ws, "workspace-write", "never", undefined, runner)), tool);
    const stop = await startSwapper();
    const escapes: string[] = [];
    let ok = 0;
    let disturbed = 0;
    let calls = 0;
    for (; calls < MAX_CALLS && (calls < MIN_CALLS || disturbed < MIN_DISTURBED); calls++) {
      const out = textOf(await run(t, args));
      if (out.includes(SECRET)) escapes.push(out);
      else if (inside.test(out)) ok++;
      else disturbed++; // refused: hidden at check time, a link found on open, or sub missing mid-swap
    }
    const swaps = await stop();
    console.log(`[read-race] ${tool}: ${calls} calls, ${ok} read inside, ${disturbed} refused, ${escapes.length} escapes; ${swaps} swaps`);
    expect(escapes).toEqual([]);
    expect(disturbed, "the swapper never disturbed a read: the race was not exercised").toBeGreaterThanOrEqual(MIN_DISTURBED);
  });
});
