/**
 * The command runner: the one seam through which every command the model or a client runs (the
 * `shell` tool and `command/exec`) is started. It builds the environment from the allow list,
 * wraps the argv in bubblewrap for a confined policy, and fails closed: when the sandbox cannot
 * be set up, a confined command is refused, never run unconfined.
 */
import { execFile } from "node:child_process";
import { promises as fs } from "node:fs";
import path from "node:path";
import { notStarted, runProcess, type RunOptions, type RunResult } from "../tools/process.js";
import { TrustBoundary } from "./boundary.js";
import { bwrapArgs } from "./bwrap.js";
import { commandEnvironment } from "./environment.js";
import { prlimitArgs } from "./limits.js";
import type { Confinement, ResolvedSandbox } from "./policy.js";
import { SandboxView } from "./view.js";

export type SandboxStatus =
  | { available: true; bwrap: string; version: string; /** prlimit's path, or null: no resource limits. */ prlimit: string | null }
  | { available: false; reason: string };

export interface CommandRunnerOptions {
  /** The bubblewrap binary (default: `bwrap` on PATH). */
  bwrapPath?: string;
  /** What no command or tool may touch, private /tmp, limits (default: hiddenPaths only). */
  boundary?: TrustBoundary;
  /** Paths no sandboxed command may read, when no boundary is given (tests). */
  hiddenPaths?: readonly string[];
  /** Environment names passed to commands besides the defaults (see environment.ts). */
  envAllow?: readonly string[];
  /** The environment the allow list is applied to (default: process.env). */
  env?: NodeJS.ProcessEnv;
  /** Set for every command after the allow list. */
  set?: Record<string, string>;
}

export interface CommandRequest extends Omit<RunOptions, "file" | "args" | "env"> {
  argv: readonly string[];
  /** The confinement, or null to run unconfined (danger-full-access, or an approved escalation). */
  sandbox: ResolvedSandbox;
  /** Added to (string) or removed from (null) the allow-listed environment. */
  env?: Record<string, string | null | undefined>;
}

export type CommandResult = { ran: true; sandboxed: boolean; run: RunResult } | { ran: false; reason: string };

export const SANDBOX_HELP =
  "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap) and allow user namespaces (in a container: run it with --security-opt seccomp=unconfined --security-opt apparmor=unconfined, or use danger-full-access and let the container be the sandbox)";

export class CommandRunner {
  private readonly bwrap: string;
  private probed: Promise<SandboxStatus> | null = null;
  /** The one boundary every command, tool and MCP server of this server is held to. */
  readonly boundary: TrustBoundary;

  constructor(private readonly opts: CommandRunnerOptions = {}) {
    this.bwrap = opts.bwrapPath ?? "bwrap";
    this.boundary = opts.boundary ?? new TrustBoundary({ hidden: opts.hiddenPaths ?? [] });
  }

  /** Whether confined commands can run here (probed once: a real sandbox running `true`). */
  status(): Promise<SandboxStatus> {
    return (this.probed ??= this.probe());
  }

  /** The allow-listed environment with overrides applied. */
  environment(overrides: CommandRequest["env"] = {}): Record<string, string> {
    const env = commandEnvironment({ allow: this.opts.envAllow, set: this.opts.set }, this.opts.env ?? process.env);
    for (const [k, v] of Object.entries(overrides)) {
      if (v === null || v === undefined) delete env[k];
      else env[k] = v;
    }
    return env;
  }

  async run(req: CommandRequest): Promise<CommandResult> {
    const { argv, sandbox, env, ...rest } = req;
    const environment = this.environment(env);
    if (sandbox === null) {
      const run = await runProcess({ ...rest, file: argv[0], args: argv.slice(1), env: environment });
      return { ran: true, sandboxed: false, run };
    }
    const status = await this.status();
    if (!status.available) return { ran: false, reason: `the OS sandbox is not available (${status.reason}); a ${sandbox.mode} command is never run unconfined` };
    // Inside bwrap a missing program is bwrap's own error (exit 1): find it first, as spawn would.
    const missing = await missingProgram(argv[0], environment.PATH, req.cwd);
    if (missing) return { ran: true, sandboxed: true, run: notStarted(missing) };
    const args = await this.sandboxArgs(sandbox, req.cwd, argv, status.prlimit, false);
    // req.cwd is a path inside the sandbox (--chdir): in a private /tmp it need not exist outside.
    const run = await runProcess({ ...rest, cwd: "/", file: this.bwrap, args, env: environment });
    return { ran: true, sandboxed: true, run };
  }

