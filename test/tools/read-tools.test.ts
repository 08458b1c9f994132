/** read_file, list_dir, grep and update_plan; tool specs and argument validation. */
import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { builtinTools, BUILTIN_TOOL_NAMES } from "../../src/tools/builtin.js";
import { globToRegExp } from "../../src/tools/grep.js";
import { CommandRunner } from "../../src/sandbox/runner.js";
import { makeDirs, RecordingContext, run, textOf, toolNamed, type Dirs } from "./helpers.js";

let d: Dirs;
let ctx: RecordingContext;
beforeEach(() => {
  d = makeDirs();
  ctx = new RecordingContext(d.ws, "workspace-write", "untrusted");
});
afterEach(() => d.cleanup());
const tools = (opts: Parameters<typeof builtinTools>[1] = {}) => builtinTools(ctx, opts);
/** The tools of a thread whose server hides `d.outside` (as it hides its home and token files). */
const toolsHiding = (hidden: string) => builtinTools(new RecordingContext(d.ws, "workspace-write", "untrusted", undefined, new CommandRunner({ hiddenPaths: [hidden] })));
const write = (p: string, content: string | Buffer) => {
  mkdirSync(path.dirname(path.join(d.ws, p)), { recursive: true });
  writeFileSync(path.join(d.ws, p), content);
};

describe("read_file", () => {
  it("returns numbered lines, with offset and limit and a note when more follow", async () => {
    write("f.txt", Array.from({ length: 10 }, (_, i) => `line ${i + 1}`).join("\n") + "\n");
    const rf = toolNamed(tools(), "read_file");
    const all = await run(rf, { path: "f.txt" });
    expect(textOf(all)).toBe(Array.from({ length: 10 }, (_, i) => `${String(i + 1).padStart(6)}\tline ${i + 1}`).join("\n"));
    const window = await run(rf, { path: "f.txt", offset: 3, limit: 2 });
    expect(textOf(window)).toBe("     3\tline 3\n     4\tline 4\n[Showing lines 3-4; the file has more lines. Call read_file with offset=5 to continue.]");
    const past = await run(rf, { path: "f.txt", offset: 50 });
    expect(past.isError).toBe(true);
    expect(textOf(past)).toMatch(/past the end .*10 lines/);
    expect(ctx.events).toEqual([]); // no items for read tools
  });

  it("caps the default number of lines and cuts very long lines", async () => {
    write("big.txt", Array.from({ length: 50 }, (_, i) => (i === 0 ? "x".repeat(500) : `l${i + 1}`)).join("\n"));
    const rf = toolNamed(tools({ readFile: { defaultLimit: 20, maxLineChars: 100 } }), "read_file");
    const out = textOf(await run(rf, { path: "big.txt" }));
    expect(out.split("\n").filter((l) => /^\s+\d+\t/.test(l))).toHaveLength(20);
    expect(out).toContain(`${"x".repeat(100)}… [line cut: 500 characters]`);
    expect(out).toContain("Call read_file with offset=21 to continue.");
    expect(out).toContain("[1 line was longer than 100 characters and cut.]");
  });

  it("refuses binary files, directories and missing files", async () => {
    write("img.png", Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 0, 0, 0x0d]));
    write("latin1.txt", Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x0a]));
    mkdirSync(path.join(d.ws, "dir"));
    const rf = toolNamed(tools(), "read_file");
    expect(textOf(await run(rf, { path: "img.png" }))).toMatch(/binary file \(8 bytes\)/);
    expect(textOf(await run(rf, { path: "latin1.txt" }))).toMatch(/binary/);
    expect(textOf(await run(rf, { path: "dir" }))).toMatch(/directory; use list_dir/);
    expect(textOf(await run(rf, { path: "nope.txt" }))).toMatch(/does not exist/);
  });

  it("reads outside the workspace as a sandboxed command could (read-only semantics)", async () => {
    writeFileSync(path.join(d.outside, "notes.txt"), "outside notes\n");
    symlinkSync(path.join(d.outside, "notes.txt"), path.join(d.ws, "link"));
    const rf = toolNamed(tools(), "read_file");
    for (const p of ["link", "../outside/notes.txt", path.join(d.outside, "notes.txt")]) {
      const out = await run(rf, { path: p });
      expect(out.isError, p).toBe(false);
      expect(textOf(out)).toBe("     1\toutside notes");
    }
  });

  it("refuses a hidden path however it is named: through a link, via .., absolute", async () => {
    writeFileSync(path.join(d.outside, "secret.txt"), "secret\n");
    symlinkSync(path.join(d.outside, "secret.txt"), path.join(d.ws, "link"));
    symlinkSync(d.outside, path.join(d.ws, "dir-link"));
    const rf = toolNamed(toolsHiding(d.outside), "read_file");
    for (const p of ["link", "dir-link/secret.txt", "../outside/secret.txt", path.join(d.outside, "secret.txt")]) {
      const out = await run(rf, { path: p });
      expect(out.isError).toBe(true);
      expect(textOf(out)).not.toContain("secret\n");
      expect(textOf(out)).toMatch(/^Cannot read .*which the server keeps hidden from every tool and command/);
    }
  });

  it("rejects invalid offsets", async () => {
    write("f.txt", "x\n");
    const out = await run(toolNamed(tools(), "read_file"), { path: "f.txt", offset: 0 });
    expect(out.isError).toBe(true);
    expect(textOf(out)).toMatch(/Invalid arguments for read_file: offset: Too small/);
  });
});

