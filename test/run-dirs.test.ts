/** The suite's own hygiene: a killed run's directory and CLI bundle are removed by the next run. */
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { claimRunDir, OWNER_FILE, processAlive, removeAbandonedRuns, RUN_DIR_PREFIX } from "./support/run-dirs.js";

describe("run directories", () => {
  const cleanups: Array<() => void> = [];
  afterEach(() => {
    for (const c of cleanups.splice(0)) c();
  });

  it("removes the directories (and CLI bundles) of runs whose owner is gone, keeps live and unowned ones", () => {
    const base = mkdtempSync(path.join(os.tmpdir(), "run-dirs-"));
    const bundles = mkdtempSync(path.join(os.tmpdir(), "run-bundles-"));
    cleanups.push(() => rmSync(base, { recursive: true, force: true }), () => rmSync(bundles, { recursive: true, force: true }));
    const bundleDirOf = (name: string) => path.join(bundles, name);

    // A pid that has exited: a finished child's (reaped by spawnSync).
    const gone = spawnSync(process.execPath, ["-e", "0"]).pid!;
    expect(processAlive(gone)).toBe(false);
    const live = spawn(process.execPath, ["-e", "setTimeout(() => {}, 60000)"], { stdio: "ignore" });
    cleanups.push(() => live.kill("SIGKILL"));
    expect(processAlive(live.pid!)).toBe(true);

    const make = (name: string, owner: number | null) => {
      const dir = path.join(base, name);
      mkdirSync(path.join(dir, "aas-home-x"), { recursive: true });
      writeFileSync(path.join(dir, "aas-home-x", "data"), "x");
      if (owner !== null) claimRunDir(dir, owner);
      mkdirSync(bundleDirOf(name), { recursive: true });
      return dir;
    };
    const abandoned = make(`${RUN_DIR_PREFIX}dead`, gone);
    const running = make(`${RUN_DIR_PREFIX}live`, live.pid!);
    const unowned = make(`${RUN_DIR_PREFIX}old`, null);
    const other = make("something-else", gone);

    expect(removeAbandonedRuns(base, bundleDirOf)).toEqual([`${RUN_DIR_PREFIX}dead`]);
    expect(existsSync(abandoned)).toBe(false);
    expect(existsSync(bundleDirOf(`${RUN_DIR_PREFIX}dead`))).toBe(false);
    for (const kept of [running, unowned, other]) expect(existsSync(kept)).toBe(true);
    expect(existsSync(bundleDirOf(`${RUN_DIR_PREFIX}live`))).toBe(true);
    // A base that does not exist is nothing to do.
    expect(removeAbandonedRuns(path.join(base, "missing"), bundleDirOf)).toEqual([]);
  });

  it("this run's own directory names its owner, the vitest process that is running it", () => {
    const dir = process.env.AAS_TEST_RUN_TMPDIR!;
    expect(dir).toBeTruthy();
    expect(path.basename(dir).startsWith(RUN_DIR_PREFIX)).toBe(true);
    const owner = Number(readFileSync(path.join(dir, OWNER_FILE), "utf8"));
    expect(processAlive(owner)).toBe(true);
    expect(owner).not.toBe(process.pid); // a fork's: the owner is the main vitest process
  });
});
