/**
 * One temporary directory per test run: vitest.config.ts points TMPDIR at it before the workers
 * start, so everything a run creates under os.tmpdir() — test homes, seeded databases, token
 * files, browser profiles, the commands' files — lands there, and the teardown removes it. A run
 * leaves nothing in /tmp, whatever a test forgot (and a test that cleans up after itself still
 * should: the run directory is a backstop, listed when something was left in it).
 */
import { readdirSync, rmSync } from "node:fs";

export default function setup(): () => void {
  const dir = process.env.AAS_TEST_RUN_TMPDIR;
  return () => {
    if (!dir) return;
    let left: string[] = [];
    try {
      left = readdirSync(dir);
    } catch {
      return;
    }
    if (left.length > 0 && process.env.AAS_TEST_LIST_LEFTOVERS === "1") console.warn(`[tmp] left by tests and removed: ${left.join(", ")}`);
    rmSync(dir, { recursive: true, force: true });
  };
}
