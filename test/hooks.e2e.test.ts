// @needs-os-sandbox: hooks run in the OS sandbox (vitest.config.ts leaves this file out where bubblewrap cannot run).
/**
 * Hooks inside the record (issue 32 item 5, issue 24 item 4), over a real WebSocket against the mock
 * model with real hook processes in the sandbox:
 *   - input on stdin: a 200 KB patch is vetoed exactly like a 1 KB one;
 *   - a preToolUse hook that times out, crashes, fails or cannot run blocks the call (fails closed),
 *     with a reason the model and the user see; the vetoed call is its item, closed with the reason;
 *   - a postToolUse hook's failure is the hook's: the model gets the tool's real result;
 *   - every run is recorded and announced (hook/started, hook/completed);
 *   - a stop hook may send the model back to work (a hookPrompt item, another request);
 *   - hooks get the turn's abort signal: an interrupt, or a shutdown, does not wait for them.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { CommandRunner } from "../src/sandbox/runner.js";
import { BACKENDS } from "./support/db.js";
import { TestClient } from "./support/client.js";
import { startTurnHarness, text, turnCompleted, type TurnHarness } from "./support/turns.js";
import { itemsCompleted, LOOKUP_TOOL, toolResultsIn } from "./support/wire.js";

const backend = BACKENDS[BACKENDS.length - 1]!;
const provider = "openai" as const;

/** One hooks.json whose hooks act on words in their input, so each test picks a behaviour. */
const PRE = `input=$(cat); case "$input" in *HANG-NOW*) sleep 30;; *CRASH-NOW*) kill -SEGV $$;; *EXIT-ONE*) echo "hook bug" >&2; exit 1;; *FORBIDDEN*) echo "forbidden words are not allowed" >&2; exit 2;; esac`;
const POST = `input=$(cat); case "$input" in *POSTFAIL*) echo "post hook broke" >&2; exit 3;; esac`;
const STOP = `input=$(cat); case "$input" in *SLOW-STOP*) sleep 600;; esac; case "$input" in *'"stop_hook_active":false'*KEEP-GOING*|*KEEP-GOING*'"stop_hook_active":false'*) echo '{"decision":"continue","message":"run the tests before you stop"}';; esac`;

