// @needs-os-sandbox: runs shell commands in the OS sandbox (vitest.config.ts leaves this file out where bubblewrap cannot run).
/**
 * Issue 13, the tool host under faults: a store failure after a command ran never becomes "the
 * command failed" for the model (the completion write is retried; if it keeps failing the turn
 * fails, and the next request says the outcome is unknown), and user hooks around tool calls
 * (JSON on stdin, run in the sandbox, a veto with a reason) listed by hooks/list.
 * Store failures are injected into the real TurnStore of the in-process server.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { TurnStore } from "../src/store/turn-store.js";
import { BACKENDS } from "./support/db.js";
import { TestClient } from "./support/client.js";
import { startTurnHarness, text, turnCompleted, type TurnHarness } from "./support/turns.js";
import { itemsCompleted, mockCallId, toolResultsIn } from "./support/wire.js";
import { shellInvocation } from "../src/tools/shell-invocation.js";

const backend = BACKENDS[BACKENDS.length - 1]!;
const provider = "openai" as const;

describe("tool host under faults", () => {
  let h: TurnHarness;
  let client: TestClient;
  let workspace: string;
  let threadId: string;
  beforeEach(async () => {
    workspace = mkdtempSync(path.join(os.tmpdir(), "aas-host-ws-"));
    h = await startTurnHarness(backend, provider);
    client = await TestClient.initialized(h.ts.url);
    threadId = (await client.request("thread/start", { cwd: workspace, approvalPolicy: "never" })).thread.id;
  });
  afterEach(async () => {
    vi.restoreAllMocks();
    await client?.close();
    await h?.close();
    rmSync(workspace, { recursive: true, force: true });
  });
  const run = async (input: string) => {
    const { turn } = await client.request("turn/start", { threadId, input: text(input) });
    return (await turnCompleted(client, turn.id)).params.turn;
  };
  /** Fails recording the completion of command items `times` times (Infinity: always). */
  function failCommandCompletion(times: number) {
    const real = TurnStore.prototype.completeItem;
    let failures = 0;
    return vi.spyOn(TurnStore.prototype, "completeItem").mockImplementation(async function (this: TurnStore, q, id, payload, status, at) {
      if (payload.type === "commandExecution" && failures < times) {
        failures++;
        throw new Error("injected: the database is unavailable");
      }
      return real.call(this, q, id, payload, status, at);
    });
  }
  /** Every tool result the model was sent, in every request. */
  const everyResultText = () => h.mock.requests.flatMap((r) => toolResultsIn(provider, r.body).map((x) => x.text)).join("\n");

  it("a commit failure after the command ran (once): the write is retried and the model gets the command's real output", async () => {
    const spy = failCommandCompletion(1);
    h.mock.enqueue({ toolCalls: [{ name: "shell", arguments: { command: "echo ran >> runs.txt; echo hello" } }] }, { text: "It printed hello." });
    const turn = await run("run it");
    expect(turn).toMatchObject({ status: "completed", stopReason: "finalAnswer" });
    expect(spy).toHaveBeenCalled();
    expect(readFileSync(path.join(workspace, "runs.txt"), "utf8")).toBe("ran\n"); // ran once
    const [result] = toolResultsIn(provider, h.mock.requests[1]!.body);
    expect(result!.text).toMatch(/Exit code: 0/);
    expect(result!.text).toContain("hello");
    expect(everyResultText()).not.toMatch(/shell failed|failed to run|not executed/i);
    expect(itemsCompleted(client, "commandExecution")).toEqual([expect.objectContaining({ status: "completed", exitCode: 0 })]);
  });

  it("a commit failure that persists: the turn fails (systemError), the model is never told the command failed, the next request says its outcome is unknown", async () => {
    failCommandCompletion(Infinity);
    h.mock.enqueue({ toolCalls: [{ name: "shell", arguments: { command: "echo ran >> runs.txt" } }] }, { text: "should not be requested" });
    const turn = await run("run it");
    expect(turn.status).toBe("failed");
    expect(turn.error.message).toMatch(/could not record a completed tool item: injected/);
    expect(client.notifications("thread/status/changed").at(-1)!.params.status).toEqual({ type: "systemError" });
    expect(h.mock.requests).toHaveLength(1); // the model was not asked again, with a "failure" or anything else
    expect(readFileSync(path.join(workspace, "runs.txt"), "utf8")).toBe("ran\n");

    vi.restoreAllMocks(); // the database is back
    h.mock.enqueue({ text: "I will check runs.txt first." });
    expect(await run("what happened?")).toMatchObject({ status: "completed" });
    const [result] = toolResultsIn(provider, h.mock.requests[1]!.body);
    expect(result).toMatchObject({ callId: mockCallId(provider, 1) });
    expect(result!.text).toMatch(/outcome is unknown/);
    expect(everyResultText()).not.toMatch(/shell failed|not executed/i);
    expect(readFileSync(path.join(workspace, "runs.txt"), "utf8")).toBe("ran\n"); // never re-run
  });
});

