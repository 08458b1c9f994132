/**
 * Before the tests: the run's bundle of the `app-server` command (cli-bundle.ts) and the embedded
 * database seeds (pglite-seed.ts). After: removes them and the run's temporary directory.
 *
 * One temporary directory per test run: vitest.config.ts points TMPDIR at it before the workers
 * start, so everything a run creates under os.tmpdir() — test homes, seeded databases, token
 * files, browser profiles, the commands' files — lands there, and the teardown removes it. A run
 * leaves nothing in /tmp, whatever a test forgot (and a test that cleans up after itself still
 * should: the run directory is a backstop, listed when something was left in it).
 */
import { readdirSync, rmSync } from "node:fs";
import { buildCliBundle, removeCliBundle } from "./cli-bundle.js";
import { pgliteSeedPaths, preparePgliteSeeds } from "./pglite-seed.js";
import { OWNER_FILE } from "./run-dirs.js";

export default async function setup(): Promise<() => Promise<void>> {
  const dir = process.env.AAS_TEST_RUN_TMPDIR;
  const bundle = process.env.AAS_TEST_CLI_BUNDLE;
  const seeds = pgliteSeedPaths();
  // esbuild works in its own process while PGlite's initdb keeps this one busy.
  await Promise.all([bundle ? buildCliBundle(bundle) : undefined, seeds ? preparePgliteSeeds(seeds) : undefined]);
  return async () => {
    if (bundle) await removeCliBundle(bundle);
    if (!dir) return;
    let left: string[] = [];
    try {
      left = readdirSync(dir).filter((n) => n !== OWNER_FILE);
    } catch {
      return;
    }
    if (left.length > 0 && process.env.AAS_TEST_LIST_LEFTOVERS === "1") console.warn(`[tmp] left by tests and removed: ${left.join(", ")}`);
    rmSync(dir, { recursive: true, force: true });
  };
}
