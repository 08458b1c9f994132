/**
 * Resource limits of sandboxed processes (setrlimit, applied with util-linux's `prlimit` as the
 * first program inside the sandbox, so they bind the command and everything it starts, not
 * bubblewrap's own init):
 *
 *   processes      RLIMIT_NPROC   tasks (processes and threads) of the user; each sandbox has its
 *                                  own user namespace, whose tasks the kernel counts on their own.
 *                                  Not enforced by the kernel for root (kuid 0): run the server as
 *                                  an ordinary user for a fork bomb to stop here.
 *   address-space  RLIMIT_AS      virtual memory per process. High by default: WebAssembly
 *                                  runtimes reserve ~32 GiB (a Node process with PGlite reserves
 *                                  31 GiB), and a lower value would break them.
 *   file-size      RLIMIT_FSIZE   the largest file a process may write (SIGXFSZ beyond).
 *   cpu            RLIMIT_CPU     CPU seconds per process (SIGXCPU, then SIGKILL). Not applied to
 *                                  MCP servers, which live as long as the server.
 *
 * `--command-limits` / APP_SERVER_COMMAND_LIMITS: `processes=512,address-space=32G,cpu=600`;
 * `unlimited` lifts one limit; sizes take K, M, G or T (powers of 1024).
 */
export interface CommandLimits {
  processes: number | null;
  addressSpaceBytes: number | null;
  fileSizeBytes: number | null;
  cpuSeconds: number | null;
}

const GiB = 1024 ** 3;

export const DEFAULT_COMMAND_LIMITS: CommandLimits = {
  processes: 1024,
  addressSpaceBytes: 64 * GiB,
  fileSizeBytes: 8 * GiB,
  cpuSeconds: 3600,
};

const KEYS = { processes: "processes", "address-space": "addressSpaceBytes", "file-size": "fileSizeBytes", cpu: "cpuSeconds" } as const;
const SIZE_UNITS: Record<string, number> = { "": 1, K: 1024, M: 1024 ** 2, G: GiB, T: 1024 ** 4 };

export class LimitsError extends Error {}

function parseValue(key: keyof typeof KEYS, raw: string): number | null {
  if (raw === "unlimited") return null;
  const sized = key === "address-space" || key === "file-size";
  const m = sized ? /^(\d+)([KMGT]?)(?:i?B)?$/i.exec(raw) : /^(\d+)()$/.exec(raw);
  const n = m ? Number(m[1]) * SIZE_UNITS[m[2]!.toUpperCase()]! : NaN;
  if (!Number.isSafeInteger(n) || n < 1) throw new LimitsError(`invalid ${key} limit: ${raw} (expected a positive ${sized ? "size such as 512M or 8G" : "integer"}, or unlimited)`);
  return n;
}

/** Parses `name=value,…` over the defaults; throws LimitsError naming the bad part. */
export function parseCommandLimits(text: string, base: CommandLimits = DEFAULT_COMMAND_LIMITS): CommandLimits {
  const out = { ...base };
  for (const part of text.split(",").map((p) => p.trim()).filter(Boolean)) {
    const [name, value, extra] = part.split("=").map((s) => s.trim());
    if (!name || value === undefined || extra !== undefined || !(name in KEYS))
      throw new LimitsError(`invalid command limit: ${part} (expected NAME=VALUE with NAME one of ${Object.keys(KEYS).join(", ")})`);
    out[KEYS[name as keyof typeof KEYS]] = parseValue(name as keyof typeof KEYS, value);
  }
  return out;
}

/** prlimit's arguments for the limits (soft = hard, so a process cannot raise them); [] when none. */
export function prlimitArgs(limits: CommandLimits, opts: { longLived?: boolean } = {}): string[] {
  const args: string[] = [];
  const set = (flag: string, v: number | null) => {
    if (v !== null) args.push(`--${flag}=${v}:${v}`);
  };
  set("nproc", limits.processes);
  set("as", limits.addressSpaceBytes);
  set("fsize", limits.fileSizeBytes);
  if (!opts.longLived) set("cpu", limits.cpuSeconds);
  return args;
}

/** For logs and docs: `processes=1024, address-space=64G, …`. */
export function describeLimits(limits: CommandLimits): string {
  const size = (n: number | null) => (n === null ? "unlimited" : n % GiB === 0 ? `${n / GiB}G` : n % 1024 ** 2 === 0 ? `${n / 1024 ** 2}M` : String(n));
  return `processes=${limits.processes ?? "unlimited"}, address-space=${size(limits.addressSpaceBytes)}, file-size=${size(limits.fileSizeBytes)}, cpu=${limits.cpuSeconds ?? "unlimited"}`;
}
