/**
 * Runs the real `app-server` command (this run's bundle of src/, see cli-bundle.ts) as a child process and
 * collects its stdout/stderr as lines, for CLI and stdio tests. Also prepares home directories
 * whose embedded database already exists (cloned from a migrated template), so a spawned server
 * does not spend seconds in initdb.
 */
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { existsSync, rmSync } from "node:fs";
import { cp, mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { randomBytes } from "node:crypto";
import { fileURLToPath, pathToFileURL } from "node:url";
import { openDatabase } from "../../src/store/database.js";
import { cliBundleEntry } from "./cli-bundle.js";
import { pgliteSeedPaths } from "./pglite-seed.js";
import { freshDatabase, TEST_DATABASE_URL } from "./db.js";
import { quietHome } from "./server.js";

export const REPO_ROOT = fileURLToPath(new URL("../../", import.meta.url));

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export class CliProcess {
  readonly stdoutLines: string[] = [];
  readonly stderrLines: string[] = [];
  readonly exited: Promise<Exit>;
  exit: Exit | null = null;
  private waiters: Array<{ stream: "stdout" | "stderr"; match: (line: string) => boolean; resolve: (line: string) => void }> = [];
  private partial = { stdout: "", stderr: "" };

  constructor(readonly child: ChildProcessWithoutNullStreams) {
    child.stdout.setEncoding("utf8");
    child.stderr.setEncoding("utf8");
    child.stdout.on("data", (chunk: string) => this.onData("stdout", chunk));
    child.stderr.on("data", (chunk: string) => this.onData("stderr", chunk));
    // stdin may be closed by the child before we write; a write error must not fail the test run.
    child.stdin.on("error", () => {});
    this.exited = new Promise((resolve) =>
      child.on("close", (code, signal) => {
        for (const s of ["stdout", "stderr"] as const) if (this.partial[s]) this.onData(s, "\n");
        this.exit = { code, signal };
        for (const w of this.waiters.splice(0)) w.resolve(""); // unblock: callers check what they got
        resolve(this.exit);
      }),
    );
  }

  private onData(stream: "stdout" | "stderr", chunk: string): void {
    const text = this.partial[stream] + chunk;
    const parts = text.split("\n");
    this.partial[stream] = parts.pop()!;
    const lines = stream === "stdout" ? this.stdoutLines : this.stderrLines;
    for (const line of parts) {
      lines.push(line);
      for (const w of [...this.waiters]) {
        if (w.stream === stream && w.match(line)) {
          this.waiters.splice(this.waiters.indexOf(w), 1);
          w.resolve(line);
        }
      }
    }
  }

  /** The first line (already seen or future) on `stream` matching; rejects if the process exits first. */
  async waitForLine(stream: "stdout" | "stderr", match: (line: string) => boolean): Promise<string> {
    const lines = stream === "stdout" ? this.stdoutLines : this.stderrLines;
    const seen = lines.find(match);
    if (seen !== undefined) return seen;
    if (this.exit) throw new Error(`process exited (${JSON.stringify(this.exit)}) before the line appeared; stderr:\n${this.stderr}`);
    const line = await new Promise<string>((resolve) => this.waiters.push({ stream, match, resolve }));
    if (this.exit && !match(line)) throw new Error(`process exited (${JSON.stringify(this.exit)}) before the line appeared; stderr:\n${this.stderr}`);
    return line;
  }

  /** The first JSON log line on stderr with this `msg`. */
  async waitForLog(msg: string): Promise<Record<string, any>> {
    const line = await this.waitForLine("stderr", (l) => parseJson(l)?.msg === msg);
    return JSON.parse(line);
  }

  /** Waits for the "listening" log line and returns its url. */
  async listening(): Promise<string> {
    return (await this.waitForLog("listening")).url;
  }

  get stdout(): string {
    return this.stdoutLines.join("\n");
  }

  get stderr(): string {
    return this.stderrLines.join("\n");
  }

  writeLine(obj: unknown): void {
    this.child.stdin.write((typeof obj === "string" ? obj : JSON.stringify(obj)) + "\n");
  }

  /** Stops the process if it is still running (test cleanup). */
  async kill(): Promise<void> {
    if (this.exit) return;
    this.child.kill("SIGKILL");
    await this.exited;
  }
}

export function parseJson(line: string): any {
  try {
    return JSON.parse(line);
  } catch {
    return undefined;
  }
}

/** Environment for a child: ours minus anything that would change the server's configuration. */
export function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const k of Object.keys(env)) if (k.startsWith("APP_SERVER_") || k === "DATABASE_URL") delete env[k];
  // An empty HOME: commands the child server runs (bash -lc) must not read this machine's ~/.bashrc.
  // APP_SERVER_AUTH=none: spawned servers admit tests' clients without a token unless a test opts
  // into authentication (passing APP_SERVER_AUTH itself, or a token).
  return { ...env, HOME: quietHome(), APP_SERVER_AUTH: "none", ...extra };
}

