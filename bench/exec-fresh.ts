/**
 * Issue 16, item 5: `app-server exec PROMPT` on a fresh home (embedded PGlite, nothing in it yet)
 * against the mock model server, through the built CLI (dist/): spawn → first byte of the answer
 * on stdout, and → exit; then the same on the now existing home. Each run gets a new home.
 *
 * Run: npx tsx bench/exec-fresh.ts [--runs=3] [--app=DIR (a built tree, default this one)]
 */
import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { startMockModelServer } from "../test/support/mock-model-server.js";

const arg = (name: string, def: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? def;
const RUNS = Number(arg("runs", "3"));
const APP = path.resolve(arg("app", fileURLToPath(new URL("..", import.meta.url))));

const mock = await startMockModelServer({ defaultReply: { text: "the answer" } });

function exec(home: string): Promise<{ firstMs: number; exitMs: number; code: number | null; rssKB: number }> {
  const env: NodeJS.ProcessEnv = { ...process.env, OPENAI_BASE_URL: mock.openaiBaseUrl, OPENAI_API_KEY: "bench", APP_SERVER_MODEL: "mock-model" };
  for (const k of Object.keys(env)) if ((k.startsWith("APP_SERVER_") && k !== "APP_SERVER_MODEL") || k === "DATABASE_URL") delete env[k];
  const t0 = performance.now();
  // /usr/bin/time -f %M: the peak RSS of the whole exec (embedded server included).
  const child = spawn("/usr/bin/time", ["-f", "%M", process.execPath, path.join(APP, "bin", "app-server.js"), "exec", "say something", "--home", home, "--approve", "never"], {
    cwd: home,
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let firstMs = -1;
  let stderr = "";
  child.stdout.once("data", () => (firstMs = performance.now() - t0));
  child.stderr.on("data", (d) => (stderr += d));
  return new Promise((resolve) =>
    child.on("close", (code) => {
      const rssKB = Number(stderr.trim().split("\n").pop());
      if (code !== 0) process.stderr.write(stderr);
      resolve({ firstMs, exitMs: performance.now() - t0, code, rssKB });
    }),
  );
}

console.log(`### app-server exec against the mock (${APP}) — ${new Date().toISOString()}, load ${readFileSync("/proc/loadavg", "utf8").split(" ")[0]}\n`);
console.log("| home | run | first answer byte ms | exit ms | exit code | peak RSS MB |");
console.log("|---|---|---|---|---|---|");
for (let i = 0; i < RUNS; i++) {
  const home = await mkdtemp(path.join(os.tmpdir(), "aas-exec-fresh-"));
  try {
    for (const label of ["fresh", "existing"]) {
      const r = await exec(home);
      console.log(`| ${label} | ${i + 1} | ${r.firstMs.toFixed(0)} | ${r.exitMs.toFixed(0)} | ${r.code} | ${(r.rssKB / 1024).toFixed(0)} |`);
    }
  } finally {
    await rm(home, { recursive: true, force: true });
  }
}
await mock.close();
console.log(`\nload after: ${readFileSync("/proc/loadavg", "utf8").split(" ")[0]}`);
