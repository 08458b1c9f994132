/**
 * The web playground's files, served by the WebSocket transport at GET / and beside it: public/
 * (index.html, style.css, app.js and the ES modules it imports, loaded natively by the browser —
 * no build step) and the one third-party module it uses, markdown-it's self-contained browser
 * build, served from node_modules at /vendor/markdown-it.mjs (no CDN: the page works offline).
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

/** markdown-it's browser build (an ES module with its dependencies bundled in). */
function markdownItBrowserBuild(): string {
  const main = createRequire(import.meta.url).resolve("markdown-it"); // …/markdown-it/dist/markdown-it.cjs.js
  return path.join(path.dirname(main), "browser", "markdown-it.esm.min.mjs");
}

/**
 * The files by their path under the page's origin without the leading slash ("index.html",
 * "app.js", "modules/rpc.js", "vendor/markdown-it.mjs"). A missing public/ (a trimmed install)
 * gives an empty map: GET / answers 404 and the server works as before.
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
  try {
    files.set("vendor/markdown-it.mjs", { type: TYPES[".mjs"]!, body: readFileSync(markdownItBrowserBuild()) });
  } catch {
    // Not installed: the page falls back to plain text (it checks for the module).
  }
  return files;
}
