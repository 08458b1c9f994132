/**
 * Running a child process (for the command runner, src/sandbox/runner.ts, which wraps it in the OS
 * sandbox): its own process group (so the
 * whole tree can be killed), bounded capture (head + tail per stream), safe decoding, a timeout
 * and an abort signal. When the command ends — normally, by timeout or by abort — whatever is
 * left of its process group is terminated (SIGTERM, then SIGKILL after a grace period), so no
 * background child outlives the call.
 */
import { spawn, type ChildProcessByStdio } from "node:child_process";
import type { Readable, Writable } from "node:stream";
import { promises as fs } from "node:fs";
import { StringDecoder } from "node:string_decoder";
import { commandEnvironment } from "../sandbox/environment.js";

export const DEFAULT_OUTPUT_CAP_BYTES = 1024 * 1024;
export const DEFAULT_KILL_GRACE_MS = 2_000;
/** How long to wait for stdout/stderr to close after the main process exited (background children may hold them). */
const DRAIN_MS = 300;

export type OutputStream = "stdout" | "stderr";

export interface RunOptions {
  file: string;
  args: string[];
  cwd: string;
  env?: NodeJS.ProcessEnv;
  timeoutMs: number;
  /** Bytes kept per stream (half from the start, half from the end). */
  outputCapBytes?: number;
  signal?: AbortSignal;
  killGraceMs?: number;
  /** Live output, decoded (invalid UTF-8 replaced, NULs stripped). */
  onOutput?: (stream: OutputStream, text: string) => void;
  onSpawn?: (pid: number) => void;
  /**
   * Written to the process's stdin, which is then closed (hooks get their input this way: an
   * argument or environment variable is capped at 128 KiB by the kernel). Without it stdin is /dev/null.
   */
  stdin?: string;
}

export interface CapturedOutput {
  /** The kept text; when bytes were dropped, a `[… N bytes omitted …]` note marks the gap. */
  text: string;
  totalBytes: number;
  omittedBytes: number;
}

export interface RunResult {
  pid: number | null;
  /** The exit code; for a process killed by a signal, 128 + the signal number (as shells report it). */
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  timedOut: boolean;
  aborted: boolean;
  /** The process could not be started (errno code and message). */
  spawnError: { code: string; message: string } | null;
  stdout: CapturedOutput;
  stderr: CapturedOutput;
  /** stdout and stderr interleaved in arrival order. */
  combined: CapturedOutput;
  durationMs: number;
}

/** The result of a process that could not be started. */
export function notStarted(spawnError: { code: string; message: string }): RunResult {
  const none: CapturedOutput = { text: "", totalBytes: 0, omittedBytes: 0 };
  return { pid: null, exitCode: null, signal: null, timedOut: false, aborted: false, spawnError, stdout: none, stderr: none, combined: none, durationMs: 0 };
}

/** Decodes bytes as UTF-8 the forgiving way: invalid sequences become U+FFFD, NULs are dropped. */
export function decodeOutput(bytes: Buffer): string {
  return bytes.toString("utf8").replace(/\0/g, "");
}

export const omittedNote = (bytes: number) => `[… ${bytes} bytes omitted …]`;

/** Keeps the first and the last `cap / 2` bytes of a stream of chunks. */
export class HeadTailBuffer {
  private readonly headCap: number;
  private readonly tailCap: number;
  private head: Buffer[] = [];
  private headLen = 0;
  private tail: Buffer[] = [];
  private tailLen = 0;
  total = 0;

  constructor(capBytes: number) {
    this.headCap = Math.ceil(capBytes / 2);
    this.tailCap = Math.max(0, capBytes - this.headCap);
  }

  push(chunk: Buffer): void {
    this.total += chunk.length;
    if (this.headLen < this.headCap) {
      const take = Math.min(this.headCap - this.headLen, chunk.length);
      this.head.push(chunk.subarray(0, take));
      this.headLen += take;
      chunk = chunk.subarray(take);
    }
    if (chunk.length === 0 || this.tailCap === 0) return;
    this.tail.push(chunk);
    this.tailLen += chunk.length;
    while (this.tail.length > 1 && this.tailLen - this.tail[0].length >= this.tailCap) {
      this.tailLen -= this.tail[0].length;
      this.tail.shift();
    }
  }

  result(): CapturedOutput {
    const head = Buffer.concat(this.head);
    let tail = Buffer.concat(this.tail);
    if (tail.length > this.tailCap) tail = tail.subarray(tail.length - this.tailCap);
    const omitted = this.total - head.length - tail.length;
    if (omitted <= 0) return { text: decodeOutput(Buffer.concat([head, tail])), totalBytes: this.total, omittedBytes: 0 };
    return { text: `${decodeOutput(head)}\n${omittedNote(omitted)}\n${decodeOutput(tail)}`, totalBytes: this.total, omittedBytes: omitted };
  }
}

