/**
 * The data directory's lock (src/store/dir-lock.ts) against the owners a lock file can name: this
 * process, a live one, a dead one, a zombie, and a pid that belongs to another process now — as
 * after a container restart, whose server gets the same pid every time.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { DirectoryLockedError, lockDirectory } from "../src/store/dir-lock.js";

const dirs: string[] = [];
const children: ChildProcess[] = [];

afterEach(() => {
  for (const c of children.splice(0)) c.kill("SIGKILL");
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function lockDir(): { dir: string; file: string } {
  const dir = mkdtempSync(path.join(os.tmpdir(), "aas-lock-"));
  dirs.push(dir);
  return { dir, file: path.join(dir, "app-server.lock") };
}

/** Field `n` (1-based, as in proc(5)) of /proc/PID/stat. */
function statField(pid: number | "self", n: number): string {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[n - 3]!;
}

const linux = existsSync("/proc/self/stat");

describe("the data directory lock", () => {
  it("refuses a second lock by this process, and releases", () => {
    const { dir, file } = lockDir();
    const release = lockDirectory(dir);
    expect(() => lockDirectory(dir)).toThrow(DirectoryLockedError);
    release();
    expect(existsSync(file)).toBe(false);
    lockDirectory(dir)();
  });

  it.skipIf(!linux)("takes over a lock naming this process's pid but another start: an earlier process with the same pid", () => {
    const { dir, file } = lockDir();
    // A container's server gets the same pid on every start; the last one was killed.
    writeFileSync(file, `${process.pid}\n1\n`);
    const release = lockDirectory(dir);
    expect(readFileSync(file, "utf8")).toBe(`${process.pid}\n${statField("self", 22)}\n`);
    release();
    // A lock written before start times were recorded, naming this pid, is an earlier process's too.
    writeFileSync(file, String(process.pid));
    lockDirectory(dir)();
  });

  it.skipIf(!linux)("refuses a live process that holds it, and takes over when that pid is someone else's now or dead", async () => {
    const { dir, file } = lockDir();
    const other = spawn("sleep", ["30"], { stdio: "ignore" });
    children.push(other);
    await new Promise((resolve) => other.once("spawn", resolve));
    const pid = other.pid!;
    writeFileSync(file, `${pid}\n${statField(pid, 22)}\n`);
    expect(() => lockDirectory(dir)).toThrow(DirectoryLockedError);
    // An old lock with the pid alone: alive, and nothing tells it apart, so it is refused too.
    writeFileSync(file, String(pid));
    expect(() => lockDirectory(dir)).toThrow(DirectoryLockedError);
    // The same pid with another start time: the lock's owner is gone and the pid was reused.
    writeFileSync(file, `${pid}\n${Number(statField(pid, 22)) - 1}\n`);
    lockDirectory(dir)();
    // A dead owner.
    writeFileSync(file, `${pid}\n${statField(pid, 22)}\n`);
    const exited = new Promise((resolve) => other.once("exit", resolve));
    other.kill("SIGKILL");
    await exited;
    lockDirectory(dir)();
  });

  it.skipIf(!linux)("takes over a lock whose owner is a zombie (killed, not yet reaped)", async () => {
    const { dir, file } = lockDir();
    // `sleep 0` exits at once, and the shell, replaced by `sleep 30`, never reaps it.
    const parent = spawn("sh", ["-c", "sleep 0 & echo $!; exec sleep 30"], { stdio: ["ignore", "pipe", "ignore"] });
    children.push(parent);
    const zombie = Number((await new Promise<string>((resolve) => parent.stdout!.once("data", (d) => resolve(String(d))))).trim());
    while (statField(zombie, 3) !== "Z") await new Promise((r) => setTimeout(r, 10));
    writeFileSync(file, `${zombie}\n${statField(zombie, 22)}\n`);
    lockDirectory(dir)();
  });
});
