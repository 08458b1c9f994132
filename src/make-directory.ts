/**
 * `mkdir -p` that fails where it cannot create a directory. Node's own recursive mkdir retries
 * forever when mkdir answers ENOENT under a directory that exists (inside /proc or /sys): a
 * server given such a home spun at 75 % CPU, deaf to SIGTERM when the sync variant was used.
 * Here each missing component is created once, from the top, and the first failure is thrown
 * (with `syscall: "mkdir"` and the path, like Node's own errors).
 */
import { mkdir, stat } from "node:fs/promises";
import path from "node:path";

export async function makeDirectory(dir: string, mode = 0o700): Promise<void> {
  const missing: string[] = [];
  for (let current = path.resolve(dir); ; current = path.dirname(current)) {
    try {
      if ((await stat(current)).isDirectory()) break;
      throw Object.assign(new Error(`ENOTDIR: not a directory, mkdir '${current}'`), { code: "ENOTDIR", syscall: "mkdir", path: current });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
      missing.push(current);
      if (path.dirname(current) === current) break;
    }
  }
  for (const component of missing.reverse()) {
    try {
      await mkdir(component, { mode });
    } catch (err) {
      // Made meanwhile by someone else: fine, if it is a directory (the next mkdir or stat says).
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    }
  }
}
