/**
 * `npm start` builds only when what the build reads changed (scripts/build-if-stale.mjs, its
 * prestart): the real script, run by npm's rules in a package of its own whose `build` counts its
 * runs and records its inputs the way `npm run build` does.
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, unlinkSync, utimesSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { REPO_ROOT } from "./support/process.js";

const SCRIPT = path.join(REPO_ROOT, "scripts", "build-if-stale.mjs");

// The package's build: fails when asked to, else writes the outputs `npm start` needs, counts
// itself and records its inputs last, as the project's build script does.
const BUILD = `import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { execFileSync } from "node:child_process";
if (existsSync("fail-build")) process.exit(1);
mkdirSync("dist/bundle", { recursive: true });
writeFileSync("dist/main.js", "");
writeFileSync("dist/bundle/main.js", "");
writeFileSync("builds", String(Number(existsSync("builds") ? readFileSync("builds", "utf8") : 0) + 1));
execFileSync(process.execPath, [${JSON.stringify(SCRIPT)}, "--record"]);
`;

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), "aas-build-if-stale-"));
  mkdirSync(path.join(dir, "src"));
  writeFileSync(path.join(dir, "src", "main.ts"), "export const a = 1;\n");
  writeFileSync(path.join(dir, "build.mjs"), BUILD);
  writeFileSync(path.join(dir, "package.json"), JSON.stringify({ name: "fixture", version: "1.0.0", private: true, scripts: { build: "node build.mjs" } }));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

/** The prestart step as npm runs it: in the package's directory. */
function prestart(): { status: number | null; said: string } {
  const r = spawnSync(process.execPath, [SCRIPT], { cwd: dir, encoding: "utf8" });
  return { status: r.status, said: r.stderr.split("\n")[0]! };
}
const builds = () => Number(readFileSync(path.join(dir, "builds"), "utf8"));

describe("npm start's build step (scripts/build-if-stale.mjs)", () => {
  it("builds without a record, then not again until a source's content changes", () => {
    expect(prestart()).toEqual({ status: 0, said: "dist/ has no build record: building" });
    expect(builds()).toBe(1);
    expect(prestart()).toEqual({ status: 0, said: "dist/ is up to date: not building" });
    expect(builds()).toBe(1);
    // A new time on the same content (a checkout, a copy) is no change.
    const future = new Date(Date.now() + 60_000);
    utimesSync(path.join(dir, "src", "main.ts"), future, future);
    expect(prestart().said).toBe("dist/ is up to date: not building");
    expect(builds()).toBe(1);
    writeFileSync(path.join(dir, "src", "main.ts"), "export const a = 2;\n");
    expect(prestart()).toEqual({ status: 0, said: "sources changed since the last build: building" });
    expect(builds()).toBe(2);
    // A new file under src/ and a changed package.json are changes too.
    writeFileSync(path.join(dir, "src", "extra.ts"), "export {};\n");
    expect(prestart().said).toBe("sources changed since the last build: building");
    const pkg = JSON.parse(readFileSync(path.join(dir, "package.json"), "utf8"));
    writeFileSync(path.join(dir, "package.json"), JSON.stringify({ ...pkg, version: "1.0.1" }));
    expect(prestart().said).toBe("sources changed since the last build: building");
    expect(builds()).toBe(4);
    expect(prestart().said).toBe("dist/ is up to date: not building");
  });

  it("builds when an output is missing, whatever the record says", () => {
    prestart();
    unlinkSync(path.join(dir, "dist", "bundle", "main.js"));
    expect(prestart().said).toBe("sources changed since the last build: building");
    expect(builds()).toBe(2);
  });

  it("a failed build fails npm start and records nothing, so the next start builds again", () => {
    prestart();
    writeFileSync(path.join(dir, "src", "main.ts"), "export const a = 3;\n");
    writeFileSync(path.join(dir, "fail-build"), "");
    expect(prestart().status).not.toBe(0);
    expect(builds()).toBe(1);
    unlinkSync(path.join(dir, "fail-build"));
    expect(prestart()).toEqual({ status: 0, said: "sources changed since the last build: building" });
    expect(builds()).toBe(2);
  });
});
