/**
 * The container files as compose and Docker read them, for tests without a Docker engine:
 * compose's ${VAR} interpolation, env files, `environment:` maps, Dockerfile stages.
 */
import { expect } from "vitest";

export type Env = Record<string, string | undefined>;

/**
 * Compose's interpolation: ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?error}, ${VAR?error},
 * $VAR, and $$ for a literal $. Throws where compose would refuse to start.
 */
export function interpolate(text: string, env: Env): string {
  return text.replace(/\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?)([-?])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)/g, (match, name, colon, op, arg, bare) => {
    if (match === "$$") return "$";
    if (bare) return env[bare] ?? "";
    const value = env[name];
    const missing = colon ? value === undefined || value === "" : value === undefined;
    if (op === "-") return missing ? arg : value!;
    if (op === "?") {
      if (missing) throw new Error(`required variable ${name} is missing a value: ${arg}`);
      return value!;
    }
    return value ?? "";
  });
}

export function interpolateTree(node: unknown, env: Env): unknown {
  if (typeof node === "string") return interpolate(node, env);
  if (Array.isArray(node)) return node.map((n) => interpolateTree(n, env));
  if (node && typeof node === "object") return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, interpolateTree(v, env)]));
  return node;
}

/** Strings of a parsed YAML tree (values and keys; comments are gone). */
export function strings(node: unknown): string[] {
  if (typeof node === "string") return [node];
  if (Array.isArray(node)) return node.flatMap(strings);
  if (node && typeof node === "object") return Object.entries(node).flatMap(([k, v]) => [k, ...strings(v)]);
  return [];
}

/** Names of the ${VAR} and $VAR references in a compose file ($$ is an escaped literal $). */
export function referencedVariables(tree: unknown): string[] {
  const names = strings(tree).flatMap((s) =>
    [...s.replace(/\$\$/g, "").matchAll(/\$\{?([A-Za-z_][A-Za-z0-9_]*)/g)].map((m) => m[1]!),
  );
  return [...new Set(names)].sort();
}

/** An env file as compose reads it: KEY=VALUE lines; comments and blank lines ignored. */
export function parseEnvFile(text: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const line of text.split("\n")) {
    const m = /^\s*([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(line);
    if (m) env[m[1]!] = m[2]!.trim();
  }
  return env;
}

/** `environment:` as a map or as a list of KEY=VALUE. */
export function envMap(environment: unknown): Record<string, string> {
  if (Array.isArray(environment))
    return Object.fromEntries(environment.map((e: string) => [e.slice(0, e.indexOf("=")), e.slice(e.indexOf("=") + 1)]));
  return Object.fromEntries(Object.entries((environment ?? {}) as Record<string, unknown>).map(([k, v]) => [k, String(v ?? "")]));
}

export const healthcheckCommand = (hc: { test: string | string[] }) => (Array.isArray(hc.test) ? hc.test.join(" ") : hc.test);

export interface Instruction {
  keyword: string;
  args: string;
}
export interface Stage {
  from: string;
  name: string | null;
  instructions: Instruction[];
}

/** Dockerfile → stages of instructions (comments dropped, line continuations joined). */
export function parseDockerfile(text: string): Stage[] {
  const logical: string[] = [];
  let current = "";
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line.startsWith("#") || (line === "" && current === "")) continue;
    if (line.endsWith("\\")) {
      current += line.slice(0, -1) + " ";
      continue;
    }
    current += line;
    if (current.trim()) logical.push(current.trim());
    current = "";
  }
  const stages: Stage[] = [];
  for (const l of logical) {
    const [keyword, ...rest] = l.split(/\s+/);
    const args = rest.join(" ");
    if (keyword!.toUpperCase() === "FROM") {
      const m = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(args)!;
      stages.push({ from: m[1]!, name: m[2] ?? null, instructions: [] });
    } else {
      expect(stages.length, `${keyword} before the first FROM`).toBeGreaterThan(0);
      stages.at(-1)!.instructions.push({ keyword: keyword!.toUpperCase(), args });
    }
  }
  return stages;
}

export const argsOf = (stage: Stage, keyword: string) => stage.instructions.filter((i) => i.keyword === keyword).map((i) => i.args);

