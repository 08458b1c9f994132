/**
 * Run directories of the test suite (vitest.config.ts): each run records its owner — the pid of
 * the vitest process — in its directory, so that a later run can tell an abandoned one from one in
 * use. A run that was killed (Ctrl-C twice, SIGKILL, a CI time-out) never reaches the global
 * teardown, and its directory (~300 MiB at its peak, on the RAM disk) and CLI bundle would stay.
 */
import { readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";

export const RUN_DIR_PREFIX = "aas-test-run-";
/** The file in a run directory that holds its owner's pid. */
export const OWNER_FILE = ".aas-test-run-owner";

export function claimRunDir(dir: string, pid = process.pid): void {
  writeFileSync(path.join(dir, OWNER_FILE), String(pid));
}

/**
 * Removes the run directories under `base` whose owner process is gone, with the CLI bundle of
 * each (`bundleDirOf(name)`). A live owner (a run beside this one) keeps its own; a directory with
 * no owner recorded is left alone. Returns the names removed.
 */
export function removeAbandonedRuns(base: string, bundleDirOf: (runName: string) => string): string[] {
  let names: string[];
  try {
    names = readdirSync(base).filter((n) => n.startsWith(RUN_DIR_PREFIX));
  } catch {
    return [];
  }
  const removed: string[] = [];
  for (const name of names) {
    const dir = path.join(base, name);
    let owner: number;
    try {
      owner = Number(readFileSync(path.join(dir, OWNER_FILE), "utf8"));
    } catch {
      continue;
    }
    if (!Number.isInteger(owner) || owner <= 0 || processAlive(owner)) continue;
    rmSync(dir, { recursive: true, force: true });
    rmSync(bundleDirOf(name), { recursive: true, force: true });
    removed.push(name);
  }
  return removed;
}

export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM"; // alive, another user's
  }
}
