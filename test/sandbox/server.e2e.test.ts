/**
 * The trust boundary of a real `app-server serve` process: its secrets (API keys
 * in its environment, the token file, its home) are out of reach of the commands it runs through
 * command/exec, and without a usable sandbox it says so once at start-up and refuses confined
 * commands instead of running them unconfined.
 */
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { RpcError, TestClient } from "../support/client.js";
import { parseJson, removeSeed, seededHome, spawnCli, type CliProcess, type TestHome } from "../support/process.js";
import { noSandbox } from "../support/sandbox.js";

const SECRETS = { OPENAI_API_KEY: "sk-server-secret-0101", ANTHROPIC_API_KEY: "sk-ant-server-secret-0102", GITHUB_TOKEN: "ghp_server_secret_0103" };
const TOKEN = "token-file-secret-0104-abcdef";

let proc: CliProcess | undefined;
let home: TestHome | undefined;
let scratch: string | undefined;
afterEach(async () => {
  await proc?.kill();
  await home?.cleanup();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
  proc = home = scratch = undefined;
});
afterAll(() => removeSeed());

async function serve(extraArgs: string[] = []) {
  home = await seededHome();
  scratch = mkdtempSync(path.join(os.tmpdir(), "aas-sbx-e2e-"));
  const tokenFile = path.join(scratch, "token");
  writeFileSync(tokenFile, `${TOKEN}\n`);
  proc = spawnCli(["serve", "--listen", "ws://127.0.0.1:0", "--home", home.home, "--auth-token-file", tokenFile, ...extraArgs], { env: SECRETS });
  const url = await proc.listening();
  const client = await TestClient.connect(url, { headers: { Authorization: `Bearer ${TOKEN}` } });
  await client.request("initialize", { clientInfo: { name: "test", title: null, version: "0" }, capabilities: {} });
  client.notify("initialized", {});
  return { client, tokenFile, serverPid: proc.child.pid! };
}

const exec = (client: TestClient, script: string, extra: object = {}) =>
  client.request<{ exitCode: number; stdout: string; stderr: string }>("command/exec", { command: ["sh", "-c", script], ...extra });

describe.skipIf(noSandbox)("a real server's secrets, from inside command/exec", () => {
  it("the server's environment, process, token file and home are out of reach (read-only and workspace-write)", async () => {
    const { client, tokenFile, serverPid } = await serve();
    for (const sandboxPolicy of [{ type: "readOnly" }, { type: "workspaceWrite" }]) {
      const r = await exec(
        client,
        `env; tr '\\0' '\\n' < /proc/$PPID/environ; cat /proc/*/environ; kill -0 ${serverPid} || echo no-server; cat ${tokenFile}; ls -A ${home!.home} | wc -l; true`,
        { sandboxPolicy },
      );
      const out = r.stdout + r.stderr;
      for (const secret of [...Object.values(SECRETS), TOKEN]) expect(out).not.toContain(secret);
      expect(out).toContain("no-server");
      expect(r.stdout).toMatch(/^0$/m); // the home (database, token) is an empty mask
    }
    // The start-up log said the sandbox is ready, once.
    expect(proc!.stderrLines.filter((l) => parseJson(l)?.msg === "command sandbox ready")).toHaveLength(1);
    await client.close();
  });
});

describe("a real server without a usable sandbox", () => {
  it("says so once at start-up, refuses confined commands, still runs danger-full-access ones", async () => {
    const { client } = await serve(["--bwrap", "/nonexistent/bwrap"]);
    const warnings = proc!.stderrLines.map(parseJson).filter((l) => l?.msg?.startsWith("command sandbox unavailable"));
    expect(warnings).toHaveLength(1);
    expect(warnings[0].reason).toMatch(/\/nonexistent\/bwrap cannot be run/);
    expect(warnings[0].help).toMatch(/apt-get install bubblewrap/);

    for (const sandboxPolicy of [undefined, { type: "readOnly" }, { type: "workspaceWrite" }]) {
      const refused = await exec(client, `touch ${scratch}/ran`, sandboxPolicy ? { sandboxPolicy } : {}).catch((e) => e);
      expect(refused).toBeInstanceOf(RpcError);
      expect(refused.code).toBe(-32600);
      expect(refused.message).toMatch(/the OS sandbox is not available .*never run unconfined/);
    }
    expect(existsSync(path.join(scratch!, "ran"))).toBe(false);
    const full = await exec(client, `touch ${scratch}/ran && echo ran`, { sandboxPolicy: { type: "dangerFullAccess" } });
    expect(full.stdout).toBe("ran\n");
    await client.close();
  });
});
