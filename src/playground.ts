/**
 * The web playground's files, served by the WebSocket transport at GET / and beside it: public/
 * (index.html, style.css, app.js and the ES modules it imports, loaded natively by the browser —
 * no build step) and the two third-party modules it uses, served from node_modules (no CDN: the
 * page works offline, under a CSP that allows this origin only): markdown-it's self-contained
 * browser build at /vendor/markdown-it.mjs, and highlight.js's browser build of its common
 * languages (one ES module, package @highlightjs/cdn-assets) at /vendor/highlight.mjs.
 * Everything is read once, at start-up.
 */
import { readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

export interface PlaygroundFile {
  type: string;
  body: Buffer;
}

/** Page, scripts and styles come from this origin only; the socket is this origin too. */
export const PLAYGROUND_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
};

/** public/ next to src/ (tsx) or dist/ (built). */
const PUBLIC_DIR = fileURLToPath(new URL("../public/", import.meta.url));

const resolvePackage = createRequire(import.meta.url).resolve;

/** The vendored browser modules: path under the page → where each is in node_modules. */
const VENDOR: Record<string, () => string> = {
  // An ES module with its dependencies bundled in; the package's main is …/dist/markdown-it.cjs.js.
  "vendor/markdown-it.mjs": () => path.join(path.dirname(resolvePackage("markdown-it")), "browser", "markdown-it.esm.min.mjs"),
  // highlight.js core + ~35 common languages (bash, python, typescript, go, rust, sql, diff …), an ES module.
  "vendor/highlight.mjs": () => path.join(path.dirname(resolvePackage("@highlightjs/cdn-assets/package.json")), "es", "highlight.min.js"),
};

/**
 * The files by their path under the page's origin without the leading slash ("index.html",
 * "app.js", "modules/rpc.js", "vendor/markdown-it.mjs"). A missing public/ (a trimmed install)
 * gives an empty map: GET / answers 404 and the server works as before. A missing vendor
 * module is left out: the page checks for each (plain text without markdown-it, no colours
 * without highlight.js).
 */
export function loadPlayground(): Map<string, PlaygroundFile> {
  const files = new Map<string, PlaygroundFile>();
  let names: string[];
  try {
    names = (readdirSync(PUBLIC_DIR, { recursive: true }) as string[]).map((n) => n.split(path.sep).join("/"));
  } catch {
    return files;
  }
  for (const name of names.sort()) {
    const type = TYPES[path.extname(name)];
    if (type) files.set(name, { type, body: readFileSync(path.join(PUBLIC_DIR, name)) });
  }
  for (const [name, locate] of Object.entries(VENDOR)) {
    try {
      files.set(name, { type: TYPES[".mjs"]!, body: readFileSync(locate()) });
    } catch {
      // Not installed: the page does without it.
    }
  }
  return files;
}
