/**
 * The real `codex` 0.171 binary for conformance tests, and Codex's own JSON Schema to check what
 * the server sent it. The binary comes from CODEX_BIN or ~/.cache/aas-codex (installed with
 * `npm install --prefix ~/.cache/aas-codex @openai/codex@0.171.0`, outside the project's
 * dependencies). Missing → the suites are skipped with the reason printed; with REQUIRE_CODEX=1
 * (set by .ci/run) that is a failure instead, so CI never passes by skipping them.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { Ajv } from "ajv";
import type { RecordedFrame } from "./recording-relay.js";

const CACHE_BIN = path.join(os.homedir(), ".cache", "aas-codex", "node_modules", ".bin", "codex");
export const CODEX_BIN = process.env.CODEX_BIN || CACHE_BIN;

function probe(): string | null {
  if (!existsSync(CODEX_BIN)) return `${CODEX_BIN} not found (npm install --prefix ~/.cache/aas-codex @openai/codex@0.171.0, or set CODEX_BIN)`;
  const r = spawnSync(CODEX_BIN, ["--version"], { encoding: "utf8", timeout: 30_000 });
  if (r.status !== 0 || !r.stdout.includes("0.171.0")) return `${CODEX_BIN} --version gave ${JSON.stringify((r.stdout || r.stderr || "").trim())}, want codex-cli 0.171.0`;
  return null;
}
const reason = probe();
if (reason) {
  if (process.env.REQUIRE_CODEX === "1") throw new Error(`REQUIRE_CODEX=1 but the codex binary is not usable: ${reason}`);
  console.warn(`[skipped] conformance tests with the real codex binary: ${reason}`);
}
export const noCodex = reason !== null;

export function hasTmux(): boolean {
  return spawnSync("tmux", ["-V"], { encoding: "utf8" }).status === 0;
}

/**
 * A throwaway CODEX_HOME whose config keeps Codex on 127.0.0.1: no update check, no analytics
 * or feedback upload; every proxy variable points at a closed local port so any request Codex
 * would still make on its own cannot leave the machine.
 */
export function codexEnv(extra: Record<string, string> = {}): { env: NodeJS.ProcessEnv; home: string; cleanup(): void } {
  const home = mkdtempSync(path.join(os.tmpdir(), "aas-codex-home-"));
  writeFileSync(path.join(home, "config.toml"), ["check_for_update_on_startup = false", "[analytics]", "enabled = false", "[feedback]", "enabled = false", ""].join("\n"));
  const dead = "http://127.0.0.1:9";
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: home,
    TERM: "xterm-256color",
    LANG: "C.UTF-8",
    CODEX_HOME: home,
    HTTPS_PROXY: dead,
    HTTP_PROXY: dead,
    ALL_PROXY: dead,
    NO_PROXY: "127.0.0.1,localhost",
    OPENAI_API_KEY: "not-used",
    RUST_LOG: "error",
    ...extra,
  };
  return { env, home, cleanup: () => rmSync(home, { recursive: true, force: true }) };
}

// ---- Codex's JSON Schema -------------------------------------------------------------------

const SCHEMA_DIR = path.resolve(import.meta.dirname, "../../../shared/reference/codex-app-server-schema/json-experimental");
const load = (f: string) => JSON.parse(readFileSync(path.join(SCHEMA_DIR, f), "utf8"));

const PARAMLESS_RESPONSES: Record<string, string> = {
  "config/mcpServer/reload": "McpServerRefreshResponse",
  "configRequirements/read": "ConfigRequirementsReadResponse",
  "account/logout": "LogoutAccountResponse",
  "account/securitySetup/read": "GetAccountSecuritySetupResponse",
};

let validators: ReturnType<typeof build> | undefined;
function build() {
  const ajv = new Ajv({ strict: false, allErrors: false, validateFormats: false });
  const bundle = load("codex_app_server_protocol.v2.schemas.json");
  ajv.addSchema({ ...bundle, $id: "bundle" });
  // Types outside v2 (fuzzyFileSearch's responses) are only in the bundle of every type.
  ajv.addSchema({ ...load("codex_app_server_protocol.schemas.json"), $id: "all" });
  const notification = ajv.compile(load("ServerNotification.json"));
  const serverRequest = ajv.compile(load("ServerRequest.json"));
  const initialize = ajv.compile(load("v1/InitializeResponse.json"));
  const responseOf = new Map<string, string>();
  for (const v of load("ClientRequest.json").oneOf as any[]) {
    const method = v.properties.method.enum[0] as string;
    const params = v.properties.params;
    const ref = ((params.$ref ?? params.anyOf?.find((a: any) => a.$ref)?.$ref) as string | undefined)?.split("/").pop();
    if (ref) responseOf.set(method, ref.replace(/Params$/, "Response"));
  }
  // Methods without params name their response after Codex's Rust type, not a params type.
  for (const [method, response] of Object.entries(PARAMLESS_RESPONSES)) if (!responseOf.has(method)) responseOf.set(method, response);
  return { ajv, notification, serverRequest, initialize, responseOf };
}

/**
 * Every problem with the server's side of a recorded session: a request answered -32601/-32602,
 * or a response, notification or server request Codex's schema rejects. Empty means conformant.
 */
export function conformanceProblems(frames: RecordedFrame[], from = 0): string[] {
  validators ??= build();
  const v = validators;
  const problems: string[] = [];
  const requests = new Map<string, string>();
  // Requests are matched over every frame, problems reported from `from` on: a response after
  // `from` may answer a request made before it (an earlier client's, still in flight).
  for (const [index, { conn, dir, frame }] of frames.entries()) {
    if (index < from) {
      if (dir === "client→server" && typeof frame === "object" && frame?.method && frame.id !== undefined) requests.set(`${conn}:${JSON.stringify(frame.id)}`, frame.method);
      continue;
    }
    if (typeof frame !== "object" || frame === null) {
      problems.push(`conn ${conn} ${dir}: not JSON: ${String(frame).slice(0, 200)}`);
      continue;
    }
    const key = `${conn}:${JSON.stringify(frame.id)}`;
    if (dir === "client→server") {
      if (frame.method && frame.id !== undefined) requests.set(key, frame.method);
      continue;
    }
    const { jsonrpc: _j, emittedAtMs: _e, ...msg } = frame;
    if (msg.method !== undefined) {
      const check = msg.id !== undefined ? v.serverRequest : v.notification;
      if (!check(msg)) problems.push(`${msg.method}: ${v.ajv.errorsText(check.errors)} in ${JSON.stringify(msg).slice(0, 300)}`);
      continue;
    }
    const method = requests.get(key) ?? "?";
    if (msg.error) {
      if (msg.error.code === -32601 || msg.error.code === -32602) problems.push(`${method} answered ${msg.error.code}: ${msg.error.message}`);
      continue;
    }
    const name = v.responseOf.get(method);
    const validate = method === "initialize" ? v.initialize : v.ajv.getSchema(`bundle#/definitions/${name}`) ?? v.ajv.getSchema(`all#/definitions/${name}`);
    if (!validate) problems.push(`${method}: no response schema in Codex's protocol`);
    else if (!validate(msg.result)) problems.push(`${method} result: ${v.ajv.errorsText(validate.errors)} in ${JSON.stringify(msg.result).slice(0, 300)}`);
  }
  return problems;
}
