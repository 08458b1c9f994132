// @needs-os-sandbox: codex exec runs shell commands and patches through the server's OS sandbox
/**
 * The real `codex exec --remote` 0.171 against this server (through a recording relay) and the mock
 * model: plain turn, `exec resume`, shell, apply_patch and the bearer token. Every session must be
 * conformant: no request answered -32601/-32602, every server message valid against Codex's schema.
 */
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CODEX_BIN, codexEnv, conformanceProblems, noCodex } from "./support/codex.js";
import { startRecordingRelay, type RecordingRelay } from "./support/recording-relay.js";
import { addFilePatch, makeWorkspace } from "./support/approvals.js";
import { startTurnHarness, type TurnHarness } from "./support/turns.js";

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function runCodex(args: string[], env: NodeJS.ProcessEnv, cwd: string): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(CODEX_BIN, args, { env, cwd, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

const TOKEN = "conformance-token-7f3a";

describe.skipIf(noCodex)("codex exec --remote (real codex 0.171)", () => {
  let h: TurnHarness;
  let relay: RecordingRelay;
  let ws: ReturnType<typeof makeWorkspace>;
  let codex: ReturnType<typeof codexEnv>;

  beforeAll(async () => {
    ws = makeWorkspace();
    h = await startTurnHarness("pglite", "openai", { authToken: TOKEN, cwd: ws.dir });
    relay = await startRecordingRelay(h.ts.url);
    codex = codexEnv({ AAS_TOKEN: TOKEN });
  });
  afterAll(async () => {
    await relay?.close();
    await h?.close();
    codex?.cleanup();
    ws?.cleanup();
  });

  const exec = (...args: string[]) => runCodex(["exec", "--remote", relay.url, "--remote-auth-token-env", "AAS_TOKEN", "--skip-git-repo-check", ...args], codex.env, ws.dir);
  const threadIdOf = (r: Run) => /thread id: (\S+)/.exec(r.stderr)?.[1];

  // codex exec 0.171 backfills turn/completed with one thread/read {includeTurns:true} whenever the
  // thread is not ephemeral and the turn's itemsView is not "full" (exec/src/lib.rs
  // should_backfill_turn_completed_items: `!thread_ephemeral && items_view != Full`), so it does
  // the same against Codex's own app-server, which also sends "summary" here. Only a "full" view
  // (every item of the turn, command output included, to every subscriber) would avoid it.
  // Asserted: exactly one such read, and it is answered. (`--ephemeral`, the one
  // case exec does not backfill, is refused by exec with --remote.)
  it("runs a plain turn, prints the streamed answer; turn/completed carries the summary items", async () => {
    h.mock.enqueue({ text: ["Hello ", "from ", "the mock"] });
    const from = relay.frames.length;
    const r = await exec("say hello");
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("Hello from the mock");
    const session = relay.frames.slice(from);
    const completed = session.find((f) => f.frame.method === "turn/completed")!.frame.params.turn;
    expect(completed.itemsView).toBe("summary");
    expect(completed.items.map((i: any) => i.type)).toEqual(["userMessage", "agentMessage"]);
    const reads = relay.exchanges().filter((e) => e.request.method === "thread/read" && session.some((f) => f.frame === e.request));
    expect(reads.map((e) => e.request.params)).toEqual([{ threadId: threadIdOf(r), includeTurns: true }]);
    expect(reads[0]!.response.result.thread.turns.at(-1).items.at(-1).text).toBe("Hello from the mock");
    expect(conformanceProblems(session)).toEqual([]);
  });

  it("resumes a thread with exec resume <id> and the model sees the earlier turn", async () => {
    h.mock.enqueue({ text: "first answer" });
    const first = await exec("remember the word pelican");
    expect(first.code, first.stderr).toBe(0);
    const id = threadIdOf(first)!;
    expect(id).toBeTruthy();
    h.mock.enqueue({ text: "second answer" });
    const from = relay.frames.length;
    const second = await exec("resume", id, "what was the word?");
    expect(second.code, second.stderr).toBe(0);
    expect(second.stdout).toContain("second answer");
    expect(threadIdOf(second)).toBe(id);
    expect(JSON.stringify(h.mock.requests.at(-1)!.body)).toContain("pelican");
    expect(conformanceProblems(relay.frames, from)).toEqual([]);
  });

  it("runs a shell command and applies a patch (codex exec asks for approvalPolicy never; the sandbox lets it write the workspace)", async () => {
    h.mock.enqueue(
      { toolCalls: [{ name: "shell", arguments: { command: "echo shell-ran > shell.txt && cat shell.txt" } }] },
      { toolCalls: [{ name: "apply_patch", arguments: { patch: addFilePatch("patched.txt", ["patched line"]) } }] },
      { text: "all done" },
    );
    const from = relay.frames.length;
    const r = await exec("do the work");
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("all done");
    expect(readFileSync(path.join(ws.dir, "shell.txt"), "utf8")).toBe("shell-ran\n");
    expect(readFileSync(path.join(ws.dir, "patched.txt"), "utf8")).toBe("patched line\n");
    const types = relay.frames.slice(from).filter((f) => f.frame.method === "item/completed").map((f) => f.frame.params.item.type);
    expect(types).toEqual(expect.arrayContaining(["commandExecution", "fileChange"]));
    expect(conformanceProblems(relay.frames, from)).toEqual([]);
  });

  it("exec --json prints the command as Codex does: the shell invocation that ran", async () => {
    h.mock.enqueue({ toolCalls: [{ name: "shell", arguments: { command: "echo 'json mode' > json.txt" } }] }, { text: "json done" });
    const from = relay.frames.length;
    const r = await exec("--json", "write json.txt");
    expect(r.code, r.stderr).toBe(0);
    const events = r.stdout.split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l));
    const command = events.find((e) => e.type === "item.completed" && e.item?.type === "command_execution")?.item;
    expect(command).toMatchObject({ command: `/bin/bash -lc "echo 'json mode' > json.txt"`, exit_code: 0, status: "completed" });
    expect(readFileSync(path.join(ws.dir, "json.txt"), "utf8")).toBe("json mode\n");
    expect(conformanceProblems(relay.frames, from)).toEqual([]);
  });

  it("is refused without the token (the relay forwards what codex sends)", async () => {
    const r = await runCodex(["exec", "--remote", relay.url, "--skip-git-repo-check", "hi"], codex.env, ws.dir);
    expect(r.code).not.toBe(0);
    expect(existsSync(ws.dir)).toBe(true);
  });
});
