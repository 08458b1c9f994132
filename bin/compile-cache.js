// Node's on-disk compile cache (module.enableCompileCache, Node ≥ 22.1): V8 keeps the code it
// compiled for our modules, and the next start reuses it instead of parsing and compiling ~2 MB of
// bundle again (issue 33 item 3; bench/RESULTS.md has the numbers). On Node 20 the function does
// not exist and this does nothing.
//
// Where: the user's cache directory ($XDG_CACHE_HOME, else ~/.cache)/agent-app-server/compile-cache,
// not the server's --home: the cache belongs to the installed code and the Node version (Node keys
// its entries by both, in a subdirectory per version), not to one server's data; it is needed
// before the arguments that name the home are read; and several homes (tests, `exec` runs) share
// one installation. The OS temporary directory (Node's default) is cleared at reboot and shared
// between users. Node's own variables still apply: NODE_COMPILE_CACHE=DIR chooses another
// directory, NODE_DISABLE_COMPILE_CACHE=1 turns it off. A cache that cannot be written (read-only
// home) only costs the cache: Node reports that as a status, and start-up goes on.
import module from "node:module";
import os from "node:os";
import path from "node:path";

/** The directory this installation's compile cache goes to. */
export function compileCacheDir(env = process.env) {
  const base = env.XDG_CACHE_HOME || path.join(os.homedir(), ".cache");
  return path.join(base, "agent-app-server", "compile-cache");
}

/**
 * Turns the compile cache on where Node has one. Returns the directory in use, or null (Node 20,
 * disabled, or it could not be enabled).
 */
export function enableCompileCache(env = process.env) {
  if (typeof module.enableCompileCache !== "function") return null;
  try {
    const result = module.enableCompileCache(env.NODE_COMPILE_CACHE || compileCacheDir(env));
    const { ENABLED, ALREADY_ENABLED } = module.constants.compileCacheStatus;
    return result.status === ENABLED || result.status === ALREADY_ENABLED ? (result.directory ?? null) : null;
  } catch {
    return null; // a cache is an optimisation: never a reason not to start
  }
}

/**
 * Writes what was compiled so far (Node ≥ 22.10; otherwise Node writes it at exit): called once
 * the server is ready, so that the next start finds the cache even if this process is killed.
 */
export function flushCompileCache() {
  try {
    module.flushCompileCache?.();
  } catch {
    // nothing lost but the cache
  }
}