/** Shortens text to about `maxBytes` (UTF-8), keeping its head and tail around an omission note. */
export function truncateMiddle(text: string, maxBytes: number): { text: string; omittedBytes: number } {
  const bytes = Buffer.from(text, "utf8");
  if (bytes.length <= maxBytes) return { text, omittedBytes: 0 };
  const headLen = Math.ceil(maxBytes / 2);
  const tailLen = maxBytes - headLen;
  const omitted = bytes.length - headLen - tailLen;
  return {
    text: `${decodeOutput(bytes.subarray(0, headLen))}\n${omittedNote(omitted)}\n${decodeOutput(bytes.subarray(bytes.length - tailLen))}`,
    omittedBytes: omitted,
  };
}

const SIGNAL_NUMBERS: Partial<Record<NodeJS.Signals, number>> = { SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGKILL: 9, SIGPIPE: 13, SIGALRM: 14, SIGTERM: 15 };

// Process groups still running: killed if this server exits while they run.
const liveGroups = new Set<number>();
let exitHookInstalled = false;
function trackGroup(pid: number): void {
  liveGroups.add(pid);
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.once("exit", () => {
      for (const pgid of liveGroups) signalGroup(pgid, "SIGKILL");
    });
  }
}

/** Sends a signal to a whole process group; false when the group no longer exists. */
export function signalGroup(pgid: number, sig: NodeJS.Signals | 0): boolean {
  try {
    process.kill(-pgid, sig);
    return true;
  } catch {
    return false; // ESRCH: the group is gone, which is what callers ask (our groups run as our own user: no EPERM)
  }
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms).unref?.());

/**
 * Whether any process of the group is still running. Zombies do not count: where PID 1 does
 * not reap orphans (containers without an init), killed children stay zombies forever and
 * kill(-pgid, 0) keeps succeeding. On Linux /proc tells them apart; elsewhere kill(0) decides.
 */
export async function groupIsRunning(pgid: number): Promise<boolean> {
  if (!signalGroup(pgid, 0)) return false;
  if (process.platform !== "linux") return true;
  let pids: string[];
  try {
    pids = (await fs.readdir("/proc")).filter((n) => /^\d+$/.test(n));
  } catch {
    return true; // no /proc to look into: kill(0) above is the answer, as elsewhere
  }
  const states = await Promise.all(
    pids.map(async (pid) => {
      try {
        const stat = await fs.readFile(`/proc/${pid}/stat`, "utf8");
        const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
        return Number(fields[2]) === pgid && fields[0] !== "Z" && fields[0] !== "X";
      } catch {
        return false; // the process ended between the listing and this read
      }
    }),
  );
  return states.some(Boolean);
}

async function waitGroupGone(pgid: number, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (await groupIsRunning(pgid)) {
    if (Date.now() >= deadline) return false;
    await sleep(25);
  }
  return true;
}

/** SIGTERM the group, give it `graceMs`, then SIGKILL whatever is left. */
export async function terminateGroup(pgid: number, graceMs: number): Promise<void> {
  if (!signalGroup(pgid, "SIGTERM")) return;
  if (await waitGroupGone(pgid, graceMs)) return;
  signalGroup(pgid, "SIGKILL");
  await waitGroupGone(pgid, 1_000);
}

/** Runs a program (argv, no shell) in its own process group and collects its output. */
export function runProcess(opts: RunOptions): Promise<RunResult> {
  const output = new RunOutput(opts.outputCapBytes ?? DEFAULT_OUTPUT_CAP_BYTES, opts.onOutput);
  const started = Date.now();
  if (opts.signal?.aborted) return Promise.resolve({ ...output.notRun(started), aborted: true });
  let child: Child;
  try {
    const options = { cwd: opts.cwd, env: opts.env ?? commandEnvironment(), detached: true };
    child =
      opts.stdin === undefined
        ? spawn(opts.file, opts.args, { ...options, stdio: ["ignore", "pipe", "pipe"] })
        : spawn(opts.file, opts.args, { ...options, stdio: ["pipe", "pipe", "pipe"] });
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    return Promise.resolve({ ...output.notRun(started), spawnError: { code: e.code ?? "EUNKNOWN", message: e.message } });
  }
  return new ChildRun(child, opts, output, started).result;
}

type Child = ChildProcessByStdio<Writable | null, Readable, Readable>;

/** A run's captured output: each stream and both interleaved, bounded; passed on live when asked. */
class RunOutput {
  readonly stdout: HeadTailBuffer;
  readonly stderr: HeadTailBuffer;
  readonly combined: HeadTailBuffer;
  private readonly decoders = { stdout: new StringDecoder("utf8"), stderr: new StringDecoder("utf8") };

  constructor(
    cap: number,
    private readonly onOutput: RunOptions["onOutput"],
  ) {
    this.stdout = new HeadTailBuffer(cap);
    this.stderr = new HeadTailBuffer(cap);
    this.combined = new HeadTailBuffer(cap);
  }

