/** Model-facing names of MCP tools: valid for both providers, stable, unambiguous, sorted. */
import { describe, expect, it } from "vitest";
import { modelToolName, nameTools } from "../../src/mcp/names.js";

const VALID = /^[a-zA-Z0-9_-]{1,64}$/;

describe("MCP tool names", () => {
  it("keeps clean names readable: mcp__<server>__<tool>", () => {
    expect(modelToolName("github", "create_issue")).toBe("mcp__github__create_issue");
  });

  it("sanitises other characters and long names, ending them in a stable hash", () => {
    const dotted = modelToolName("files", "read.file");
    expect(dotted).toMatch(/^mcp__files__read_file_[0-9a-f]{8}$/);
    expect(modelToolName("files", "read.file")).toBe(dotted); // stable
    expect(modelToolName("files", "read_file")).not.toBe(dotted); // "read.file" and "read_file" stay apart
    const long = modelToolName("server", "x".repeat(200));
    expect(long).toMatch(VALID);
    expect(long.length).toBe(64);
    for (const name of [dotted, long, modelToolName("a b", "ü/?*"), modelToolName("s", "")]) expect(name).toMatch(VALID);
  });

  it("a long server name loses its end, never the tool's: every tool of a 48-character server stays readable", () => {
    const server = "a-very-long-server-name-for-the-project-archives"; // 48, the most a name may have
    const tools = ["read_text_file", "list_directory_with_sizes", "search_files", "x"];
    const named = nameTools(tools.map((tool) => ({ server, tool })));
    for (const n of named) {
      expect(n.modelName).toMatch(VALID);
      expect(n.modelName.endsWith(`__${n.tool}`)).toBe(true); // the tool name whole, no hash
      expect(n.modelName.startsWith("mcp__a-very-long-")).toBe(true);
    }
    expect(modelToolName(server, "x")).toBe(`mcp__${server}__x`); // it fits: unchanged
    // The tool name alone too long: the last resort, cut and hashed.
    expect(modelToolName(server, "t".repeat(60))).toMatch(/^mcp__a-very-long-server-name-for-the-project-archive[a-z_]*_[0-9a-f]{8}$/);
    // Two long servers that share their start: apart by a hash, each stable.
    const twins = nameTools([
      { server: `${server}-1`.slice(0, 48), tool: "list_directory_with_sizes" },
      { server: `${server.slice(0, 47)}2`, tool: "list_directory_with_sizes" },
    ]).map((t) => t.modelName);
    expect(new Set(twins).size).toBe(2);
    for (const t of twins) expect(t).toMatch(/_[0-9a-f]{8}$/);
  });

  it("names every pair apart and sorts by model name, whatever order the servers answered in", () => {
    const pairs = [
      { server: "b", tool: "z" },
      { server: "a", tool: "y" },
      { server: "a", tool: "x".repeat(100) },
      { server: "a", tool: `${"x".repeat(100)}!` },
    ];
    const one = nameTools(pairs).map((t) => t.modelName);
    const two = nameTools([...pairs].reverse()).map((t) => t.modelName);
    expect(one).toEqual(two);
    expect(one).toEqual([...one].sort());
    expect(new Set(one).size).toBe(pairs.length);
  });
});
