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
import { bwrapArgs, type MaskedPath } from "./bwrap.js";
import { commandEnvironment } from "./environment.js";
import type { Confinement, ResolvedSandbox } from "./policy.js";

export type SandboxStatus = { available: true; bwrap: string; version: string } | { available: false; reason: string };

export interface CommandRunnerOptions {
  /** The bubblewrap binary (default: `bwrap` on PATH). */
  bwrapPath?: string;
  /** Paths no sandboxed command may read: the server's home (its database, tokens), token files. */
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

/** Always hidden where they exist: readable by root-owned sandboxes, useful to nobody's build. */
const SYSTEM_SECRETS = ["/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-"];

export const SANDBOX_HELP =
  "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap) and allow user namespaces (in a container: run it with --security-opt seccomp=unconfined --security-opt apparmor=unconfined, or use danger-full-access and let the container be the sandbox)";

export class CommandRunner {
  private readonly bwrap: string;
  private probed: Promise<SandboxStatus> | null = null;
  private masksCache: Promise<MaskedPath[]> | null = null;

  constructor(private readonly opts: CommandRunnerOptions = {}) {
    this.bwrap = opts.bwrapPath ?? "bwrap";
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
    const args = bwrapArgs({ confinement: sandbox, cwd: req.cwd, masks: await this.masks(sandbox), argv });
    const run = await runProcess({ ...rest, file: this.bwrap, args, env: environment });
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
    return { command: this.bwrap, args: bwrapArgs({ confinement: sandbox, cwd, masks: await this.masks(sandbox), argv }), env: environment, cwd };
  }

  private masks(c: Confinement): Promise<MaskedPath[]> {
    const base = (this.masksCache ??= existingMasks([...(this.opts.hiddenPaths ?? []), ...SYSTEM_SECRETS]));
    // Without the network, /run's sockets (database, docker, dbus) are the way out: hide them.
    // With it, /run stays (resolv.conf often points into it) — loopback is reachable anyway.
    if (c.network) return base;
    return base.then(async (m) => [...m, ...(await existingMasks(["/run", "/var/run"]))]);
  }

  private async probe(): Promise<SandboxStatus> {
    const confinement: Confinement = { mode: "read-only", writableRoots: [], readOnlyPaths: [], network: false };
    const args = bwrapArgs({ confinement, cwd: "/", masks: await this.masks(confinement), argv: ["true"] });
    const version = await execText(this.bwrap, ["--version"]);
    if (!version.ok) return { available: false, reason: `${this.bwrap} cannot be run: ${version.text}` };
    const trial = await execText(this.bwrap, args);
    if (!trial.ok) return { available: false, reason: `${this.bwrap} cannot create a sandbox here: ${trial.text}` };
    return { available: true, bwrap: this.bwrap, version: version.text.replace(/^bubblewrap\s*/, "") };
  }
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

async function existingMasks(paths: readonly string[]): Promise<MaskedPath[]> {
  const out: MaskedPath[] = [];
  for (const p of paths) {
    const abs = path.resolve(p);
    const st = await fs.lstat(abs).catch(() => null);
    if (st === null || st.isSymbolicLink()) continue; // /var/run → /run is covered by /run
    const real = await fs.realpath(abs).catch(() => abs);
    if (!out.some((m) => m.path === real)) out.push({ path: real, kind: st.isDirectory() ? "dir" : "file" });
  }
  return out;
}

function execText(file: string, args: string[]): Promise<{ ok: boolean; text: string }> {
  return new Promise((resolve) => {
    execFile(file, args, { timeout: 10_000, env: { PATH: process.env.PATH ?? "/usr/bin:/bin" } }, (err, stdout, stderr) => {
      const text = (String(stderr).trim() || String(stdout).trim() || (err ? err.message : "")).split("\n")[0] ?? "";
      resolve({ ok: err === null, text });
    });
  });
}
