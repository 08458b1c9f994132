/** The file-mention walk (src/files/walk.ts) against trees made hostile on purpose. */
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { listFiles, MAX_IGNORE_FILE_BYTES } from "../../src/files/walk.js";

describe("listFiles", () => {
  const dirs: string[] = [];
  const tree = () => {
    const dir = realpathSync(mkdtempSync(path.join(os.tmpdir(), "walk-")));
    dirs.push(dir);
    return dir;
  };
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  it("honours .gitignore and .ignore at every level, never lists .git, keeps symlinks inside the root only", async () => {
    const root = tree();
    const outside = tree();
    writeFileSync(path.join(outside, "secret.txt"), "x");
    mkdirSync(path.join(root, "src/gen"), { recursive: true });
    mkdirSync(path.join(root, ".git"));
    writeFileSync(path.join(root, ".git/config"), "");
    writeFileSync(path.join(root, ".gitignore"), "*.log\n");
    writeFileSync(path.join(root, "src/.ignore"), "gen/\n");
    for (const f of ["a.ts", "debug.log", "src/b.ts", "src/gen/c.ts", ".env"]) writeFileSync(path.join(root, f), "");
    symlinkSync(path.join(root, "a.ts"), path.join(root, "link-in.ts"));
    symlinkSync(path.join(outside, "secret.txt"), path.join(root, "link-out.txt"));
    symlinkSync(outside, path.join(root, "dir-out"));
    const { files, truncated } = await listFiles(root, { maxEntries: 1000 });
    expect(truncated).toBe(false);
    expect(files.sort()).toEqual([".env", ".gitignore", "a.ts", "link-in.ts", "src/.ignore", "src/b.ts"]);
  });

  it("a .gitignore that is a FIFO, a link to /dev/zero or oversized is skipped, and the walk completes", async () => {
    const root = tree();
    mkdirSync(path.join(root, "fifo"));
    mkdirSync(path.join(root, "zero"));
    mkdirSync(path.join(root, "big"));
    // A FIFO with no writer: opening it for reading would block a pool thread forever.
    execFileSync("mkfifo", [path.join(root, "fifo/.gitignore")]);
    // A link to an endless device: reading it would never end.
    symlinkSync("/dev/zero", path.join(root, "zero/.gitignore"));
    // Over the size bound: its rules ("*.ts" first) are not read.
    writeFileSync(path.join(root, "big/.gitignore"), "*.ts\n" + "#".repeat(MAX_IGNORE_FILE_BYTES));
    for (const f of ["fifo/a.ts", "zero/b.ts", "big/c.ts"]) writeFileSync(path.join(root, f), "");
    const { files, truncated } = await listFiles(root, { maxEntries: 1000 });
    expect(truncated).toBe(false);
    expect(files.filter((f) => f.endsWith(".ts")).sort()).toEqual(["big/c.ts", "fifo/a.ts", "zero/b.ts"]);
  });

  it("stops after maxEntries, keeping the shallow files (breadth first), and says it was truncated", async () => {
    const root = tree();
    mkdirSync(path.join(root, "deep"));
    for (let i = 0; i < 10; i++) writeFileSync(path.join(root, `top${i}.txt`), "");
    for (let i = 0; i < 10; i++) writeFileSync(path.join(root, "deep", `f${i}.txt`), "");
    const { files, truncated } = await listFiles(root, { maxEntries: 12 });
    expect(truncated).toBe(true);
    expect(files.filter((f) => f.startsWith("top"))).toHaveLength(10);
    expect(files.filter((f) => f.startsWith("deep/")).length).toBeLessThan(10);
  });
});
