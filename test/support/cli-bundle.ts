/**
 * The `app-server` command the tests spawn, bundled from src/ once per test run.
 *
 * Spawning `node --import tsx src/main.ts` makes every child server resolve, read and transform
 * ~1 000 TypeScript and package modules before it can listen (~0.7 s more per process than a
 * bundle, and the suite starts ~150 server processes). dist/ would be faster still but can be older
 * than src/ in a working tree, so the global setup bundles src/ itself with esbuild (well under a
 * second) and every spawned server of the run uses that: it is always the code under test.
 *
 * The bundle lives under node_modules/.cache (so that the packages left external — PGlite, which
 * loads its WASM next to its own modules — resolve from it), one directory per run, removed by the
 * teardown.
 */
import { build, type Plugin } from "esbuild";
import { readFile, rm, rmdir } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const REPO_ROOT = fileURLToPath(new URL("../../", import.meta.url));
const SRC = path.join(REPO_ROOT, "src");

/** Where this run's bundle goes: chosen before the workers start (vitest.config.ts) so they inherit it. */
export function cliBundleDir(runId: string): string {
  return path.join(REPO_ROOT, "node_modules", ".cache", "aas-test-cli", runId);
}

export const cliBundleEntry = (dir: string) => path.join(dir, "main.js");

// Our modules find files next to themselves (../../migrations, ../public, ../package.json) through
// import.meta.url: each bundled module keeps the URL of its source file.
const keepSourceUrls: Plugin = {
  name: "keep-source-urls",
  setup(b) {
    b.onLoad({ filter: /\.ts$/ }, async (args) => {
      if (!args.path.startsWith(SRC + path.sep)) return undefined;
      const source = await readFile(args.path, "utf8");
      if (!source.includes("import.meta.url")) return undefined;
      return { contents: source.replaceAll("import.meta.url", JSON.stringify(pathToFileURL(args.path).href)), loader: "ts" };
    });
  },
};

export async function buildCliBundle(dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true });
  await build({
    entryPoints: [path.join(SRC, "main.ts")],
    outdir: dir,
    bundle: true,
    splitting: true,
    format: "esm",
    platform: "node",
    target: "node20",
    sourcemap: "linked", // read only with NODE_OPTIONS=--enable-source-maps
    logLevel: "warning",
    external: ["@electric-sql/pglite", "@electric-sql/pglite/*"],
    banner: { js: 'import { createRequire as __bundleRequire } from "node:module"; const require = __bundleRequire(import.meta.url);' },
    plugins: [keepSourceUrls],
  });
}

export async function removeCliBundle(dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true });
  // The parent too, when no other run is using it.
  await rmdir(path.dirname(dir)).catch(() => {});
}
