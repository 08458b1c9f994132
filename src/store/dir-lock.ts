/**
 * An exclusive lock on a directory: PGlite does not stop a second process from opening the same
 * data directory, and when it does, writes are lost. The lock is a file created with O_EXCL that
 * holds the owner's pid; a lock left by a dead process is taken over.
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

export function lockDirectory(dir: string): () => void {
  const file = path.join(dir, "app-server.lock");
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(file, "wx", 0o600);
      writeSync(fd, String(process.pid));
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
      const owner = Number.parseInt(readFileSync(file, "utf8"), 10);
      if (Number.isFinite(owner) && owner !== process.pid && isAlive(owner)) throw new DirectoryLockedError(dir, owner);
      if (owner === process.pid) throw new DirectoryLockedError(dir, owner);
      unlinkSync(file); // stale: its owner died without releasing it
    }
  }
  throw new Error(`could not lock ${dir}`);
}