describe("list_dir", () => {
  it("lists sorted entries with / for directories and @ for links, capped with a note", async () => {
    write("b.txt", "");
    write("a.txt", "");
    write("sub/x.txt", "");
    symlinkSync(path.join(d.ws, "a.txt"), path.join(d.ws, "c-link"));
    const out = await run(toolNamed(tools(), "list_dir"), { path: "." });
    expect(textOf(out)).toBe("./ (4 entries)\na.txt\nb.txt\nc-link@\nsub/");
    const sub = await run(toolNamed(tools(), "list_dir"), { path: "sub" });
    expect(textOf(sub)).toBe("sub/ (1 entry)\nx.txt");
    for (let i = 0; i < 12; i++) write(`many/f${String(i).padStart(2, "0")}`, "");
    const capped = await run(toolNamed(tools({ listDirMaxEntries: 5 }), "list_dir"), { path: "many" });
    expect(textOf(capped)).toBe("many/ (12 entries)\nf00\nf01\nf02\nf03\nf04\n[… 7 more entries not shown]");
  });

  it("lists outside the workspace, refuses hidden paths and explains missing ones", async () => {
    writeFileSync(path.join(d.outside, "o.txt"), "");
    const ld = toolNamed(tools(), "list_dir");
    expect(textOf(await run(ld, { path: d.outside }))).toBe(`${d.outside}/ (1 entry)\no.txt`);
    expect(textOf(await run(ld, { path: ".." }))).toMatch(/^\S+\/ \(3 entries\)\noutside\/\ntmp\/\nws\/$/);
    expect(textOf(await run(ld, { path: "nope" }))).toMatch(/does not exist/);
    const hiding = toolNamed(toolsHiding(d.outside), "list_dir");
    expect(textOf(await run(hiding, { path: "../outside" }))).toMatch(/^Cannot list \.\.\/outside: .*hidden/);
  });
});

