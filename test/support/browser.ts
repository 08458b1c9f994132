/**
 * A headless Chromium for the playground's browser test, on a machine with nothing but Node:
 *
 * 1. `APP_SERVER_TEST_CHROMIUM=/path/to/chromium` — a system browser; it must start (no fallback).
 * 2. the Chromium that the npm package `@sparticuz/chromium` ships (a devDependency). The package
 *    unpacks itself into /tmp and adds the shared libraries it needs (libnss3, libnspr4 …) only on
 *    AWS Lambda, so we unpack it ourselves, once, into node_modules/.cache/ (outside /tmp, kept
 *    between runs) — the libraries included — and point LD_LIBRARY_PATH at them.
 * 3. a `chromium` on PATH (Debian's package), if the npm one cannot start here (another CPU).
 *
 * When none starts, the test is skipped and the reason printed; with REQUIRE_BROWSER=1 (.ci/run)
 * that is a failure instead.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { createReadStream, createWriteStream, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { pipeline } from "node:stream/promises";
import { createBrotliDecompress } from "node:zlib";
import { chromium, type Browser } from "playwright-core";
import { REPO_ROOT } from "./process.js";

/** Flags for a headless browser in a test: no network chatter, no GPU. */
const ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--no-first-run",
  "--disable-component-update",
  "--disable-sync",
  "--disable-quic",
];

export interface LaunchedBrowser {
  browser: Browser;
  /** Which browser it is, for the log. */
  source: string;
}

/** Unpacks @sparticuz/chromium's brotli files into node_modules/.cache (once per version). */
async function unpackNpmChromium(): Promise<{ executable: string; env: Record<string, string> }> {
  const require = createRequire(import.meta.url);
  // The package exports no ./package.json: walk up from its entry point.
  let root = path.dirname(require.resolve("@sparticuz/chromium"));
  while (!existsSync(path.join(root, "package.json")) || JSON.parse(readFileSync(path.join(root, "package.json"), "utf8")).name !== "@sparticuz/chromium") {
    if (path.dirname(root) === root) throw new Error("cannot find the @sparticuz/chromium package directory");
    root = path.dirname(root);
  }
  const pkgJson = path.join(root, "package.json");
  const version = JSON.parse(readFileSync(pkgJson, "utf8")).version as string;
  const bin = path.join(path.dirname(pkgJson), "bin");
  const dir = path.join(REPO_ROOT, "node_modules", ".cache", "agent-app-server", `chromium-${version}`);
  const executable = path.join(dir, "chromium");
  if (!existsSync(path.join(dir, ".complete"))) {
    // Unpack next to the final place and rename, so an interrupted unpack is never used.
    const work = `${dir}.partial-${process.pid}`;
    rmSync(work, { recursive: true, force: true });
    mkdirSync(work, { recursive: true });
    try {
      await pipeline(createReadStream(path.join(bin, "chromium.br")), createBrotliDecompress(), createWriteStream(path.join(work, "chromium"), { mode: 0o755 }));
      for (const archive of ["swiftshader", "al2023", "fonts"]) {
        const tar = path.join(work, `${archive}.tar`);
        await pipeline(createReadStream(path.join(bin, `${archive}.tar.br`)), createBrotliDecompress(), createWriteStream(tar));
        const target = archive === "swiftshader" ? work : path.join(work, archive);
        mkdirSync(target, { recursive: true });
        execFileSync("tar", ["-xf", tar, "-C", target]);
        rmSync(tar);
      }
      // Its fonts.conf names /tmp/fonts (where the package would unpack on Lambda): point it here,
      // plus the system's fonts where there are any. Without a font Chromium aborts on first text.
      writeFileSync(
        path.join(work, "fonts", "fonts.conf"),
        `<?xml version="1.0"?>\n<!DOCTYPE fontconfig SYSTEM "fonts.dtd">\n<fontconfig>\n  <dir>${path.join(dir, "fonts")}</dir>\n  <dir>/usr/share/fonts</dir>\n  <cachedir>${path.join(dir, "fonts-cache")}</cachedir>\n</fontconfig>\n`,
      );
      writeFileSync(path.join(work, ".complete"), `${version}\n`);
      rmSync(dir, { recursive: true, force: true });
      renameSync(work, dir);
    } catch (err) {
      rmSync(work, { recursive: true, force: true });
      if (existsSync(path.join(dir, ".complete"))) return npmChromiumAt(dir); // another worker won the race
      throw err;
    }
  }
  return npmChromiumAt(dir);
}

function npmChromiumAt(dir: string): { executable: string; env: Record<string, string> } {
  const libs = [path.join(dir, "al2023", "lib"), dir];
  return {
    executable: path.join(dir, "chromium"),
    env: {
      LD_LIBRARY_PATH: [...libs, ...(process.env.LD_LIBRARY_PATH ? [process.env.LD_LIBRARY_PATH] : [])].join(":"),
      FONTCONFIG_PATH: path.join(dir, "fonts"),
    },
  };
}

async function launch(executable: string, env: Record<string, string> = {}): Promise<Browser> {
  // playwright gives every browser a fresh temporary profile (and removes it on close()).
  return chromium.launch({ executablePath: executable, headless: true, args: ARGS, env: { ...process.env, ...env } as Record<string, string> });
}

function firstLine(err: unknown): string {
  return String((err as Error)?.message ?? err).split("\n").find((l) => l.trim() !== "")?.trim() ?? "unknown error";
}

/** Starts a browser, or says why none could start. */
export async function launchBrowser(): Promise<LaunchedBrowser | { unavailable: string }> {
  const override = process.env.APP_SERVER_TEST_CHROMIUM;
  if (override) {
    // Asked for by name: a failure is an error, not a reason to try something else.
    return { browser: await launch(override), source: `APP_SERVER_TEST_CHROMIUM=${override}` };
  }
  const reasons: string[] = [];
  try {
    const npm = await unpackNpmChromium();
    return { browser: await launch(npm.executable, npm.env), source: `@sparticuz/chromium (${npm.executable})` };
  } catch (err) {
    reasons.push(`@sparticuz/chromium: ${firstLine(err)}`);
    if (process.env.DEBUG_BROWSER) console.error(err);
  }
  const system = spawnSync("sh", ["-c", "command -v chromium || command -v chromium-browser || command -v google-chrome"], { encoding: "utf8" }).stdout.trim().split("\n")[0];
  if (system) {
    try {
      return { browser: await launch(system), source: system };
    } catch (err) {
      reasons.push(`${system}: ${firstLine(err)}`);
    }
  } else {
    reasons.push("no chromium on PATH");
  }
  return { unavailable: reasons.join("; ") };
}

/**
 * Closes the browser, waiting at most 15 s: once in a full CI run `browser.close()` never settled
 * and the afterAll hook timed out after every test had passed. The browser process still goes
 * when the test worker exits (playwright drives it over a pipe); the slow close is reported.
 */
export async function closeBrowser(browser: Browser | undefined): Promise<void> {
  if (!browser) return;
  let timer: NodeJS.Timeout | undefined;
  const slow = new Promise<"slow">((r) => (timer = setTimeout(() => r("slow"), 15_000)));
  const outcome = await Promise.race([browser.close().then(() => "closed" as const), slow]);
  clearTimeout(timer);
  if (outcome === "slow") console.warn("[browser] close() did not settle within 15 s; leaving the browser to exit with the worker");
}
