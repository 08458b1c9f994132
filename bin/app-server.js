#!/usr/bin/env node
// The CLI is built by `npm install` (the prepare script runs `npm run build`): tsc compiles src/ to
// dist/, then scripts/bundle.mjs bundles dist/main.js into dist/bundle/main.js, which starts faster
// (issue 16). Without the bundle (tsc alone), the unbundled ../dist/main.js runs.
// Before either loads: Node's compile cache, where Node has one (./compile-cache.js says where and why).
import { enableCompileCache } from "./compile-cache.js";

enableCompileCache();
try {
  await import("../dist/bundle/main.js");
} catch (err) {
  if (err?.code !== "ERR_MODULE_NOT_FOUND" || !String(err.message).includes("dist/bundle/main.js")) throw err;
  await import("../dist/main.js");
}
