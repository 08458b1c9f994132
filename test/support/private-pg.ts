/**
 * A private PostgreSQL server that a test starts, kills and restarts itself (issue 12: outages),
 * never the machine's own cluster: its own data directory under the temp dir, its own free port,
 * a Unix socket in that directory. initdb refuses to run as root, so as root it runs as the
 * `postgres` system user (runuser). Where the binaries are missing the tests are skipped with the
 * reason printed; with REQUIRE_PRIVATE_PG=1 (set by .ci/run) that is a failure instead.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";

function findBinDir(): { dir: string | null; reason: string } {
  const root = "/usr/lib/postgresql";
  const versions = existsSync(root) ? readdirSync(root).sort((a, b) => Number(b) - Number(a)) : [];
  for (const v of versions) {
    const dir = path.join(root, v, "bin");
    if (existsSync(path.join(dir, "initdb")) && existsSync(path.join(dir, "pg_ctl"))) return { dir, reason: "" };
  }
  return { dir: null, reason: `no initdb/pg_ctl under ${root}/*/bin` };
}

/** runuser by its path: it lives in /usr/sbin, which a non-login root shell's PATH may lack. */
function findRunuser(): string | null {
  const dirs = [...(process.env.PATH ?? "").split(path.delimiter).filter(Boolean), "/usr/sbin", "/sbin"];
  return dirs.map((d) => path.join(d, "runuser")).find((f) => existsSync(f)) ?? null;
}

const found = findBinDir();
const asRoot = process.getuid?.() === 0;
const runuser = asRoot ? findRunuser() : null;
let reason = found.reason;
if (found.dir && asRoot && spawnSync("id", ["-u", "postgres"]).status !== 0) reason = "running as root and there is no `postgres` user to run initdb as";
else if (found.dir && asRoot && !runuser) reason = "running as root and runuser (util-linux) is missing to run initdb as the `postgres` user";
if (reason) {
  if (process.env.REQUIRE_PRIVATE_PG === "1") throw new Error(`REQUIRE_PRIVATE_PG=1 but a private PostgreSQL cannot be started: ${reason}`);
  console.warn(`[skipped] tests with a private PostgreSQL server: ${reason} (install the postgresql server package)`);
}

/** For describe.skipIf. */
export const noPrivatePg = reason !== "";

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

export class PrivatePostgres {
  private constructor(
    readonly dir: string,
    readonly port: number,
  ) {}

  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/postgres`;
  }

  private get data(): string {
    return path.join(this.dir, "data");
  }

  /** Runs a PostgreSQL binary, as the postgres user when this process is root. */
  private run(bin: string, args: string[]): void {
    const cmd = path.join(found.dir!, bin);
    if (asRoot) execFileSync(runuser!, ["-u", "postgres", "--", cmd, ...args], { stdio: "pipe" });
    else execFileSync(cmd, args, { stdio: "pipe" });
  }

  static async create(): Promise<PrivatePostgres> {
    const dir = mkdtempSync(path.join(os.tmpdir(), "aas-private-pg-"));
    const pg = new PrivatePostgres(dir, await freePort());
    try {
      if (asRoot) {
        const uid = Number(execFileSync("id", ["-u", "postgres"]).toString().trim());
        const gid = Number(execFileSync("id", ["-g", "postgres"]).toString().trim());
        chownSync(dir, uid, gid);
      }
      pg.run("initdb", ["-D", pg.data, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8"]);
      pg.start();
    } catch (err) {
      pg.destroy();
      throw err;
    }
    return pg;
  }

  /** Starts (or restarts) the server on the same port and data; returns once it accepts connections. */
  start(): void {
    const opts = `-p ${this.port} -k ${this.dir} -c listen_addresses=127.0.0.1 -c fsync=off`;
    this.run("pg_ctl", ["-D", this.data, "-l", path.join(this.dir, "log"), "-o", opts, "-w", "start"]);
  }

  /** A crash, not a shutdown: connections drop at once, nothing is flushed politely. */
  kill(): void {
    this.run("pg_ctl", ["-D", this.data, "-m", "immediate", "-w", "stop"]);
  }

  /** Stops the server if it runs and removes its directory (safe to call more than once). */
  destroy(): void {
    if (existsSync(path.join(this.data, "postmaster.pid"))) {
      try {
        this.run("pg_ctl", ["-D", this.data, "-m", "immediate", "-w", "stop"]);
      } catch {
        /* already down */
      }
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}
