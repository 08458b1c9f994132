/**
 * An exclusive lock on a directory: PGlite does not stop a second process from opening the same
 * data directory, and when it does, writes are lost. The lock is a file created with O_EXCL that
 * holds the owner's pid and, on Linux, when that process started. A lock left by a dead process is
 * taken over, and so is one whose pid now names another process: a container starts its server
 * with the same pid every time, so after a `docker kill` or an out-of-memory kill the lock names
 * the new server's own pid, and it is still stale.
 */
import { openSync, readFileSync, unlinkSync, writeSync, closeSync } from "node:fs";
import path from "node:path";

export class DirectoryLockedError extends Error {
  constructor(readonly dir: string, readonly ownerPid: number) {
    super(`data directory ${dir} is in use by process ${ownerPid}`);
    this.name = "DirectoryLockedError";
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * When process `pid` started (clock ticks since boot: /proc/PID/stat field 22), and whether it has
 * exited but not been reaped (a zombie holds nothing). Null where /proc cannot tell (not Linux, or
 * the process is gone).
 */
function processStart(pid: number | "self"): { start: string; zombie: boolean } | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // After the command name, which may hold spaces and parentheses: state is field 3, starttime 22.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return { start: fields[19] ?? "", zombie: fields[0] === "Z" };
  } catch {
    return null;
  }
}

const ownStart = processStart("self")?.start ?? "";

/** Whether the lock's owner (its pid and recorded start, "" when unknown) still holds it. */
function ownerHoldsIt(owner: number, ownerStart: string): boolean {
  if (owner === process.pid) return ownerStart === ownStart; // this process, or an earlier one with its pid
  if (!isAlive(owner)) return false;
  const now = processStart(owner);
  if (!now) return true; // alive, and nothing tells it apart
  if (now.zombie) return false;
  return ownerStart === "" || now.start === ownerStart;
}

export function lockDirectory(dir: string): () => void {
  const file = path.join(dir, "app-server.lock");
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(file, "wx", 0o600);
      writeSync(fd, `${process.pid}\n${ownStart}\n`);
      closeSync(fd);
      let released = false;
      return () => {
        if (released) return;
        released = true;
        try {
          unlinkSync(file);
        } catch {
          /* already gone */
        }
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      // "pid\nstart\n"; a lock written before the start time was recorded holds the pid alone.
      const [pidText = "", ownerStart = ""] = readFileSync(file, "utf8").split("\n");
      const owner = Number.parseInt(pidText, 10);
      if (Number.isFinite(owner) && ownerHoldsIt(owner, ownerStart.trim())) throw new DirectoryLockedError(dir, owner);
      unlinkSync(file); // stale: its owner died without releasing it, or its pid is someone else's now
    }
  }
  throw new Error(`could not lock ${dir}`);
}
