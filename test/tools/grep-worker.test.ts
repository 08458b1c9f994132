/**
 * The grep worker's search (run here in-process): a file or directory that cannot be opened or
 * listed is counted as unreadable — the grep tool says how many were skipped — never silently
 * left out as if it held no match.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { search, type GrepJob } from "../../src/tools/grep-worker.js";
import { PinnedDir } from "../../src/tools/pinned-dir.js";

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), "aas-grep-worker-"));
  writeFileSync(path.join(dir, "a.txt"), "needle one\n");
  writeFileSync(path.join(dir, "b.txt"), "needle two\n");
  mkdirSync(path.join(dir, "sub"));
  writeFileSync(path.join(dir, "sub", "c.txt"), "needle three\n");
});
afterEach(() => {
  vi.restoreAllMocks();
  rmSync(dir, { recursive: true, force: true });
});

const job = (): GrepJob => ({
  pattern: "needle",
  glob: null,
  target: dir,
  shownTarget: ".",
  cwd: dir,
  view: { hidden: [], configFiles: [], confinement: null, tmpHost: null, binds: [], installation: [] },
  maxMatches: 100,
  maxFiles: 100,
  maxFileBytes: 1 << 20,
  maxLineChars: 200,
  deadline: Date.now() + 60_000,
});

describe("grep worker", () => {
  it("finds every match when everything can be read", async () => {
    expect(await search(job())).toEqual({ ok: true, lines: ["a.txt:1: needle one", "b.txt:1: needle two", "sub/c.txt:1: needle three"], capped: null, skippedLarge: 0, unreadable: 0, timedOut: false, files: 3 });
  });

  it("counts a file it cannot open and a directory it cannot enter as unreadable", async () => {
    const openRead = PinnedDir.prototype.openRead;
    vi.spyOn(PinnedDir.prototype, "openRead").mockImplementation(function (this: PinnedDir, name: string) {
      if (name === "b.txt") return Promise.reject(Object.assign(new Error("EACCES: permission denied"), { code: "EACCES" }));
      return openRead.call(this, name);
    });
    vi.spyOn(PinnedDir.prototype, "openChild").mockRejectedValue(Object.assign(new Error("EACCES: permission denied"), { code: "EACCES" }));
    const out = await search(job());
    expect(out).toMatchObject({ ok: true, lines: ["a.txt:1: needle one"], unreadable: 2 });
  });
});
