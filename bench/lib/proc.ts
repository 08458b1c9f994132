/**
 * Spawns the real CLI as a child process, times it to the "listening" log line and to the first
 * GET /readyz 200, reads its memory from /proc, and stops it with SIGTERM (SIGKILL after a bound).
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import http from "node:http";
import { performance } from "node:perf_hooks";
import { createInterface } from "node:readline";

export interface ServerProcess {
  readonly pid: number;
  readonly url: string;
  readonly httpUrl: string;
  /** spawn() → "listening" JSON line seen on stderr. */
  readonly listeningMs: number;
  /** spawn() → first GET /readyz answered 200. */
  readonly readyMs: number;
  /** Last stderr lines (for error reports). */
  stderrTail(): string[];
  stop(): Promise<void>;
}

const live = new Set<ChildProcess>();
/** Last resort: never leave a server behind when the bench itself dies. */
export function killAllSpawned(): void {
  for (const c of live) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
}

function httpStatus(url: string, timeoutMs = 2000): Promise<number> {
  return new Promise((resolve) => {
    const req = http.get(url, { timeout: timeoutMs, agent: false }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on("timeout", () => req.destroy());
    req.on("error", () => resolve(0));
  });
}

export interface SpawnOptions {
  /** argv[0..] before "serve" flags, e.g. [process.execPath, "bin/app-server.js"]. */
  command: string[];
  cwd: string;
  home: string;
  databaseUrl?: string;
  timeoutMs: number;
  /** Extra node flags via NODE_OPTIONS (e.g. --cpu-prof). */
  nodeOptions?: string;
  /** Extra environment (after APP_SERVER_* / DATABASE_URL of the bench's own environment are removed). */
  env?: Record<string, string>;
}

export async function spawnServer(opts: SpawnOptions): Promise<ServerProcess> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const k of Object.keys(env)) if (k.startsWith("APP_SERVER_") || k === "DATABASE_URL" || k === "NODE_OPTIONS") delete env[k];
  if (opts.nodeOptions) env.NODE_OPTIONS = opts.nodeOptions;
  // The bench's clients connect without a token (the default since issue 24 requires one).
  env.APP_SERVER_AUTH = "none";
  Object.assign(env, opts.env ?? {});
  const args = [...opts.command.slice(1), "serve", "--listen", "ws://127.0.0.1:0", "--home", opts.home];
  if (opts.databaseUrl) args.push("--database-url", opts.databaseUrl);

  const t0 = performance.now();
  const child = spawn(opts.command[0]!, args, { cwd: opts.cwd, env, stdio: ["ignore", "ignore", "pipe"] });
  live.add(child);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  void exited.then(() => live.delete(child));
  const tail: string[] = [];

  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill("SIGTERM");
    const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
    await exited;
    clearTimeout(timer);
  };

  try {
    const { url, listeningMs } = await new Promise<{ url: string; listeningMs: number }>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no "listening" line within ${opts.timeoutMs} ms`)), opts.timeoutMs);
      const rl = createInterface({ input: child.stderr! });
      rl.on("line", (line) => {
        tail.push(line);
        if (tail.length > 20) tail.shift();
        try {
          const rec = JSON.parse(line);
          if (rec.msg === "listening" && typeof rec.url === "string") {
            clearTimeout(timer);
            resolve({ url: rec.url, listeningMs: performance.now() - t0 });
          }
        } catch {
          /* not JSON: "app-server: ..." messages */
        }
      });
      child.once("exit", (code, signal) => {
        clearTimeout(timer);
        reject(new Error(`server exited (${code ?? signal}) before listening`));
      });
    });
    const httpUrl = url.replace(/^ws:/, "http:");
    let readyMs = NaN;
    while (performance.now() - t0 < opts.timeoutMs) {
      if ((await httpStatus(`${httpUrl}/readyz`)) === 200) {
        readyMs = performance.now() - t0;
        break;
      }
      await new Promise((r) => setTimeout(r, 2));
    }
    if (!Number.isFinite(readyMs)) throw new Error(`/readyz not 200 within ${opts.timeoutMs} ms`);
    return { pid: child.pid!, url, httpUrl, listeningMs, readyMs, stderrTail: () => [...tail], stop };
  } catch (err) {
    await stop();
    throw new Error(`${(err as Error).message}\n  stderr: ${tail.join("\n  ")}`);
  }
}

export interface ProcMemory {
  rssMB: number;
  hwmMB: number;
}

/** VmRSS / VmHWM of a live process, in MiB. */
export function procMemory(pid: number): ProcMemory {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? NaN);
  return { rssMB: kb("VmRSS") / 1024, hwmMB: kb("VmHWM") / 1024 };
}

/** Wall time of a short command (node floor, import-only), in ms. */
export async function timeCommand(command: string[], cwd: string, timeoutMs = 30_000): Promise<number> {
  const t0 = performance.now();
  const child = spawn(command[0]!, command.slice(1), { cwd, stdio: ["ignore", "ignore", "inherit"] });
  live.add(child);
  const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
  const code = await new Promise<number | null>((resolve) => child.once("exit", (c) => resolve(c)));
  clearTimeout(timer);
  live.delete(child);
  if (code !== 0) throw new Error(`${command.join(" ")} exited with ${code}`);
  return performance.now() - t0;
}

let clkTck: number | undefined;
/** User and system (kernel) CPU seconds a live process has used so far (/proc/PID/stat utime, stime). */
export function procCpuTimes(pid: number): { user: number; system: number } {
  return statCpuTimes(`/proc/${pid}/stat`);
}

/** utime and stime, in seconds, of a /proc `stat` file (a process's, or one thread's under task/). */
function statCpuTimes(file: string): { user: number; system: number } {
  clkTck ??= Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
  const stat = readFileSync(file, "utf8");
  // Fields after the command name (which may contain spaces), 1-based numbering of proc(5): utime 14, stime 15.
  const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return { user: Number(rest[11]) / clkTck, system: Number(rest[12]) / clkTck };
}

/**
 * CPU seconds (user + system) of each thread of a live process, by thread id: the main thread has
 * the process's own id; worker threads, V8's platform threads (GC, compilers) and libuv's pool are
 * the others, in the order they started.
 */
export function procThreadCpuSeconds(pid: number): Map<number, number> {
  const out = new Map<number, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    const t = statCpuTimes(`/proc/${pid}/task/${tid}/stat`);
    out.set(Number(tid), t.user + t.system);
  }
  return out;
}

/** user + system CPU seconds a live process has used so far. */
export function procCpuSeconds(pid: number): number {
  const t = procCpuTimes(pid);
  return t.user + t.system;
}

/** user + system CPU seconds of every live process whose command name is `comm` (e.g. all `postgres` backends). */
export function commandCpuSeconds(comm: string): number {
  let total = 0;
  for (const pid of readdirSync("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      if (stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")")) === comm) total += procCpuSeconds(Number(pid));
    } catch {
      /* the process ended meanwhile */
    }
  }
  return total;
}

/** GET a URL on 127.0.0.1 and return its body (e.g. /metrics). */
export function httpGetText(url: string, timeoutMs = 5000): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { timeout: timeoutMs }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
      res.on("error", reject);
    });
    req.on("timeout", () => req.destroy(new Error(`GET ${url} timed out`)));
    req.on("error", reject);
  });
}

/** One sample's value from Prometheus text (`name` or `name{labels}`), NaN when absent. */
export function metricValue(text: string, name: string): number {
  const line = text.split("\n").find((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`));
  return line ? Number(line.slice(line.lastIndexOf(" ") + 1)) : NaN;
}
