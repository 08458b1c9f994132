/** Workspace path safety: escapes by "..", absolute paths and symlinks, per sandbox mode. */
import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { SandboxMode } from "../../src/protocol/common.js";
import { TrustBoundary } from "../../src/sandbox/boundary.js";
import { checkPath, isWithin, realpathLoose, type Access } from "../../src/tools/workspace.js";
import { makeDirs, type Dirs } from "./helpers.js";

let d: Dirs;
beforeEach(() => {
  d = makeDirs();
  mkdirSync(path.join(d.ws, "src"));
  writeFileSync(path.join(d.ws, "src", "a.txt"), "a\n");
  writeFileSync(path.join(d.outside, "secret.txt"), "secret\n");
  mkdirSync(path.join(d.outside, "dir"));
  // Links inside the workspace that point out of it.
  symlinkSync(path.join(d.outside, "secret.txt"), path.join(d.ws, "link-file"));
  symlinkSync(d.outside, path.join(d.ws, "link-dir"));
  symlinkSync(path.join(d.outside, "nothing-here.txt"), path.join(d.ws, "dangling"));
  // A link inside pointing inside is fine.
  symlinkSync(path.join(d.ws, "src"), path.join(d.ws, "src-alias"));
});
afterEach(() => d.cleanup());

const check = (sandbox: SandboxMode, p: string, access: Access) => checkPath({ cwd: d.ws, sandbox }, p, access);