describe("grep", () => {
  beforeEach(() => {
    write("src/a.ts", "const foo = 1;\nconst bar = 2;\n");
    write("src/b.js", "foo();\n");
    write("src/deep/c.ts", "// FOO here\n");
    write("node_modules/pkg/index.js", "foo\n");
    write(".git/config", "foo\n");
    write("bin.dat", Buffer.concat([Buffer.from("foo"), Buffer.from([0, 1, 2])]));
  });

  it("finds matches as file:line: text, skipping .git, node_modules and binaries", async () => {
    const out = await run(toolNamed(tools(), "grep"), { pattern: "foo" });
    expect(textOf(out)).toBe("src/a.ts:1: const foo = 1;\nsrc/b.js:1: foo();");
  });

  it("supports (?i), a path and a glob", async () => {
    const g = toolNamed(tools(), "grep");
    expect(textOf(await run(g, { pattern: "(?i)foo", glob: "*.ts" }))).toBe("src/a.ts:1: const foo = 1;\nsrc/deep/c.ts:1: // FOO here");
    expect(textOf(await run(g, { pattern: "foo", path: "src/deep" }))).toBe("No matches found.");
    expect(textOf(await run(g, { pattern: "ba[rz]", path: "src/a.ts" }))).toBe("src/a.ts:2: const bar = 2;");
    expect(textOf(await run(g, { pattern: "(?i)foo", glob: "src/**/*.ts" }))).toBe("src/a.ts:1: const foo = 1;\nsrc/deep/c.ts:1: // FOO here");
  });

  it("caps results with a note", async () => {
    write("many.txt", Array.from({ length: 30 }, () => "hit").join("\n"));
    const out = await run(toolNamed(tools({ grep: { maxMatches: 10 } }), "grep"), { pattern: "hit" });
    const lines = textOf(out).split("\n");
    expect(lines).toHaveLength(11);
    expect(lines[10]).toMatch(/Results capped at 10 matches/);
  });

  it("reports an invalid regex, searches outside the workspace, refuses hidden paths", async () => {
    const g = toolNamed(tools(), "grep");
    const bad = await run(g, { pattern: "foo(" });
    expect(bad.isError).toBe(true);
    expect(textOf(bad)).toMatch(/^Invalid pattern: missing closing \)/);
    writeFileSync(path.join(d.outside, "o.txt"), "x marks\n");
    expect(textOf(await run(g, { pattern: "marks", path: "../outside" }))).toBe(`${d.outside}/o.txt:1: x marks`);
    const hidden = await run(toolNamed(toolsHiding(d.outside), "grep"), { pattern: "marks", path: "../outside" });
    expect(hidden.isError).toBe(true);
    expect(textOf(hidden)).toMatch(/hidden/);
    // A search of the workspace's parent skips the hidden directory inside it.
    expect(textOf(await run(toolNamed(toolsHiding(d.outside), "grep"), { pattern: "marks", path: ".." }))).toBe("No matches found.");
  });

  it("JavaScript-only features are a clear error, not a crash: lookaround, backreferences, \\u", async () => {
    const g = toolNamed(tools(), "grep");
    for (const [pattern, what] of [["foo(?=bar)", /lookahead and lookbehind/], ["(?<!x)foo", /lookahead and lookbehind/], ["(a)\\1", /backreferences/], ["\\u0041", /\\x\{263A\}/]] as const) {
      const out = await run(g, { pattern });
      expect(out.isError, pattern).toBe(true);
      expect(textOf(out)).toMatch(/^Unsupported pattern: grep matches with a linear-time engine/);
      expect(textOf(out)).toMatch(what);
    }
    // The tool still works afterwards (its worker was not lost).
    expect(textOf(await run(g, { pattern: "bar" }))).toBe("src/a.ts:2: const bar = 2;");
  });

  it("does not follow symlinks out of the workspace", async () => {
    writeFileSync(path.join(d.outside, "secret.txt"), "foo secret\n");
    symlinkSync(d.outside, path.join(d.ws, "src", "out-link"));
    const out = await run(toolNamed(tools(), "grep"), { pattern: "secret" });
    expect(textOf(out)).toBe("No matches found.");
  });

  it("globToRegExp", () => {
    expect(globToRegExp("*.ts").test("a.ts")).toBe(true);
    expect(globToRegExp("*.ts").test("a/b.ts")).toBe(false);
    expect(globToRegExp("**/*.ts").test("a/b/c.ts")).toBe(true);
    expect(globToRegExp("**/*.ts").test("c.ts")).toBe(true);
    expect(globToRegExp("*.{ts,js}").test("x.js")).toBe(true);
    expect(globToRegExp("file?.txt").test("file1.txt")).toBe(true);
    expect(globToRegExp("a.b").test("axb")).toBe(false);
  });
});

