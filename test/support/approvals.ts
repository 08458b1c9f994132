/**
 * Helpers for the approvals / sandbox end-to-end tests: temp workspaces, Codex patches, a marker
 * file whose line count says how often a command really ran, and the tool results the model got
 * back (read from the mock's recorded request bodies).
 */
import { existsSync, mkdtempSync, readFileSync, realpathSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Frame, TestClient } from "./client.js";
import type { MockModelServer } from "./mock-model-server.js";
import type { ProviderName } from "./turns.js";
import { toolResultsIn } from "./wire.js";

export const COMMAND_APPROVAL = "item/commandExecution/requestApproval";
export const FILE_APPROVAL = "item/fileChange/requestApproval";

/** A fresh workspace directory (symlinks resolved, so paths compare equal to what the server reports). */
export function makeWorkspace(): { dir: string; cleanup(): void } {
  const dir = realpathSync(mkdtempSync(path.join(os.tmpdir(), "aas-ws-")));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** A command that appends one line to `marker.txt` each time it really runs, then prints `ran-<n>`. */
export const MARK_COMMAND = "echo run >> marker.txt; echo ran-$(wc -l < marker.txt)";

/** How many times MARK_COMMAND ran in `dir` (0 when the marker does not exist). */
export function markerCount(dir: string, name = "marker.txt"): number {
  const file = path.join(dir, name);
  if (!existsSync(file)) return 0;
  return readFileSync(file, "utf8").split("\n").filter((l) => l !== "").length;
}

export function addFilePatch(file: string, lines: string[]): string {
  return ["*** Begin Patch", `*** Add File: ${file}`, ...lines.map((l) => `+${l}`), "*** End Patch"].join("\n");
}

export function updateFilePatch(file: string, oldLine: string, newLine: string): string {
  return ["*** Begin Patch", `*** Update File: ${file}`, "@@", `-${oldLine}`, `+${newLine}`, "*** End Patch"].join("\n");
}

/** Texts of the tool results in the mock's `n`-th request (0-based), in order. */
export function toolResultTexts(mock: MockModelServer, provider: ProviderName, n: number): string[] {
  const req = mock.requests[n];
  if (!req) throw new Error(`the mock got only ${mock.requests.length} requests; wanted #${n}`);
  return toolResultsIn(provider, req.body).map((r) => r.text);
}

/** The last tool result the mock's `n`-th request carries. */
export function lastToolResult(mock: MockModelServer, provider: ProviderName, n: number): string {
  const texts = toolResultTexts(mock, provider, n);
  if (texts.length === 0) throw new Error(`request #${n} carries no tool result`);
  return texts[texts.length - 1]!;
}

/** The n-th (0-based) server request of `method` the client has received, waiting for it if needed. */
export async function nthServerRequest(client: TestClient, method: string, n = 0, timeoutMs = 10_000): Promise<Frame> {
  let seen = 0;
  return client.waitFor((f) => f.method === method && f.id !== undefined && seen++ === n, timeoutMs);
}

/** Every thread/status/changed status the client got for `threadId`, in order. */
export function statusesOf(client: TestClient, threadId: string): any[] {
  return client
    .notifications("thread/status/changed")
    .filter((f) => f.params.threadId === threadId)
    .map((f) => f.params.status);
}