describe("checkPath", () => {
  it("accepts plain relative paths and absolute paths inside the workspace", async () => {
    const r = await check("workspace-write", "src/a.txt", "read");
    expect(r).toMatchObject({ ok: true, path: path.join(d.ws, "src/a.txt"), real: path.join(d.ws, "src/a.txt") });
    expect((await check("workspace-write", path.join(d.ws, "src/a.txt"), "write")).ok).toBe(true);
    expect((await check("read-only", "src/../src/a.txt", "read")).ok).toBe(true);
    expect((await check("workspace-write", "src/new/deeper/file.txt", "write")).ok).toBe(true);
  });

  it("accepts links that stay inside, reporting the real path", async () => {
    const r = await check("workspace-write", "src-alias/a.txt", "write");
    expect(r).toMatchObject({ ok: true, real: path.join(d.ws, "src/a.txt") });
  });

  it.each<[SandboxMode, Access]>([
    ["read-only", "workdir"],
    ["read-only", "write"],
    ["workspace-write", "workdir"],
    ["workspace-write", "write"],
  ])("refuses every kind of escape under %s (%s)", async (sandbox, access) => {
    const escapes = [
      "../outside/secret.txt", // ..
      "src/../../outside/secret.txt", // .. in the middle
      path.join(d.outside, "secret.txt"), // absolute outside
      "link-file", // symlinked file
      "link-dir/secret.txt", // symlinked directory
      "link-dir/dir/new.txt", // a link in a parent, file not existing yet
      "link-dir/newdir/new.txt", // new file under a symlinked dir, several missing components
      "dangling", // final component a dangling link pointing outside
    ];
    for (const p of escapes) {
      const r = await check(sandbox, p, access);
      expect(r.ok, `${p} should be refused`).toBe(false);
      if (!r.ok) {
        expect(r.outside).toBe(true);
        expect(r.reason.length).toBeGreaterThan(10);
      }
    }
  });

  it("reads reach everything a sandboxed command can read, in both confined modes", async () => {
    for (const sandbox of ["read-only", "workspace-write"] as const) {
      for (const p of ["../outside/secret.txt", "link-file", "link-dir/secret.txt", "dangling", "/etc/hostname"]) {
        const r = await check(sandbox, p, "read");
        expect(r.ok, `${sandbox} ${p}`).toBe(true);
      }
    }
    expect(await check("workspace-write", "link-file", "read")).toMatchObject({ ok: true, real: path.join(d.outside, "secret.txt"), host: path.join(d.outside, "secret.txt") });
  });

  it("explains why a path was refused", async () => {
    const dots = await check("workspace-write", "../outside/secret.txt", "workdir");
    expect(!dots.ok && dots.reason).toMatch(/escapes the workspace/);
    const abs = await check("workspace-write", path.join(d.outside, "secret.txt"), "write");
    expect(!abs.ok && abs.reason).toMatch(/outside the writable roots/);
    const link = await check("workspace-write", "link-dir/secret.txt", "workdir");
    expect(!link.ok && link.reason).toMatch(/symbolic link/);
    expect(!link.ok && link.real).toBe(path.join(d.outside, "secret.txt"));
    const dangling = await check("workspace-write", "dangling", "write");
    expect(!dangling.ok && dangling.real).toBe(path.join(d.outside, "nothing-here.txt"));
  });

  it("read-only allows no writes at all, even inside the workspace", async () => {
    const r = await check("read-only", "src/a.txt", "write");
    expect(r.ok).toBe(false);
    expect(!r.ok && r.reason).toMatch(/read-only/);
  });

  it("workspace-write may write the temp dir; read-only may read it but not start a command there", async () => {
    const inTmp = path.join(d.tmp, "scratch.txt");
    expect((await check("workspace-write", inTmp, "write")).ok).toBe(true);
    expect((await check("read-only", inTmp, "read")).ok).toBe(true);
    expect((await check("read-only", d.tmp, "workdir")).ok).toBe(false);
  });

  it("danger-full-access allows everything", async () => {
    for (const p of ["../outside/secret.txt", "link-dir/secret.txt", "/etc/hostname"]) {
      expect((await check("danger-full-access", p, "write")).ok).toBe(true);
    }
  });

  it("hidden paths: refused to every tool in every mode, outright; only an unconfined command may start there", async () => {
    const commands = { boundary: new TrustBoundary({ hidden: [d.outside] }) };
    const hidden = (sandbox: SandboxMode, p: string, access: Access) => checkPath({ cwd: d.ws, sandbox, commands }, p, access);
    for (const sandbox of ["read-only", "workspace-write", "danger-full-access"] as const) {
      for (const access of ["read", "write"] as const) {
        for (const p of ["../outside/secret.txt", "link-file", "link-dir/new.txt", d.outside]) {
          const r = await hidden(sandbox, p, access);
          expect(r, `${sandbox} ${access} ${p}`).toMatchObject({ ok: false, outside: false, reason: expect.stringMatching(/which the server keeps hidden from every tool and command/) });
        }
      }
    }
    expect((await hidden("workspace-write", d.outside, "workdir")).ok).toBe(false);
    expect((await hidden("danger-full-access", d.outside, "workdir")).ok).toBe(true);
  });

  it("rejects malformed paths outright (not approvable)", async () => {
    const empty = await check("danger-full-access", "  ", "read");
    expect(empty).toMatchObject({ ok: false, outside: false });
    const nul = await check("workspace-write", "a\0b", "read");
    expect(nul).toMatchObject({ ok: false, outside: false });
  });

  it("detects symlink loops", async () => {
    symlinkSync(path.join(d.ws, "loop-b"), path.join(d.ws, "loop-a"));
    symlinkSync(path.join(d.ws, "loop-a"), path.join(d.ws, "loop-b"));
    const r = await check("workspace-write", "loop-a/x", "read");
    expect(r.ok).toBe(false);
  });
});

describe("helpers", () => {
  it("isWithin is not fooled by name prefixes", () => {
    expect(isWithin("/a/bc", "/a/b")).toBe(false);
    expect(isWithin("/a/b/c", "/a/b")).toBe(true);
    expect(isWithin("/a/b", "/a/b")).toBe(true);
    expect(isWithin("/a/..b", "/a")).toBe(true);
  });

  it("realpathLoose resolves missing tails under real ancestors", async () => {
    expect(await realpathLoose(path.join(d.ws, "link-dir", "x", "y"))).toBe(path.join(d.outside, "x", "y"));
  });
});
