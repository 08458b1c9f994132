/**
 * bin/compile-cache.js, as bin/app-server.js uses it: on Node ≥ 22.1 the compile cache goes to
 * $XDG_CACHE_HOME/agent-app-server/compile-cache and is filled; on Node 20 nothing is created and
 * nothing fails; a cache directory that cannot be made never stops the process. The test runs on
 * whichever Node runs vitest (CI: 20 and 24), so each branch is checked where it applies.
 */
import { execFile } from "node:child_process";
import { existsSync, readdirSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import nodeModule from "node:module";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { afterEach, describe, expect, it } from "vitest";

const REPO_ROOT = path.resolve(import.meta.dirname, "..");
const hasCompileCache = typeof (nodeModule as { enableCompileCache?: unknown }).enableCompileCache === "function";

/** A child process that enables the cache like bin/app-server.js, loads a module, flushes, exits. */
async function runChild(env: Record<string, string>): Promise<{ dir: string | null }> {
  const lib = pathToFileURL(path.join(REPO_ROOT, "bin", "compile-cache.js")).href;
  const someModule = pathToFileURL(path.join(REPO_ROOT, "node_modules", "ws", "wrapper.mjs")).href;
  const script = `const m = await import(${JSON.stringify(lib)}); const dir = m.enableCompileCache(); await import(${JSON.stringify(someModule)}); m.flushCompileCache(); console.log(JSON.stringify({ dir }));`;
  const childEnv: NodeJS.ProcessEnv = { ...process.env, ...env };
  delete childEnv.NODE_COMPILE_CACHE;
  delete childEnv.NODE_DISABLE_COMPILE_CACHE;
  const { stdout } = await promisify(execFile)(process.execPath, ["--input-type=module", "-e", script], { env: childEnv });
  return JSON.parse(stdout.trim()) as { dir: string | null };
}

describe("Node's compile cache (bin/compile-cache.js)", () => {
  const dirs: string[] = [];
  afterEach(async () => {
    for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
  });

  it(hasCompileCache ? "is created under $XDG_CACHE_HOME/agent-app-server and filled" : "is a no-op on this Node (no module.enableCompileCache)", async () => {
    const base = await mkdtemp(path.join(os.tmpdir(), "aas-compile-cache-"));
    dirs.push(base);
    const expected = path.join(base, "agent-app-server", "compile-cache");
    const { dir } = await runChild({ XDG_CACHE_HOME: base });
    if (hasCompileCache) {
      expect(dir).toBe(expected);
      // Node keeps one subdirectory per Node version / V8 flags, with one file per compiled module.
      const entries = readdirSync(expected, { recursive: true }) as string[];
      expect(entries.length).toBeGreaterThan(1);
    } else {
      expect(dir).toBeNull();
      expect(existsSync(path.join(base, "agent-app-server"))).toBe(false);
    }
  });

  it("a cache directory that cannot be created does not stop the process", async () => {
    const base = await mkdtemp(path.join(os.tmpdir(), "aas-compile-cache-"));
    dirs.push(base);
    // XDG_CACHE_HOME is a regular file: no directory can be made under it (even as root).
    const notADir = path.join(base, "file");
    writeFileSync(notADir, "");
    const { dir } = await runChild({ XDG_CACHE_HOME: notADir });
    expect(dir).toBeNull();
  });
});