  push(stream: OutputStream, chunk: Buffer): void {
    this[stream].push(chunk);
    this.combined.push(chunk);
    if (this.onOutput) {
      const text = this.decoders[stream].write(chunk).replace(/\0/g, "");
      if (text) this.onOutput(stream, text);
    }
  }

  results(): Pick<RunResult, "stdout" | "stderr" | "combined"> {
    return { stdout: this.stdout.result(), stderr: this.stderr.result(), combined: this.combined.result() };
  }

  /** The result of a process that did not run (aborted before, or could not be spawned). */
  notRun(started: number): RunResult {
    return { pid: null, exitCode: null, signal: null, timedOut: false, aborted: false, spawnError: null, ...this.results(), durationMs: Date.now() - started };
  }
}

/**
 * One spawned child until its result: its stdin, its timeout and abort, its output, and its end —
 * after which whatever is left of its process group is terminated.
 */
class ChildRun {
  readonly result: Promise<RunResult>;
  private resolve!: (result: RunResult) => void;
  private readonly pid: number | null;
  private readonly grace: number;
  private readonly timer: NodeJS.Timeout;
  private timedOut = false;
  private aborted = false;
  private terminating: Promise<void> | null = null;
  private exit: { code: number | null; signal: NodeJS.Signals | null } | null = null;
  private spawnError: RunResult["spawnError"] = null;
  private openStreams = 2;
  private finished = false;
  private readonly onAbort = () => {
    this.aborted = true;
    void this.terminate();
  };

  constructor(
    private readonly child: Child,
    private readonly opts: RunOptions,
    private readonly output: RunOutput,
    private readonly started: number,
  ) {
    this.result = new Promise<RunResult>((resolve) => (this.resolve = resolve));
    this.grace = opts.killGraceMs ?? DEFAULT_KILL_GRACE_MS;
    this.pid = child.pid ?? null;
    if (child.stdin && opts.stdin !== undefined) {
      // A process that exits without reading all of it closes the pipe: EPIPE is not our failure.
      child.stdin.on("error", () => {});
      child.stdin.end(opts.stdin);
    }
    if (this.pid !== null) {
      trackGroup(this.pid);
      opts.onSpawn?.(this.pid);
    }
    this.timer = setTimeout(() => {
      this.timedOut = true;
      void this.terminate();
    }, Math.max(1, Math.min(opts.timeoutMs, 2 ** 31 - 1)));
    opts.signal?.addEventListener("abort", this.onAbort, { once: true });
    child.stdout.on("data", (chunk: Buffer) => this.output.push("stdout", chunk));
    child.stderr.on("data", (chunk: Buffer) => this.output.push("stderr", chunk));
    this.watchEnd();
  }

  private terminate(): Promise<void> {
    if (this.pid === null) return Promise.resolve();
    this.terminating ??= terminateGroup(this.pid, this.grace);
    return this.terminating;
  }

  /** Finishes once the process exited and its pipes closed (or a moment after it exited), or at once when it could not start. */
  private watchEnd(): void {
    const streamClosed = () => {
      this.openStreams--;
      if (this.openStreams === 0 && this.exit) void this.finish();
    };
    this.child.stdout.on("close", streamClosed);
    this.child.stderr.on("close", streamClosed);
    this.child.on("error", (err: NodeJS.ErrnoException) => {
      // Spawn failures (ENOENT, EACCES); errors after a successful spawn are not expected here.
      if (this.pid === null || this.exit === null) {
        this.spawnError = { code: err.code ?? "EUNKNOWN", message: err.message };
        this.exit ??= { code: null, signal: null };
        void this.finish();
      }
    });
    this.child.on("exit", (code, signal) => {
      this.exit = { code, signal };
      if (this.openStreams === 0) {
        void this.finish();
        return;
      }
      // Background children may still hold the pipes: give them a moment, then stop waiting.
      setTimeout(() => void this.finish(), DRAIN_MS).unref?.();
    });
  }

  private async finish(): Promise<void> {
    if (this.finished) return;
    this.finished = true;
    clearTimeout(this.timer);
    this.opts.signal?.removeEventListener("abort", this.onAbort);
    // Whatever is left of the group (background jobs, children that ignored SIGTERM) goes too.
    if (this.pid !== null) {
      await this.terminate();
      liveGroups.delete(this.pid);
    }
    this.child.stdout.destroy();
    this.child.stderr.destroy();
    const exit = this.exit;
    let exitCode: number | null = exit?.code ?? null;
    if (exitCode === null && exit?.signal) exitCode = 128 + (SIGNAL_NUMBERS[exit.signal] ?? 0);
    this.resolve({
      pid: this.pid,
      exitCode,
      signal: exit?.signal ?? null,
      timedOut: this.timedOut,
      aborted: this.aborted,
      spawnError: this.spawnError,
      ...this.output.results(),
      durationMs: Date.now() - this.started,
    });
  }
}