describe("update_plan", () => {
  it("maps in_progress to inProgress and reports the plan", async () => {
    const out = await run(toolNamed(tools(), "update_plan"), {
      explanation: "starting",
      plan: [
        { step: "read", status: "completed" },
        { step: "edit", status: "in_progress" },
        { step: "test", status: "pending" },
      ],
    });
    expect(textOf(out)).toBe("Plan updated");
    expect(ctx.events).toEqual([
      {
        type: "plan",
        explanation: "starting",
        plan: [
          { step: "read", status: "completed" },
          { step: "edit", status: "inProgress" },
          { step: "test", status: "pending" },
        ],
      },
    ]);
    await run(toolNamed(tools(), "update_plan"), { plan: [] });
    expect(ctx.events[1]).toEqual({ type: "plan", explanation: null, plan: [] });
  });

  it("rejects unknown statuses with a clear message", async () => {
    const out = await run(toolNamed(tools(), "update_plan"), { plan: [{ step: "x", status: "done" }] });
    expect(out.isError).toBe(true);
    expect(textOf(out)).toMatch(/plan\[0\]\.status: Invalid option/);
    expect(ctx.events).toEqual([]);
  });
});

describe("tool specs", () => {
  it("names, order, read-only flags and argument names are fixed", () => {
    const list = tools();
    expect(list.map((t) => t.spec.name)).toEqual([...BUILTIN_TOOL_NAMES]);
    expect(Object.fromEntries(list.map((t) => [t.spec.name, t.readOnly]))).toEqual({
      apply_patch: false,
      grep: true,
      list_dir: true,
      read_file: true,
      shell: false,
      update_plan: false,
    });
    const props = (name: string) => Object.keys((toolNamed(list, name).spec.inputSchema as { properties: object }).properties);
    expect(props("shell")).toEqual(["command", "workdir", "timeout_ms", "sandbox_permissions", "justification", "prefix_rule"]);
    expect(props("apply_patch")).toEqual(["patch"]);
    expect(props("read_file")).toEqual(["path", "offset", "limit"]);
    expect(props("list_dir")).toEqual(["path"]);
    expect(props("grep")).toEqual(["pattern", "path", "glob"]);
    expect(props("update_plan")).toEqual(["explanation", "plan"]);
    expect(toolNamed(list, "update_plan").spec.inputSchema).toMatchObject({
      type: "object",
      required: ["plan"],
      properties: { plan: { type: "array", items: { properties: { status: { enum: ["pending", "in_progress", "completed"] } } } } },
    });
  });

  it("are deterministic (byte-identical across builds and contexts)", () => {
    const a = JSON.stringify(tools().map((t) => t.spec));
    const other = new RecordingContext(d.outside, "read-only", "never");
    const b = JSON.stringify(builtinTools(other).map((t) => t.spec));
    expect(a).toBe(b);
    expect(a).not.toContain("$schema");
    expect(a).not.toContain(String(Number.MAX_SAFE_INTEGER));
  });

  it("every tool turns bad JSON into an error result instead of throwing", async () => {
    for (const t of tools()) {
      const out = await t.execute({ type: "toolCall", id: "c", name: t.spec.name, arguments: "{oops" }, new AbortController().signal);
      expect(out.isError).toBe(true);
      expect(textOf(out)).toMatch(new RegExp(`^Invalid arguments for ${t.spec.name}: not valid JSON`));
    }
    expect(ctx.events).toEqual([]);
  });
});
