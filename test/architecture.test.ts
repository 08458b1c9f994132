/**
 * The layering rules of DESIGN.md §2, checked on the source (issue 29): the store owns SQL and
 * postgres.js; the lower layers (store, protocol, agent, providers, tools, mcp, hooks) import
 * nothing from the layers above them; runtime/ has no import cycle, type imports included.
 */
import { readFileSync, readdirSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";

const SRC = path.resolve(import.meta.dirname, "../src");

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const full = path.join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(full);
    return e.name.endsWith(".ts") ? [full] : [];
  });
}

const files = sourceFiles(SRC).map((file) => ({ file, rel: path.relative(SRC, file), text: readFileSync(file, "utf8") }));

/** Every module specifier of `text` (import/export … from, dynamic import()), type imports included. */
function specifiers(text: string): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(/(?:^|\n)\s*(?:import|export)\b[^;]*?\bfrom\s*["']([^"']+)["']/g)) out.push(m[1]!);
  for (const m of text.matchAll(/\bimport\(\s*["']([^"']+)["']\s*\)/g)) out.push(m[1]!);
  return out;
}

/** Relative imports resolved to paths under src (".js" → ".ts"). */
function localImports(file: string, text: string): string[] {
  return specifiers(text)
    .filter((s) => s.startsWith("."))
    .map((s) => path.relative(SRC, path.resolve(path.dirname(file), s.replace(/\.js$/, ".ts"))));
}

const layerOf = (rel: string) => rel.split(path.sep)[0]!;

describe("architecture (DESIGN.md §2)", () => {
  it("the store owns SQL: no postgres.js import and no tagged SQL outside src/store", () => {
    // identity/team.ts builds the team's stores from the database handle (wiring, no statement).
    const wiring = new Set([path.join("identity", "team.ts")]);
    const importers = files.filter((f) => layerOf(f.rel) !== "store" && !wiring.has(f.rel) && specifiers(f.text).includes("postgres")).map((f) => f.rel);
    expect(importers).toEqual([]);
    const sqlTemplates = files
      .filter((f) => layerOf(f.rel) !== "store")
      .flatMap((f) => [...f.text.matchAll(/\b(?:sql|tx|q)`/g)].map((m) => `${f.rel}: ${f.text.slice(m.index, m.index + 40).split("\n")[0]}`));
    expect(sqlTemplates).toEqual([]);
  });

  it("no upward imports: store, protocol, agent, providers, tools, mcp and hooks import nothing from runtime, rpc or transport", () => {
    const lower = new Set(["store", "protocol", "agent", "providers", "tools", "mcp", "hooks"]);
    const upper = new Set(["runtime", "rpc", "transport"]);
    const upward = files
      .filter((f) => lower.has(layerOf(f.rel)))
      .flatMap((f) => localImports(f.file, f.text).filter((to) => upper.has(layerOf(to))).map((to) => `${f.rel} → ${to}`));
    expect(upward).toEqual([]);
  });

  it("the agent loop imports nothing about sockets, JSON-RPC or SQL", () => {
    const banned = ["ws", "postgres", "json-rpc-2.0", "fastify", "@fastify/websocket", "@electric-sql/pglite"];
    const found = files
      .filter((f) => layerOf(f.rel) === "agent")
      .flatMap((f) => [
        ...specifiers(f.text).filter((s) => banned.includes(s)).map((s) => `${f.rel} → ${s}`),
        ...localImports(f.file, f.text).filter((to) => ["rpc", "transport", "store"].includes(layerOf(to))).map((to) => `${f.rel} → ${to}`),
      ]);
    expect(found).toEqual([]);
  });

  it("runtime/ has no import cycle, type imports included", () => {
    const runtime = files.filter((f) => layerOf(f.rel) === "runtime");
    const graph = new Map(runtime.map((f) => [f.rel, localImports(f.file, f.text).filter((to) => layerOf(to) === "runtime")]));
    const cycles: string[] = [];
    const state = new Map<string, "open" | "done">();
    const walk = (node: string, trail: string[]) => {
      state.set(node, "open");
      for (const next of graph.get(node) ?? []) {
        if (state.get(next) === "open") cycles.push([...trail.slice(trail.indexOf(next)), next].join(" → "));
        else if (!state.has(next)) walk(next, [...trail, next]);
      }
      state.set(node, "done");
    };
    for (const node of graph.keys()) if (!state.has(node)) walk(node, [node]);
    expect(cycles).toEqual([]);
    // The check sees the files: runtime/ is not empty and its modules import each other.
    expect([...graph.values()].flat().length).toBeGreaterThan(20);
  });
});