describe("hooks inside the record", () => {
  let h: TurnHarness;
  let client: TestClient;
  let dir: string;
  let saved: string | undefined;
  let threadId: string;
  beforeEach(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "aas-hooks-record-"));
    const config = {
      hooks: {
        preToolUse: [
          { matcher: "shell|apply_patch", hooks: [{ type: "command", command: PRE, timeoutSec: 2 }] },
          { matcher: "lookup", hooks: [{ type: "command", command: "/nonexistent/policy-check" }] },
        ],
        postToolUse: [{ matcher: "shell", hooks: [{ type: "command", command: POST }] }],
        stop: [{ hooks: [{ type: "command", command: STOP, timeoutSec: 600 }] }],
      },
    };
    writeFileSync(path.join(dir, "hooks.json"), JSON.stringify(config));
    saved = process.env.APP_SERVER_HOOKS_CONFIG;
    process.env.APP_SERVER_HOOKS_CONFIG = path.join(dir, "hooks.json");
    h = await startTurnHarness(backend, provider);
    client = await TestClient.initialized(h.ts.url);
    threadId = (await client.request("thread/start", { cwd: dir, approvalPolicy: "never", dynamicTools: [LOOKUP_TOOL] })).thread.id;
  });
  afterEach(async () => {
    vi.restoreAllMocks();
    if (saved === undefined) delete process.env.APP_SERVER_HOOKS_CONFIG;
    else process.env.APP_SERVER_HOOKS_CONFIG = saved;
    await client?.close();
    await h?.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const start = async (input: string) => (await client.request("turn/start", { threadId, input: text(input) })).turn;
  const run = async (input: string) => (await turnCompleted(client, (await start(input)).id, 60_000)).params.turn;
  const addFile = (name: string, body: string) => `*** Begin Patch\n*** Add File: ${name}\n${body.split("\n").map((l) => `+${l}`).join("\n")}\n*** End Patch`;
  const hookRuns = (method: "hook/started" | "hook/completed") => client.notifications(method).map((f) => f.params.run);

  it("input on stdin: a 200 KB patch is vetoed exactly like a 1 KB one; each vetoed call is its item, closed with the reason", async () => {
    const small = addFile("small.txt", `FORBIDDEN ${"a".repeat(1000)}`);
    const big = addFile("big.txt", `FORBIDDEN ${"b".repeat(200 * 1024)}`);
    h.mock.enqueue({ toolCalls: [{ name: "apply_patch", arguments: { patch: small } }] }, { toolCalls: [{ name: "apply_patch", arguments: { patch: big } }] }, { text: "Both were blocked." });
    expect(await run("add the files")).toMatchObject({ status: "completed" });
    expect(existsSync(path.join(dir, "small.txt"))).toBe(false);
    expect(existsSync(path.join(dir, "big.txt"))).toBe(false);
    for (const r of [1, 2]) expect(toolResultsIn(provider, h.mock.requests[r]!.body).at(-1)!.text).toBe("A hook blocked this call: forbidden words are not allowed. It was not run.");
    expect(itemsCompleted(client, "fileChange").map((i) => i.status)).toEqual(["declined", "declined"]);
    const blocked = hookRuns("hook/completed").filter((r) => r.eventName === "preToolUse");
    expect(blocked.map((r) => [r.status, r.entries])).toEqual([
      ["blocked", [{ kind: "feedback", text: "forbidden words are not allowed" }]],
      ["blocked", [{ kind: "feedback", text: "forbidden words are not allowed" }]],
    ]);
    // In the record: thread/events/list has them, before the item's completion.
    const { data } = await client.request("thread/events/list", { threadId, limit: 1000 });
    const methods = data.map((e: any) => e.method);
    expect(methods.filter((m: string) => m === "hook/completed").length).toBeGreaterThanOrEqual(2);
    expect(methods.indexOf("hook/completed")).toBeLessThan(methods.lastIndexOf("item/completed"));
  });

  it.each([
    ["times out", "HANG-NOW", /timed out after 2 s, so the call was blocked/],
    ["crashes", "CRASH-NOW", /(crashed|exit code 139).*so the call was blocked/],
    ["exits with another code", "EXIT-ONE", /failed \(exit code 1: hook bug\), so the call was blocked/],
  ])("a preToolUse hook that %s blocks the call (fails closed), and says why to the model and the user", async (_what, word, reason) => {
    h.mock.enqueue({ toolCalls: [{ name: "shell", arguments: { command: `echo ${word} > ran.txt` } }] }, { text: "It was blocked." });
    expect(await run("run it")).toMatchObject({ status: "completed" });
    expect(existsSync(path.join(dir, "ran.txt"))).toBe(false);
    const [result] = toolResultsIn(provider, h.mock.requests[1]!.body);
    expect(result!.text).toMatch(/^A hook blocked this call: the preToolUse hook `.*`/);
    expect(result!.text).toMatch(reason);
    const [item] = itemsCompleted(client, "commandExecution");
    expect(item).toMatchObject({ status: "declined", exitCode: null });
    expect(item.aggregatedOutput).toMatch(reason);
    const [run0] = hookRuns("hook/completed");
    expect(run0).toMatchObject({ eventName: "preToolUse", status: "failed" });
    expect(run0.entries[0].text).toMatch(reason);
  });

  it("a preToolUse hook that cannot run (not found) blocks a dynamic tool call: the client is never asked", async () => {
    let asked = 0;
    client.onServerRequest("item/tool/call", () => {
      asked++;
      return { contentItems: [{ type: "inputText", text: "v" }], success: true };
    });
    h.mock.enqueue({ toolCalls: [{ name: "lookup", arguments: { key: "k" } }] }, { text: "Blocked." });
    expect(await run("look it up")).toMatchObject({ status: "completed" });
    expect(asked).toBe(0);
    const [result] = toolResultsIn(provider, h.mock.requests[1]!.body);
    expect(result!.text).toMatch(/A hook blocked this call: the preToolUse hook `\/nonexistent\/policy-check` failed \(exit code 127.*so the call was blocked/);
    const [item] = itemsCompleted(client, "dynamicToolCall");
    expect(item).toMatchObject({ status: "failed", success: false });
    expect(item.contentItems[0].text).toMatch(/preToolUse hook blocked it/);
  });

  it("a postToolUse hook that fails is the hook's failure: the model gets the command's real output, not 'Tool shell failed'", async () => {
    h.mock.enqueue({ toolCalls: [{ name: "shell", arguments: { command: "echo POSTFAIL-$((40+2)) > out.txt; cat out.txt" } }] }, { text: "Done." });
    expect(await run("run it")).toMatchObject({ status: "completed" });
    expect(readFileSync(path.join(dir, "out.txt"), "utf8")).toBe("POSTFAIL-42\n");
    const [result] = toolResultsIn(provider, h.mock.requests[1]!.body);
    expect(result!.text).toContain("POSTFAIL-42");
    expect(result!.text).not.toMatch(/failed|hook/i);
    const post = hookRuns("hook/completed").find((r) => r.eventName === "postToolUse");
    expect(post).toMatchObject({ status: "failed" });
    expect(post.entries[0].text).toMatch(/exit code 3: post hook broke/);
  });

  it("a postToolUse hook that cannot even be started (the runner throws) is still only the hook's failure, after the command ran", async () => {
    const real = CommandRunner.prototype.run;
    vi.spyOn(CommandRunner.prototype, "run").mockImplementation(async function (this: CommandRunner, req) {
      if (req.env?.APP_SERVER_HOOK_EVENT === "postToolUse") throw new Error("injected: the sandbox could not be set up");
      return real.call(this, req);
    });
    h.mock.enqueue({ toolCalls: [{ name: "shell", arguments: { command: "echo side-effect >> ran.txt; echo done" } }] }, { text: "Done." });
    expect(await run("run it")).toMatchObject({ status: "completed" });
    expect(readFileSync(path.join(dir, "ran.txt"), "utf8")).toBe("side-effect\n");
    const [result] = toolResultsIn(provider, h.mock.requests[1]!.body);
    expect(result!.text).toContain("done");
    expect(result!.text).not.toMatch(/shell failed|injected/);
    expect(hookRuns("hook/completed").find((r) => r.eventName === "postToolUse")).toMatchObject({ status: "failed" });
  });

  it("a stop hook may send the model back to work once it asks: a hookPrompt item, another request with its message", async () => {
    h.mock.enqueue({ text: "KEEP-GOING: I am done." }, { text: "Tests pass. Done." });
    const turn = await run("finish the task");
    expect(turn).toMatchObject({ status: "completed", stopReason: "finalAnswer" });
    expect(h.mock.requests).toHaveLength(2);
    expect(h.mock.requests[1]!.rawBody).toContain("run the tests before you stop");
    const [prompt] = itemsCompleted(client, "hookPrompt");
    const stops = hookRuns("hook/completed").filter((r) => r.eventName === "stop");
    expect(stops.map((r) => r.status)).toEqual(["blocked", "completed"]);
    expect(prompt.fragments).toEqual([{ text: "run the tests before you stop", hookRunId: stops[0].id }]);
    // The stop hook ran before the turn's end was recorded: its events come before turn/completed.
    const methods = client.notifications().map((f) => f.method);
    expect(methods.lastIndexOf("hook/completed")).toBeLessThan(methods.indexOf("turn/completed"));
  });

  it("a turn that ends other than with an answer (refused) runs the stop hooks once, observing, before its end is recorded", async () => {
    h.mock.enqueue({ text: "KEEP-GOING half", stop: "refusal" }, { text: "not reached" });
    const turn = await run("go");
    expect(turn).toMatchObject({ status: "failed", stopReason: "refused" });
    expect(h.mock.requests).toHaveLength(1);
    const stops = hookRuns("hook/completed").filter((r) => r.eventName === "stop");
    expect(stops.map((r) => r.status)).toEqual(["completed"]);
    const methods = client.notifications().map((f) => f.method);
    expect(methods.lastIndexOf("hook/completed")).toBeLessThan(methods.indexOf("turn/completed"));
  });

  it("a turn interrupted while its stop hook runs ends at once (the hook is killed, not waited for)", async () => {
    h.mock.enqueue({ text: "SLOW-STOP answer" });
    const turn = await start("go");
    await client.waitForNotification("hook/started", (p) => p.run.eventName === "stop", 30_000);
    await client.request("turn/interrupt", { threadId, turnId: turn.id });
    const done = (await turnCompleted(client, turn.id, 30_000)).params.turn;
    expect(done.status).toBe("interrupted");
    const stop = hookRuns("hook/completed").find((r) => r.eventName === "stop");
    expect(stop).toMatchObject({ status: "failed" });
    expect(stop.entries[0].text).toMatch(/was stopped: the turn was interrupted/);
  });

  it("a shutdown while a stop hook runs does not wait for it", async () => {
    h.mock.enqueue({ text: "SLOW-STOP answer" });
    await start("go");
    await client.waitForNotification("hook/started", (p) => p.run.eventName === "stop", 30_000);
    // The hook sleeps 600 s with a 600 s timeout: a close that waited for it would hit the test's timeout.
    await h.ts.close();
  });
});
