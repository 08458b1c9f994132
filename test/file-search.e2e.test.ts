/**
 * fuzzyFileSearch and its sessions over a real WebSocket (through the recording relay, so every
 * answer and notification is checked against Codex's own JSON Schema): ranking, .gitignore,
 * never leaving the roots (symlinks out of them), the result limit, session semantics, and
 * hostile params.
 */
import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FILE_SEARCH_MATCH_LIMIT } from "../src/files/file-search.js";
import { makeWorkspace } from "./support/approvals.js";
import { TestClient } from "./support/client.js";
import { conformanceProblems } from "./support/codex.js";
import { startRecordingRelay, type RecordingRelay } from "./support/recording-relay.js";
import { startTestServer, type TestServer } from "./support/server.js";

type Match = { root: string; path: string; match_type: string; file_name: string; score: number; indices: number[] | null };

function write(root: string, rel: string, text = "x\n"): void {
  mkdirSync(path.dirname(path.join(root, rel)), { recursive: true });
  writeFileSync(path.join(root, rel), text);
}

describe("fuzzyFileSearch", () => {
  let ts: TestServer;
  let relay: RecordingRelay;
  let client: TestClient;
  let ws: ReturnType<typeof makeWorkspace>;
  let outside: ReturnType<typeof makeWorkspace>;

  beforeAll(async () => {
    ws = makeWorkspace();
    outside = makeWorkspace();
    for (const f of ["src/main.ts", "src/components/Button.tsx", "README.md", "docs/maintenance.md", ".env.example", "sub/keep.txt", "sub/drop.log"]) write(ws.dir, f);
    write(ws.dir, ".gitignore", "ignored.txt\nbuild/\n");
    write(ws.dir, "ignored.txt");
    write(ws.dir, "build/main.js");
    write(ws.dir, "sub/.gitignore", "*.log\n");
    write(ws.dir, ".git/config");
    write(ws.dir, "...", "a file named ...\n"); // a name of dots only is still a file name
    for (let i = 0; i < FILE_SEARCH_MATCH_LIMIT + 30; i++) write(ws.dir, `many/widget-${String(i).padStart(3, "0")}.ts`);
    write(outside.dir, "secret-outside.txt");
    mkdirSync(path.join(outside.dir, "secretdir"));
    write(outside.dir, "secretdir/secret-in-dir.txt");
    symlinkSync(path.join(outside.dir, "secret-outside.txt"), path.join(ws.dir, "link-to-secret.txt"));
    symlinkSync(path.join(outside.dir, "secretdir"), path.join(ws.dir, "link-to-secretdir"));
    symlinkSync("/etc", path.join(ws.dir, "etc-link"));
    symlinkSync("..", path.join(ws.dir, "parent-link"));
    symlinkSync(path.join(ws.dir, "README.md"), path.join(ws.dir, "readme-link.md"));
    ts = await startTestServer("pglite");
    relay = await startRecordingRelay(ts.url);
    client = await TestClient.initialized(relay.url, { experimentalApi: true });
  });
  afterAll(async () => {
    await client?.close();
    await relay?.close();
    await ts?.close();
    ws?.cleanup();
    outside?.cleanup();
  });

  const search = async (query: string, roots = [ws.dir]) => (await client.request("fuzzyFileSearch", { query, roots, cancellationToken: null })).files as Match[];

  it("ranks the files under the root fuzzily, as Codex answers (relative paths, file names, match indices)", async () => {
    const files = await search("maints");
    expect(files[0]).toEqual({ root: ws.dir, path: "src/main.ts", match_type: "file", file_name: "main.ts", score: expect.any(Number), indices: [4, 5, 6, 7, 9, 10] });
    // Score descending, ties by path; every match really contains the letters in order.
    for (let i = 1; i < files.length; i++) {
      const [a, b] = [files[i - 1]!, files[i]!];
      expect(a.score > b.score || (a.score === b.score && a.path < b.path)).toBe(true);
    }
    const button = await search("btn");
    expect(button[0]!.path).toBe("src/components/Button.tsx");
    expect(button[0]!.indices!.map((i) => button[0]!.path[i]).join("")).toBe("Btn");
    // Several words: each must match.
    expect((await search("src tsx")).map((f) => f.path)).toEqual(["src/components/Button.tsx"]);
    // Hidden files are searched (as Codex does); nothing matches nothing.
    expect((await search("envexample")).map((f) => f.path)).toEqual([".env.example"]);
    expect(await search("zzzzqqq")).toEqual([]);
    expect(await search("   ")).toEqual([]);
    expect(conformanceProblems(relay.frames)).toEqual([]);
  });

  it("honours .gitignore (nested ones too) and never lists .git", async () => {
    const all = (await search("i")).map((f) => f.path).concat((await search("g")).map((f) => f.path), (await search("l")).map((f) => f.path));
    expect(all).not.toContain("ignored.txt");
    expect(all.some((p) => p.startsWith("build/"))).toBe(false);
    expect(all).not.toContain("sub/drop.log");
    expect(all.some((p) => p.startsWith(".git/"))).toBe(false);
    expect((await search("keep")).map((f) => f.path)).toEqual(["sub/keep.txt"]);
    expect((await search("...")).map((f) => f.path)).toContain("...");
  });

  it("never leaves the root: symlinks out of it (files, directories, /etc, ..) are not followed; links inside are", async () => {
    for (const q of ["secret", "secret-outside", "secret-in-dir", "passwd", "hostname", "etc-link", "parent-link"]) {
      const files = await search(q);
      expect(files.filter((f) => /secret|passwd|hostname|etc-link|parent-link/.test(f.path)), q).toEqual([]);
    }
    expect((await search("readme-link")).map((f) => f.path)).toContain("readme-link.md");
  });

  it("returns at most as many results as Codex does", async () => {
    const files = await search("widget");
    expect(files).toHaveLength(FILE_SEARCH_MATCH_LIMIT);
    expect(files.every((f) => f.path.startsWith("many/widget-"))).toBe(true);
  });

  it("searches several roots, each result relative to its own root; no roots, no results", async () => {
    const files = await search("secret", [ws.dir, outside.dir]);
    expect(files.map((f) => [f.root, f.path]).sort()).toEqual([
      [outside.dir, "secret-outside.txt"],
      [outside.dir, "secretdir/secret-in-dir.txt"],
    ]);
    expect(await search("main", [])).toEqual([]);
  });

  it("a later request with the same cancellationToken is answered too (an earlier one still running gets no files)", async () => {
    const [a, b] = await Promise.all([
      // The first names more roots, so resolving them takes it longer than the second: "later" is
      // the order on the wire, not which request gets through its checks first.
      client.request("fuzzyFileSearch", { query: "main", roots: [ws.dir, ws.dir, ws.dir, ws.dir, ws.dir, ws.dir, ws.dir, ws.dir], cancellationToken: "tok" }),
      client.request("fuzzyFileSearch", { query: "button", roots: [ws.dir], cancellationToken: "tok" }),
    ]);
    // Whether the first was still running when the second came depends on timing: it finished
    // with its results, or was cancelled with none (CI once saw another first result: a loaded
    // machine can stop a walk at its time budget). Whatever it answered matches its own query.
    const subsequence = (p: string) => /m.*a.*i.*n/i.test(p);
    expect(a.files.every((f: { path: string }) => subsequence(f.path)), JSON.stringify(a.files.map((f: { path: string }) => f.path))).toBe(true);
    expect(b.files[0].path).toBe("src/components/Button.tsx");
  });

  it("hostile params: relative, missing or file roots, huge queries, too many roots — clear -32602, nothing searched", async () => {
    const bad = (params: unknown) => client.request("fuzzyFileSearch", params);
    await expect(bad({ query: "a", roots: ["relative/dir"], cancellationToken: null })).rejects.toMatchObject({ code: -32602, message: expect.stringContaining("not an absolute path") });
    await expect(bad({ query: "a", roots: [path.join(ws.dir, "nope")], cancellationToken: null })).rejects.toMatchObject({ code: -32602, message: expect.stringContaining("not an existing directory") });
    await expect(bad({ query: "a", roots: [path.join(ws.dir, "README.md")], cancellationToken: null })).rejects.toMatchObject({ code: -32602 });
    await expect(bad({ query: "x".repeat(100_000), roots: [ws.dir], cancellationToken: null })).rejects.toMatchObject({ code: -32602, message: expect.stringContaining("at most") });
    await expect(bad({ query: "a", roots: Array(100).fill(ws.dir), cancellationToken: null })).rejects.toMatchObject({ code: -32602 });
    await expect(bad({ query: "a" })).rejects.toMatchObject({ code: -32602 });
    // The server is fine afterwards.
    expect((await search("maints"))[0]!.path).toBe("src/main.ts");
  });

  describe("sessions", () => {
    const updated = (sessionId: string, query: string) =>
      client.waitForNotification("fuzzyFileSearch/sessionUpdated", (p) => p.sessionId === sessionId && p.query === query);

    it("start, update (answered {}, then sessionUpdated with the results and sessionCompleted), stop", async () => {
      const from = relay.frames.length;
      expect(await client.request("fuzzyFileSearch/sessionStart", { sessionId: "s1", roots: [ws.dir] })).toEqual({});
      expect(await client.request("fuzzyFileSearch/sessionUpdate", { sessionId: "s1", query: "maints" })).toEqual({});
      const first = await updated("s1", "maints");
      expect(first.params.files[0]).toMatchObject({ root: ws.dir, path: "src/main.ts", file_name: "main.ts" });
      await client.waitFor((f) => f.method === "fuzzyFileSearch/sessionCompleted" && f.params.sessionId === "s1");
      expect(await client.request("fuzzyFileSearch/sessionUpdate", { sessionId: "s1", query: "btn" })).toEqual({});
      expect((await updated("s1", "btn")).params.files[0].path).toBe("src/components/Button.tsx");
      // The updated notification for a query precedes its completed notification.
      const methods = relay.frames.slice(from).filter((f) => f.dir === "server→client" && f.frame.method?.startsWith("fuzzyFileSearch/")).map((f) => `${f.frame.method}`);
      expect(methods.slice(0, 2)).toEqual(["fuzzyFileSearch/sessionUpdated", "fuzzyFileSearch/sessionCompleted"]);
      expect(await client.request("fuzzyFileSearch/sessionStop", { sessionId: "s1" })).toEqual({});
      await expect(client.request("fuzzyFileSearch/sessionUpdate", { sessionId: "s1", query: "x" })).rejects.toMatchObject({
        code: -32600,
        message: "fuzzy file search session not found: s1",
      });
      expect(conformanceProblems(relay.frames, from)).toEqual([]);
    });

    it("sessions belong to their connection; unknown ids, empty ids and bad roots are clear errors", async () => {
      await client.request("fuzzyFileSearch/sessionStart", { sessionId: "mine", roots: [ws.dir] });
      const other = await TestClient.initialized(ts.url);
      try {
        await expect(other.request("fuzzyFileSearch/sessionUpdate", { sessionId: "mine", query: "a" })).rejects.toMatchObject({ code: -32600 });
      } finally {
        await other.close();
      }
      await expect(client.request("fuzzyFileSearch/sessionUpdate", { sessionId: "never-started", query: "a" })).rejects.toMatchObject({ code: -32600 });
      await expect(client.request("fuzzyFileSearch/sessionStart", { sessionId: "", roots: [ws.dir] })).rejects.toMatchObject({ code: -32600 });
      await expect(client.request("fuzzyFileSearch/sessionStart", { sessionId: "s2", roots: ["rel"] })).rejects.toMatchObject({ code: -32602 });
      await expect(client.request("fuzzyFileSearch/sessionStart", { sessionId: "s2", roots: ["/definitely/not/here"] })).rejects.toMatchObject({ code: -32602 });
      await expect(client.request("fuzzyFileSearch/sessionUpdate", { sessionId: "mine", query: "q".repeat(5000) })).rejects.toMatchObject({ code: -32602 });
      // A refused start created nothing; stopping an unknown session is not an error (as in Codex).
      await expect(client.request("fuzzyFileSearch/sessionUpdate", { sessionId: "s2", query: "a" })).rejects.toMatchObject({ code: -32600 });
      expect(await client.request("fuzzyFileSearch/sessionStop", { sessionId: "never-started" })).toEqual({});
      // The session that was started still works.
      await client.request("fuzzyFileSearch/sessionUpdate", { sessionId: "mine", query: "readme" });
      expect((await updated("mine", "readme")).params.files.map((f: Match) => f.path)).toContain("README.md");
    });

    it("starting a session under an id in use replaces it (new roots)", async () => {
      await client.request("fuzzyFileSearch/sessionStart", { sessionId: "r", roots: [ws.dir] });
      await client.request("fuzzyFileSearch/sessionStart", { sessionId: "r", roots: [outside.dir] });
      await client.request("fuzzyFileSearch/sessionUpdate", { sessionId: "r", query: "secret" });
      const files = (await updated("r", "secret")).params.files as Match[];
      expect(files.map((f) => f.root)).toEqual([outside.dir, outside.dir]);
    });
  });
});

describe("fuzzyFileSearch and the server's hidden paths", () => {
  it("never lists the server's home inside a root, and refuses the home itself as a root", async () => {
    const ws = makeWorkspace();
    const home = path.join(ws.dir, "server-home");
    mkdirSync(home);
    write(home, "home-secret-marker.txt");
    write(ws.dir, "src/home-visible-marker.txt");
    const ts = await startTestServer("pglite", { home });
    const client = await TestClient.initialized(ts.url);
    try {
      const found = (await client.request("fuzzyFileSearch", { query: "marker", roots: [ws.dir], cancellationToken: null })).files as Match[];
      expect(found.map((f) => f.path)).toEqual(["src/home-visible-marker.txt"]);
      const refused = await client.requestRaw("fuzzyFileSearch", { query: "marker", roots: [home], cancellationToken: null });
      expect(refused.error).toMatchObject({ code: -32602, message: expect.stringMatching(/is hidden by the server/) });
    } finally {
      await client.close();
      await ts.close();
      ws.cleanup();
    }
  });
});
