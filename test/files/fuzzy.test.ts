/** The fuzzy ranking of file paths (src/files/fuzzy.ts): smart case, diacritics, words, chunking. */
import { describe, expect, it } from "vitest";
import { rankPaths } from "../../src/files/fuzzy.js";

describe("rankPaths", () => {
  it("smart case: a lower-case query matches any case, an upper-case letter makes it case-sensitive", async () => {
    const paths = ["src/Button.tsx", "src/button.css"];
    expect((await rankPaths(paths, "btn", 10)).map((m) => m.path).sort()).toEqual(paths.slice().sort());
    expect((await rankPaths(paths, "Btn", 10)).map((m) => m.path)).toEqual(["src/Button.tsx"]);
  });

  it("matches across diacritics as fzf does (the prefilter keeps such paths)", async () => {
    expect((await rankPaths(["docs/café.md", "docs/other.md"], "cafe", 10)).map((m) => m.path)).toEqual(["docs/café.md"]);
  });

  it("every word must match; indices are the matched positions, ascending", async () => {
    const [m, ...rest] = await rankPaths(["src/main.ts", "src/maintenance.md", "lib/main.go"], "src main.t", 10);
    expect(rest).toEqual([]);
    expect(m!.path).toBe("src/main.ts");
    expect(m!.indices.map((i) => m!.path[i]).join("")).toBe("srcmain.t");
  });

  it("ranks across chunks: the best match wins wherever it is, ties by path, at most `limit`", async () => {
    const paths = Array.from({ length: 10_000 }, (_, i) => `pkg/f${i}/w-x-y-z.txt`); // scattered: lower scores
    paths.splice(9_000, 0, "wxyz.txt");
    const ranked = await rankPaths(paths, "wxyz", 5);
    expect(ranked).toHaveLength(5);
    expect(ranked[0]!.path).toBe("wxyz.txt");
    for (let i = 2; i < ranked.length; i++) expect(ranked[i - 1]!.score > ranked[i]!.score || ranked[i - 1]!.path < ranked[i]!.path).toBe(true);
  });

  it("an aborted search and an empty query give nothing", async () => {
    const paths = Array.from({ length: 10_000 }, (_, i) => `f${i}.txt`);
    expect(await rankPaths(paths, "f1", 10, AbortSignal.abort())).toEqual([]);
    expect(await rankPaths(paths, "  ", 10)).toEqual([]);
  });
});
