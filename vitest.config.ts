import { spawnSync } from "node:child_process";
import { accessSync, chmodSync, constants, mkdtempSync, readdirSync, readFileSync, statfsSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { defineConfig } from "vitest/config";
import { bwrapArgs } from "./src/sandbox/bwrap.js";
import { cliBundleDir } from "./test/support/cli-bundle.js";
import { claimRunDir, removeAbandonedRuns, RUN_DIR_PREFIX } from "./test/support/run-dirs.js";

/**
 * Test files that run commands inside the OS sandbox say `@needs-os-sandbox` in their header.
 * Where bubblewrap is missing or cannot create a sandbox they are left out, and the run says which
 * and why; with REQUIRE_SANDBOX=1 (.ci/run) that is an error instead, so CI never skips them.
 */
function sandboxExclusions(): string[] {
  const probe = spawnSync(
    process.env.APP_SERVER_BWRAP || "bwrap",
    bwrapArgs({ network: false, cwd: "/", mounts: [], readOnlyMasks: [], argv: ["true"] }),
    { encoding: "utf8", timeout: 10_000 },
  );
  if (probe.status === 0) return [];
  const reason = (probe.error?.message ?? probe.stderr ?? "").trim().split("\n")[0] || `exit ${probe.status}`;
  if (process.env.REQUIRE_SANDBOX === "1") throw new Error(`REQUIRE_SANDBOX=1 but the OS sandbox (bubblewrap) cannot run here: ${reason}`);
  const files = (readdirSync("test", { recursive: true }) as string[])
    .filter((f) => f.endsWith(".test.ts"))
    .map((f) => path.join("test", f))
    .filter((f) => readFileSync(f, "utf8").includes("@needs-os-sandbox"));
  console.warn(`\n[skipped] ${files.length} test files need the OS sandbox, which cannot run here (${reason}); install bubblewrap to run them:\n  ${files.join("\n  ")}\n`);
  return files;
}

/**
 * Where the run's temporary directory goes: the RAM disk (/dev/shm) when it has room, else the
 * system's temporary directory; AAS_TEST_TMP_BASE chooses. The suite creates hundreds of PGlite data
 * directories (~1 000 files each) and server homes: on a disk file system every file creation is
 * a journaled metadata write, and loading a PGlite template took 1.0–1.2 s there against 0.3–0.4 s
 * in tmpfs (a whole run without Postgres: 263 s → 161 s). Docker's default /dev/shm (64 MiB) is
 * too small, hence the free-space check.
 */
function tmpBase(): string {
  if (process.env.AAS_TEST_TMP_BASE) return process.env.AAS_TEST_TMP_BASE;
  try {
    const fs = statfsSync("/dev/shm");
    if (fs.bavail * fs.bsize >= 2 * 1024 ** 3) {
      accessSync("/dev/shm", constants.W_OK);
      return "/dev/shm";
    }
  } catch {
    // No /dev/shm (or not writable): the system's temporary directory.
  }
  return os.tmpdir();
}

/**
 * Everything a run puts in the temporary directory goes under one directory of its own, removed
 * by the global teardown (test/support/global-setup.ts): set before the workers are forked, so
 * they and every process they start inherit it.
 */
function runTmpdir(): string {
  if (process.env.AAS_TEST_RUN_TMPDIR) return process.env.AAS_TEST_RUN_TMPDIR;
  const base = tmpBase();
  removeAbandonedRuns(base, cliBundleDir);
  const dir = mkdtempSync(path.join(base, RUN_DIR_PREFIX));
  claimRunDir(dir);
  // Traversable (not listable) by other users: the private PostgreSQL of the outage test runs as
  // the `postgres` user in a directory of its own under here.
  chmodSync(dir, 0o711);
  process.env.AAS_TEST_RUN_TMPDIR = dir;
  process.env.TMPDIR = dir;
  return dir;
}
const runDir = runTmpdir();

// The bundled `app-server` that spawned servers run (test/support/cli-bundle.ts), built by the
// global setup; one per run, named after the run's temporary directory.
process.env.AAS_TEST_CLI_BUNDLE ??= cliBundleDir(path.basename(runDir));

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/support/global-setup.ts"],
    exclude: ["**/node_modules/**", ...sandboxExclusions()],
    // Generous: CI is a shared 2-core machine; no test asserts on time.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Four forks on a 2-core machine: the suite waits on child processes, Postgres and sockets
    // as much as it computes (a whole run used ~1.3 cores with 2 forks). Measured on a quiet
    // 2-core machine: 551 s with 2 forks, 515 s with 4; no test depends on speed.
    pool: "forks",
    maxWorkers: 4,
    // Each worker runs its files one after another in one process, keeping the modules it loaded
    // (src/ and the packages, ~15 % of the suite's CPU when re-imported per file). Tests must leave
    // no global state behind: env stubs are undone after each test, servers closed in afterEach/All.
    isolate: false,
    unstubEnvs: true,
  },
});
