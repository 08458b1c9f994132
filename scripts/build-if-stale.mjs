// `npm start` builds first only when what the build reads changed since the last build: a hash
// of the inputs (src/, migrations/, the build scripts, tsconfig*, package*.json) is recorded in
// dist/ by `npm run build` (`--record`, its last step) and compared here. A content hash rather
// than times: a checkout or a copy changes times without changing what the build would make.
// Runs in the package's directory (npm runs scripts there).
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";

const INPUTS = ["src", "migrations", "scripts/bundle.mjs", "scripts/pglite-seed.mjs", "scripts/build-if-stale.mjs", "tsconfig.json", "tsconfig.build.json", "package.json", "package-lock.json"];
const OUTPUTS = ["dist/main.js", "dist/bundle/main.js"];
const RECORD = "dist/.build-inputs";

function filesUnder(entry) {
  if (!existsSync(entry)) return [];
  if (!statSync(entry).isDirectory()) return [entry];
  return readdirSync(entry, { recursive: true })
    .map((name) => path.join(entry, String(name)))
    .filter((file) => statSync(file).isFile());
}

function inputsHash() {
  const hash = createHash("sha256");
  for (const file of INPUTS.flatMap(filesUnder).sort()) hash.update(`${file}\0`).update(readFileSync(file)).update("\0");
  return hash.digest("hex");
}

if (process.argv[2] === "--record") {
  writeFileSync(RECORD, `${inputsHash()}\n`);
  process.exit(0);
}

const recorded = existsSync(RECORD) ? readFileSync(RECORD, "utf8").trim() : null;
if (recorded === inputsHash() && OUTPUTS.every((f) => existsSync(f))) {
  process.stderr.write("dist/ is up to date: not building\n");
  process.exit(0);
}
process.stderr.write(recorded === null ? "dist/ has no build record: building\n" : "sources changed since the last build: building\n");
const build = spawnSync("npm", ["run", "build"], { stdio: "inherit" });
process.exit(build.status ?? 1);
