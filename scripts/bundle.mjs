// Bundles the compiled server (dist/main.js, from tsc) into dist/bundle/: one file for start-up
// plus chunks for what is loaded later (`await import()`: provider SDKs, the CLI client, …).
// Resolving and reading ~1 000 module files is most of what bundling saves (issue 16).
// PGlite stays external: it loads its WASM and data files next to its own modules.
import { build } from "esbuild";
import { readFile, rm } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("../", import.meta.url));
const dist = path.join(root, "dist");
const outdir = path.join(dist, "bundle");

// Our modules find files next to themselves (../../migrations, ../public, ../package.json) through
// import.meta.url: give each bundled dist/ module the URL it had before bundling.
const keepModuleUrls = {
  name: "keep-module-urls",
  setup(b) {
    b.onLoad({ filter: /\.js$/ }, async (args) => {
      if (!args.path.startsWith(dist + path.sep) || args.path.startsWith(outdir)) return undefined;
      const source = await readFile(args.path, "utf8");
      if (!source.includes("import.meta.url")) return undefined;
      const rel = path.relative(outdir, args.path).split(path.sep).join("/");
      return { contents: source.replaceAll("import.meta.url", `new URL(${JSON.stringify(rel)}, import.meta.url).href`), loader: "js" };
    });
  },
};

// zod's `z.locales` re-exports its ~50 message locales (290 KiB of the start-up chunk, minified);
// the server uses only English, which zod configures itself (classic/schemas.js imports en.js).
// So the bundle's locales barrel is English alone: `z.locales.en` stays, the others are absent.
const zodEnglishOnly = {
  name: "zod-english-only",
  setup(b) {
    b.onLoad({ filter: /[\\/]zod[\\/]v4[\\/]locales[\\/]index\.js$/ }, () => ({ contents: 'export { default as en } from "./en.js";\n', loader: "js" }));
  },
};

// What fastify requires only on paths this server never takes stays outside the bundle (node
// resolves it from node_modules if it ever runs): its JSON Schema compilers (routes have no schema;
// src/transport/websocket.ts gives fastify its own compilersFactory) and inject()'s
// light-my-request. Bundled, they were ~400 KiB of the start-up chunk that V8 read at every start
// without running (esbuild puts a lazily required CommonJS module in the chunk of its requirer).
const lazyFastifyParts = ["@fastify/ajv-compiler", "@fastify/fast-json-stringify-compiler", "light-my-request"];

await rm(outdir, { recursive: true, force: true }); // chunk names change with their contents
await build({
  entryPoints: [path.join(dist, "main.js")],
  outdir,
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "node",
  target: "node20",
  sourcemap: true,
  // Whitespace and syntax only: ~35 % less code to read and parse at start-up, and V8 keeps each
  // module's source text in memory for the life of the process (idle RSS 82 → 76 MiB, issue 33
  // item 4). Identifiers stay: stack traces in logs keep their function names (the .map has lines).
  minifyWhitespace: true,
  minifySyntax: true,
  logLevel: "warning",
  external: ["@electric-sql/pglite", "@electric-sql/pglite/*", ...lazyFastifyParts],
  // CommonJS packages inside an ES module bundle still call require() for node: built-ins.
  banner: { js: 'import { createRequire as __bundleRequire } from "node:module"; const require = __bundleRequire(import.meta.url);' },
  plugins: [keepModuleUrls, zodEnglishOnly],
});