  /**
   * How to start a long-running process (an MCP server) in the sandbox: the program, arguments and
   * environment to hand to whatever spawns it. Throws when a confined process cannot be started.
   */
  async spawnSpec(argv: readonly string[], sandbox: ResolvedSandbox, cwd: string, env: CommandRequest["env"] = {}): Promise<{ command: string; args: string[]; env: Record<string, string>; cwd: string }> {
    const environment = this.environment(env);
    if (sandbox === null) return { command: argv[0]!, args: argv.slice(1), env: environment, cwd };
    const status = await this.status();
    if (!status.available) throw new Error(`the OS sandbox is not available (${status.reason}); a ${sandbox.mode} process is never run unconfined`);
    const missing = await missingProgram(argv[0], environment.PATH, cwd);
    if (missing) throw new Error(`${argv[0]}: command not found`);
    // A long-lived process (an MCP server): no CPU-time limit, it would add up over days.
    return { command: this.bwrap, args: await this.sandboxArgs(sandbox, cwd, argv, status.prlimit, true), env: environment, cwd };
  }

  /** The view of `sandbox` (the boundary joined with the confinement), as tools see it too. */
  view(sandbox: ResolvedSandbox): Promise<SandboxView> {
    return SandboxView.create(this.boundary, sandbox);
  }

  /**
   * bwrap's arguments: the view's mounts (without the network, /run's sockets — database, docker,
   * dbus — are masked too: they are the way out), then the limits through prlimit, then argv.
   */
  private async sandboxArgs(sandbox: Confinement, cwd: string, argv: readonly string[], prlimit: string | null, longLived: boolean): Promise<string[]> {
    const { mounts, readOnlyMasks } = await (await this.view(sandbox)).mountArgs(cwd);
    const limits = prlimit === null ? [] : prlimitArgs(this.boundary.limits, { longLived });
    const command = limits.length > 0 ? [prlimit!, ...limits, "--", ...argv] : argv;
    return bwrapArgs({ network: sandbox.network, cwd, mounts, readOnlyMasks, argv: command });
  }

  private async probe(): Promise<SandboxStatus> {
    const confinement: Confinement = { mode: "read-only", writableRoots: [], readOnlyPaths: [], network: false };
    const version = await execText(this.bwrap, ["--version"]);
    if (!version.ok) return { available: false, reason: `${this.bwrap} cannot be run: ${version.text}` };
    const prlimit = await findProgram("prlimit", process.env.PATH ?? "/usr/bin:/bin");
    const trial = await execText(this.bwrap, await this.sandboxArgs(confinement, "/", ["true"], prlimit, false));
    if (!trial.ok) return { available: false, reason: `${this.bwrap} cannot create a sandbox here: ${trial.text}` };
    return { available: true, bwrap: this.bwrap, version: version.text.replace(/^bubblewrap\s*/, ""), prlimit };
  }
}

/** The absolute path of `program` on `PATH`, or null. */
async function findProgram(program: string, PATH: string): Promise<string | null> {
  for (const dir of PATH.split(":").filter(Boolean)) {
    const p = path.join(dir, program);
    const ok = await fs.access(p, fs.constants.X_OK).then(() => true, () => false);
    if (ok) return p;
  }
  return null;
}

/** Why `program` cannot be started (as spawn would report it), or null when it can be. */
async function missingProgram(program: string | undefined, PATH: string | undefined, cwd: string): Promise<{ code: string; message: string } | null> {
  if (!program) return { code: "ENOENT", message: "empty command" };
  const candidates = program.includes("/") ? [path.resolve(cwd, program)] : (PATH ?? "").split(":").filter(Boolean).map((d) => path.join(d, program));
  for (const c of candidates) {
    try {
      await fs.access(c, fs.constants.X_OK);
      if ((await fs.stat(c)).isFile()) return null;
    } catch {
      /* try the next one */
    }
  }
  return { code: "ENOENT", message: `spawn ${program} ENOENT` };
}

function execText(file: string, args: string[]): Promise<{ ok: boolean; text: string }> {
  return new Promise((resolve) => {
    execFile(file, args, { timeout: 10_000, env: { PATH: process.env.PATH ?? "/usr/bin:/bin" } }, (err, stdout, stderr) => {
      const text = (String(stderr).trim() || String(stdout).trim() || (err ? err.message : "")).split("\n")[0] ?? "";
      resolve({ ok: err === null, text });
    });
  });
}
