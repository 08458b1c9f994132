/** Running processes: output, exit codes, caps, decoding, and killing whole process trees. */
import { describe, expect, it } from "vitest";
import { HeadTailBuffer, runProcess, truncateMiddle } from "../../src/tools/process.js";
import { runningPids } from "./helpers.js";

const bash = (script: string, extra: Partial<Parameters<typeof runProcess>[0]> = {}) =>
  runProcess({ file: "bash", args: ["-c", script], cwd: process.cwd(), timeoutMs: 10_000, killGraceMs: 300, ...extra });

const pidsIn = (text: string) => [...text.matchAll(/^pid:(\d+)$/gm)].map((m) => Number(m[1]));

describe("runProcess", () => {
  it("collects stdout, stderr and both interleaved, with the exit code", async () => {
    const r = await bash("echo out; echo err >&2; exit 3");
    expect(r.exitCode).toBe(3);
    expect(r.stdout.text).toBe("out\n");
    expect(r.stderr.text).toBe("err\n");
    expect(r.combined.text).toContain("out\n");
    expect(r.combined.text).toContain("err\n");
    expect(r.timedOut).toBe(false);
    expect(r.pid).toBeGreaterThan(0);
  });

  it("streams decoded output as it arrives", async () => {
    const chunks: string[] = [];
    await bash("printf 'a'; sleep 0.05; printf 'b'", { onOutput: (_s, t) => chunks.push(t) });
    expect(chunks.join("")).toBe("ab");
  });

  it("passes `stdin` whole (past the kernel's 128 KiB limit on one argument or variable) and closes it; without it stdin is empty", async () => {
    const input = JSON.stringify({ patch: "p".repeat(300 * 1024) });
    const r = await bash("wc -c", { stdin: input });
    expect(r.stdout.text.trim()).toBe(String(Buffer.byteLength(input)));
    expect((await bash("wc -c")).stdout.text.trim()).toBe("0");
    // A process that never reads its input still ends normally (no EPIPE surfaces).
    expect((await bash("exit 0", { stdin: "x".repeat(1024 * 1024) })).exitCode).toBe(0);
  });

  it("reports a spawn failure as a value", async () => {
    const r = await runProcess({ file: "definitely-not-a-program-xyz", args: [], cwd: process.cwd(), timeoutMs: 5_000 });
    expect(r.spawnError?.code).toBe("ENOENT");
    expect(r.exitCode).toBeNull();
  });

  it("decodes binary output safely: invalid UTF-8 replaced, NULs stripped", async () => {
    const streamed: string[] = [];
    const r = await bash("printf 'ok\\000\\377\\376end\\n'", { onOutput: (_s, t) => streamed.push(t) });
    expect(r.stdout.text).toBe("ok\uFFFD\uFFFDend\n");
    expect(streamed.join("")).toBe("ok\uFFFD\uFFFDend\n");
  });

  it("keeps the head and the tail of long output with an omission note", async () => {
    const r = await bash("echo START; head -c 200000 /dev/zero | tr '\\0' x; echo; echo END", { outputCapBytes: 1000 });
    expect(r.stdout.totalBytes).toBeGreaterThan(200_000);
    expect(r.stdout.omittedBytes).toBe(r.stdout.totalBytes - 1000);
    expect(r.stdout.text.startsWith("START\n")).toBe(true);
    expect(r.stdout.text.endsWith("END\n")).toBe(true);
    expect(r.stdout.text).toMatch(/\[… \d+ bytes omitted …\]/);
  });

  it("on timeout kills the whole process tree", async () => {
    const r = await bash("sleep 1000 & echo pid:$!; sleep 1000 & echo pid:$!; wait", { timeoutMs: 1_500 });
    expect(r.timedOut).toBe(true);
    const pids = pidsIn(r.stdout.text);
    expect(pids).toHaveLength(2);
    expect(runningPids([r.pid!, ...pids])).toEqual([]);
  });

  it("on abort kills the whole process tree, even children that ignore SIGTERM", async () => {
    const controller = new AbortController();
    let out = "";
    const pending = bash("trap '' TERM; (trap '' TERM; sleep 1000) & echo pid:$!; sleep 1000 & echo pid:$!; wait", {
      signal: controller.signal,
      onOutput: (_s, t) => {
        out += t;
        if (pidsIn(out).length === 2) controller.abort();
      },
    });
    const r = await pending;
    expect(r.aborted).toBe(true);
    const pids = pidsIn(r.stdout.text);
    expect(pids).toHaveLength(2);
    expect(runningPids([r.pid!, ...pids])).toEqual([]);
  });

  it("background jobs do not outlive a command that exits normally", async () => {
    const r = await bash("sleep 1000 >/dev/null 2>&1 & echo pid:$!; exit 0");
    expect(r.exitCode).toBe(0);
    const pids = pidsIn(r.stdout.text);
    expect(runningPids(pids)).toEqual([]);
  });

  it("an already aborted signal runs nothing", async () => {
    const c = new AbortController();
    c.abort();
    const r = await bash("echo hi", { signal: c.signal });
    expect(r).toMatchObject({ aborted: true, pid: null });
  });
});

describe("output helpers", () => {
  it("HeadTailBuffer keeps everything under the cap", () => {
    const b = new HeadTailBuffer(10);
    b.push(Buffer.from("abc"));
    b.push(Buffer.from("def"));
    expect(b.result()).toEqual({ text: "abcdef", totalBytes: 6, omittedBytes: 0 });
  });

  it("HeadTailBuffer keeps head and tail across many chunks", () => {
    const b = new HeadTailBuffer(6);
    for (const c of "0123456789") b.push(Buffer.from(c));
    expect(b.result()).toEqual({ text: "012\n[… 4 bytes omitted …]\n789", totalBytes: 10, omittedBytes: 4 });
  });

  it("truncateMiddle", () => {
    expect(truncateMiddle("short", 100)).toEqual({ text: "short", omittedBytes: 0 });
    expect(truncateMiddle("aaaaabbbbbccccc", 10)).toEqual({ text: "aaaaa\n[… 5 bytes omitted …]\nccccc", omittedBytes: 5 });
  });
});