describe("hooks", () => {
  let h: TurnHarness;
  let client: TestClient;
  let dir: string;
  let saved: string | undefined;
  beforeEach(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "aas-hooks-"));
    const config = {
      hooks: {
        // Vetoes commands that mention "forbidden", with the reason on stderr (exit 2); records every input.
        preToolUse: [
          {
            matcher: "shell",
            hooks: [{ type: "command", command: `input=$(cat); printf '%s\\n' "$input" >> pre.jsonl; case "$input" in *forbidden*) echo "forbidden words are not allowed" >&2; exit 2;; esac` }],
          },
        ],
        postToolUse: [{ hooks: [{ type: "command", command: "cat >> post.jsonl" }] }],
        stop: [{ hooks: [{ type: "command", command: "cat >> stop.jsonl" }] }],
      },
    };
    writeFileSync(path.join(dir, "hooks.json"), JSON.stringify(config));
    saved = process.env.APP_SERVER_HOOKS_CONFIG;
    process.env.APP_SERVER_HOOKS_CONFIG = path.join(dir, "hooks.json");
    h = await startTurnHarness(backend, provider);
    client = await TestClient.initialized(h.ts.url);
  });
  afterEach(async () => {
    if (saved === undefined) delete process.env.APP_SERVER_HOOKS_CONFIG;
    else process.env.APP_SERVER_HOOKS_CONFIG = saved;
    await client?.close();
    await h?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("run around tool calls and at turn end with JSON on stdin, inside the thread's sandbox; a veto blocks the call with its reason", async () => {
    const threadId = (await client.request("thread/start", { cwd: dir, approvalPolicy: "never" })).thread.id;
    h.mock.enqueue(
      { toolCalls: [{ name: "shell", arguments: { command: "echo forbidden > vetoed.txt" } }] },
      { toolCalls: [{ name: "shell", arguments: { command: "echo fine" } }] },
      { text: "Done." },
    );
    const { turn } = await client.request("turn/start", { threadId, input: text("go") });
    expect((await turnCompleted(client, turn.id)).params.turn.status).toBe("completed");
    await h.ts.server.app.turns.settle(threadId);
    expect(existsSync(path.join(dir, "vetoed.txt"))).toBe(false);
    const [blocked] = toolResultsIn(provider, h.mock.requests[1]!.body);
    expect(blocked!.text).toMatch(/A hook blocked this call: forbidden words are not allowed/);
    const pre = readFileSync(path.join(dir, "pre.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l));
    expect(pre.map((p) => p.tool_input.command)).toEqual(["echo forbidden > vetoed.txt", "echo fine"]);
    expect(pre[0]).toMatchObject({ hook_event_name: "preToolUse", thread_id: threadId, turn_id: turn.id, tool_name: "shell" });
    const post = readFileSync(path.join(dir, "post.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l));
    expect(post).toEqual([expect.objectContaining({ hook_event_name: "postToolUse", tool_name: "shell", is_error: false })]);
    expect(post[0].tool_response).toContain("fine");
    // The hook runs after the turn's end is recorded; `cat >>` creates the file before it writes: wait for the whole line.
    const stopInput = () => {
      try {
        return JSON.parse(readFileSync(path.join(dir, "stop.jsonl"), "utf8"));
      } catch {
        return null;
      }
    };
    for (let i = 0; i < 200 && stopInput() === null; i++) await new Promise((r) => setTimeout(r, 25));
    expect(stopInput()).toMatchObject({ hook_event_name: "stop", status: "completed", stop_reason: "finalAnswer" });
    // The vetoed call is an item too (issue 32): declined, with the hook's reason; it never ran.
    expect(itemsCompleted(client, "commandExecution").map((i) => [i.command, i.status])).toEqual([
      [shellInvocation("echo forbidden > vetoed.txt"), "declined"],
      [shellInvocation("echo fine"), "completed"],
    ]);
    expect(itemsCompleted(client, "commandExecution")[0].aggregatedOutput).toMatch(/forbidden words are not allowed/);

    // Inside the sandbox: a hook of a read-only thread cannot write.
    const ro = (await client.request("thread/start", { cwd: dir, approvalPolicy: "never", sandbox: "read-only" })).thread.id;
    h.mock.enqueue({ toolCalls: [{ name: "shell", arguments: { command: "true" } }] }, { text: "ok" });
    const before = readFileSync(path.join(dir, "pre.jsonl"), "utf8");
    const t2 = (await client.request("turn/start", { threadId: ro, input: text("go") })).turn;
    await turnCompleted(client, t2.id);
    expect(readFileSync(path.join(dir, "pre.jsonl"), "utf8")).toBe(before);
  });

  it("are listed by hooks/list in Codex's shape", async () => {
    const { data } = await client.request("hooks/list", { cwds: [dir] });
    const [entry] = data as any[];
    expect(entry!.cwd).toBe(dir);
    expect(entry!.errors).toEqual([]);
    expect(entry!.hooks.map((x: any) => [x.eventName, x.matcher, x.handlerType])).toEqual([
      ["preToolUse", "shell", "command"],
      ["postToolUse", null, "command"],
      ["stop", null, "command"],
    ]);
    expect(entry!.hooks[0]).toMatchObject({ sourcePath: path.join(dir, "hooks.json"), source: "user", enabled: true, timeoutSec: 60 });
  });
});