/** tsx's loader and the entry point by absolute path, so that a command can run in any directory. */
const TSX_LOADER = pathToFileURL(path.join(REPO_ROOT, "node_modules", "tsx", "dist", "loader.mjs")).href;
const MAIN = path.join(REPO_ROOT, "src", "main.ts");

/**
 * node's arguments that run `app-server` from src/: the run's bundle of src/ (test/support/cli-bundle.ts,
 * built by the global setup) when there is one, else src/main.ts through tsx (slower to start).
 */
export function cliArgv(): string[] {
  const bundle = process.env.AAS_TEST_CLI_BUNDLE;
  if (bundle && existsSync(cliBundleEntry(bundle))) return [cliBundleEntry(bundle)];
  return ["--import", TSX_LOADER, MAIN];
}

export function spawnCli(args: string[], opts: { env?: Record<string, string>; cwd?: string } = {}): CliProcess {
  const child = spawn(process.execPath, [...cliArgv(), ...args], {
    cwd: opts.cwd ?? REPO_ROOT,
    env: cleanEnv(opts.env),
    stdio: ["pipe", "pipe", "pipe"],
  });
  return new CliProcess(child);
}

/** Runs a command to completion. */
export async function runCli(args: string[], opts: { env?: Record<string, string>; cwd?: string } = {}): Promise<CliProcess & { exit: Exit }> {
  const p = spawnCli(args, opts);
  p.child.stdin.end();
  await p.exited;
  return p as CliProcess & { exit: Exit };
}

let seeded: Promise<{ dir: string; home: string | undefined }> | undefined;

/**
 * A PGlite data directory with the schema migrated: the run's (made once by the global setup,
 * pglite-seed.ts), else one made for this test file (see removeSeed).
 */
async function seededDataDir(): Promise<string> {
  seeded ??= (async () => {
    const shared = pgliteSeedPaths()?.migrated;
    if (shared && existsSync(path.join(shared, "pgdata"))) return { dir: shared, home: undefined };
    const fresh = await freshDatabase("pglite");
    const home = await mkdtemp(path.join(os.tmpdir(), "aas-seed-"));
    const dir = path.join(home, "pglite");
    const db = await openDatabase({ ...fresh.options, dataDir: dir });
    await db.close();
    await fresh.cleanup();
    // Fallback only: vitest may end a worker without an orderly exit; call removeSeed() in afterAll.
    process.once("exit", () => rmSync(home, { recursive: true, force: true }));
    return { dir, home };
  })();
  return (await seeded).dir;
}

/** Deletes this file's seeded data directory, if it made one (call from afterAll of files that use seededHome). */
export async function removeSeed(): Promise<void> {
  if (!seeded) return;
  const s = seeded;
  seeded = undefined;
  const { home } = await s;
  if (home) await rm(home, { recursive: true, force: true });
}

export interface TestHome {
  home: string;
  cleanup(): Promise<void>;
}

/** A new home directory whose embedded database is ready (a copy of the seeded one). */
export async function seededHome(): Promise<TestHome> {
  const home = await mkdtemp(path.join(os.tmpdir(), "aas-cli-"));
  await cp(await seededDataDir(), path.join(home, "pglite"), { recursive: true });
  return { home, cleanup: () => rm(home, { recursive: true, force: true }) };
}

/**
 * A Postgres URL whose sessions use a new schema (postgres.js passes URL query parameters as
 * startup parameters), for spawned servers, which have no --schema flag.
 */
export async function postgresSchemaUrl(): Promise<{ url: string; schema: string; cleanup(): Promise<void> }> {
  if (!TEST_DATABASE_URL) throw new Error("TEST_DATABASE_URL is not set");
  const schema = `t_${randomBytes(6).toString("hex")}`;
  const postgres = (await import("postgres")).default;
  const admin = postgres(TEST_DATABASE_URL, { max: 1, onnotice: () => {} });
  await admin`create schema ${admin(schema)}`;
  await admin.end();
  const url = new URL(TEST_DATABASE_URL);
  url.searchParams.set("search_path", schema);
  return {
    url: url.toString(),
    schema,
    cleanup: async () => {
      const sql = postgres(TEST_DATABASE_URL!, { max: 1, onnotice: () => {} });
      await sql`drop schema if exists ${sql(schema)} cascade`.catch(() => {});
      await sql.end();
    },
  };
}
