// @needs-os-sandbox: runs commands in the OS sandbox (vitest.config.ts leaves this file out where bubblewrap cannot run).
/**
 * The sandbox over a real WebSocket, mostly with `approvalPolicy: "never"` (nothing is asked): timeouts
 * and interrupts kill the command's whole process tree, and every attempt to reach outside the
 * allowed roots (`..`, absolute paths, symbolic links, a workdir outside, reading the server's
 * home) is refused with a tool result saying why, while the turn goes on and nothing is
 * written outside. The workspace is not under the temp dir (a writable root): TMPDIR points at a
 * sibling directory, as in the tool unit tests.
 */
import { readdirSync, readFileSync, symlinkSync, writeFileSync, existsSync } from "node:fs";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { BACKENDS } from "./support/db.js";
import { TestClient } from "./support/client.js";
import { startTurnHarness, text, turnCompleted, type TurnHarness } from "./support/turns.js";
import { itemsCompleted, itemsStarted, serverRequests } from "./support/wire.js";
import { addFilePatch, COMMAND_APPROVAL, FILE_APPROVAL, toolResultTexts, updateFilePatch } from "./support/approvals.js";
import { makeDirs, processesRunning, runningPids, waitGone, type Dirs } from "./tools/helpers.js";
import { shellInvocation } from "../src/tools/shell-invocation.js";

const backend = BACKENDS[BACKENDS.length - 1]!;
const provider = "openai" as const;

/**
 * Starts a background sleep, a subshell with a child of its own, a `setsid -f` escapee and a
 * foreground sleep, each with a command line of its own, then prints `started` and blocks. The
 * command runs in its own PID namespace, so the test finds these processes by command line.
 */
const TREE_COMMAND = "sleep 7301 & (sleep 7302 & wait) & setsid -f sleep 7303; echo started; sleep 7304";
const TREE = ["sleep 7301", "sleep 7302", "sleep 7303", "sleep 7304"];
const treeRunning = () => TREE.flatMap(processesRunning);

describe("sandbox and process trees (approvalPolicy never)", () => {
  let h: TurnHarness;
  let client: TestClient;
  let dirs: Dirs;

  beforeEach(async () => {
    h = await startTurnHarness(backend, provider);
    client = await TestClient.initialized(h.ts.url);
    dirs = makeDirs(); // after the harness: its home stays in the real temp dir
  });
  afterEach(async () => {
    await client?.close();
    await h?.close();
    dirs?.cleanup();
  });

  const startThread = async (sandbox: string) =>
    (await client.request("thread/start", { cwd: dirs.ws, approvalPolicy: "never", sandbox })).thread.id as string;
  const runTurn = async (threadId: string, input: string) => {
    const { turn } = await client.request("turn/start", { threadId, input: text(input) });
    return (await turnCompleted(client, turn.id, 20_000)).params.turn;
  };
  /** The results the model got, one per tool call, in call order (call i's result is in request i + 1). */
  const resultsOfCalls = (n: number) => Array.from({ length: n }, (_, i) => toolResultTexts(h.mock, provider, i + 1).at(-1)!);
  const noneAsked = () => {
    expect(serverRequests(client, COMMAND_APPROVAL)).toHaveLength(0);
    expect(serverRequests(client, FILE_APPROVAL)).toHaveLength(0);
  };

  describe("process trees", () => {
    it("a timeout kills the whole tree: the item fails with exit code 124 and no process of it survives", async () => {
      const threadId = await startThread("workspace-write");
      h.mock.enqueue({ toolCalls: [{ name: "shell", arguments: { command: TREE_COMMAND, timeout_ms: 2_000 } }] }, { text: "it timed out" });
      const turn = await runTurn(threadId, "run it");
      expect(turn).toMatchObject({ status: "completed", stopReason: "finalAnswer" });

      const [item] = itemsCompleted(client, "commandExecution");
      expect(item).toMatchObject({ status: "failed", exitCode: 124 });
      expect(item.aggregatedOutput).toContain("started");
      expect(runningPids([Number(item.processId)])).toEqual([]);
      expect(await waitGone(treeRunning)).toEqual([]);
      expect(resultsOfCalls(1)[0]).toMatch(/timed out after 2000 ms/);
      noneAsked();
    });

    it("turn/interrupt mid-command kills the whole tree and ends the turn interrupted", async () => {
      const threadId = await startThread("workspace-write");
      h.mock.enqueue({ toolCalls: [{ name: "shell", arguments: { command: TREE_COMMAND } }] }, { text: "never sent" });
      const { turn } = await client.request("turn/start", { threadId, input: text("run it") });
      await client.waitForNotification("item/commandExecution/outputDelta", (p) => p.delta.includes("started"), 20_000);
      expect(await waitGone(() => (treeRunning().length === TREE.length ? [] : [0]))).toEqual([]); // the tree really runs

      await client.request("turn/interrupt", { threadId, turnId: turn.id });
      const done = (await turnCompleted(client, turn.id, 20_000)).params.turn;
      expect(done).toMatchObject({ status: "interrupted", stopReason: "interrupted" });
      const [item] = itemsCompleted(client, "commandExecution");
      expect(item.status).toBe("failed");
      expect(await waitGone(treeRunning)).toEqual([]);
      expect(h.mock.requests).toHaveLength(1);
    });
  });

  describe("escape attempts", () => {
    beforeEach(() => {
      writeFileSync(path.join(dirs.outside, "secret.txt"), "secret\n");
      symlinkSync(dirs.outside, path.join(dirs.ws, "link"));
      symlinkSync(path.join(dirs.outside, "secret.txt"), path.join(dirs.ws, "secret-link.txt"));
    });
    const outsideUntouched = () => {
      expect(readdirSync(dirs.outside)).toEqual(["secret.txt"]);
      expect(readFileSync(path.join(dirs.outside, "secret.txt"), "utf8")).toBe("secret\n");
      expect(readdirSync(dirs.root).sort()).toEqual(["outside", "tmp", "ws"]);
    };

    it("apply_patch: .., an absolute path, a symlinked directory or file, a move outside are refused; nothing is written", async () => {
      const threadId = await startThread("workspace-write");
      writeFileSync(path.join(dirs.ws, "movable.txt"), "m\n");
      const patches = [
        addFilePatch("../escaped.txt", ["x"]),
        addFilePatch(path.join(dirs.outside, "abs.txt"), ["x"]),
        addFilePatch("link/through-link.txt", ["x"]),
        updateFilePatch("secret-link.txt", "secret", "overwritten"),
        ["*** Begin Patch", "*** Update File: movable.txt", "*** Move to: ../moved.txt", "@@", "-m", "+m2", "*** End Patch"].join("\n"),
        // All or nothing: the allowed half of a patch is not written either.
        ["*** Begin Patch", "*** Add File: inside.txt", "+ok", "*** Add File: ../escaped2.txt", "+x", "*** End Patch"].join("\n"),
      ];
      h.mock.enqueue(...patches.map((patch) => ({ toolCalls: [{ name: "apply_patch", arguments: { patch } }] })), { text: "all refused" });
      expect(await runTurn(threadId, "escape")).toMatchObject({ status: "completed", stopReason: "finalAnswer" });

      const results = resultsOfCalls(patches.length);
      for (const r of results) {
        expect(r).toMatch(/^Refused to apply the patch: /);
        expect(r).toMatch(/No files were changed/);
      }
      expect(results[0]).toMatch(/escapes the workspace/);
      expect(results[1]).toContain(`${path.join(dirs.outside, "abs.txt")} is outside the writable roots`);
      expect(results[2]).toMatch(/resolves through a symbolic link/);
      expect(results[3]).toMatch(/resolves through a symbolic link/);
      expect(results[4]).toMatch(/\.\.\/moved\.txt escapes the workspace/);
      expect(results[5]).toMatch(/escapes the workspace/);
      outsideUntouched();
      expect(existsSync(path.join(dirs.ws, "inside.txt"))).toBe(false);
      expect(readFileSync(path.join(dirs.ws, "movable.txt"), "utf8")).toBe("m\n");
      // Refused before anything started: no fileChange item, no diff.
      expect(itemsStarted(client, "fileChange")).toEqual([]);
      expect(client.notifications("turn/diff/updated")).toEqual([]);
      noneAsked();
    });

    it("shell: a workdir outside (absolute, .., through a symlink) is refused with a declined item", async () => {
      const threadId = await startThread("workspace-write");
      const workdirs = [dirs.outside, "../outside", "link"];
      h.mock.enqueue(
        ...workdirs.map((workdir, i) => ({ toolCalls: [{ name: "shell", arguments: { command: `touch escaped-${i}.txt`, workdir } }] })),
        { text: "all refused" },
      );
      expect(await runTurn(threadId, "escape")).toMatchObject({ status: "completed", stopReason: "finalAnswer" });

      for (const r of resultsOfCalls(workdirs.length)) {
        expect(r).toMatch(/^Refused to run this command: the working directory is not allowed/);
        expect(r).toMatch(/approval policy is "never"/);
      }
      expect(itemsCompleted(client, "commandExecution").map((i) => [i.status, i.exitCode])).toEqual([
        ["declined", null],
        ["declined", null],
        ["declined", null],
      ]);
      outsideUntouched();
      expect(readdirSync(dirs.ws).sort()).toEqual(["link", "secret-link.txt"]);
      // The refusal is the sandbox's, not a failed spawn: the item names the workdir it was given.
      expect(itemsStarted(client, "commandExecution").map((i) => i.cwd)).toEqual([dirs.outside, path.join(dirs.ws, "../outside"), path.join(dirs.ws, "link")]);
      noneAsked();
    });

    it("read-only: reading outside (absolute, .., symlink) works as a sandboxed `cat` would, the server's home is refused, any write fails", async () => {
      const threadId = await startThread("read-only");
      writeFileSync(path.join(dirs.ws, "inside.txt"), "inside\n");
      writeFileSync(path.join(h.ts.home, "planted-secret.txt"), "home secret\n");
      const calls = [
        { name: "read_file", arguments: { path: "/etc/passwd" } },
        { name: "read_file", arguments: { path: "../outside/secret.txt" } },
        { name: "read_file", arguments: { path: "secret-link.txt" } },
        { name: "read_file", arguments: { path: "inside.txt" } },
        { name: "read_file", arguments: { path: path.join(h.ts.home, "planted-secret.txt") } },
        { name: "apply_patch", arguments: { patch: addFilePatch("new.txt", ["x"]) } },
        { name: "shell", arguments: { command: "touch new2.txt" } },
      ];
      h.mock.enqueue(...calls.map((c) => ({ toolCalls: [c] })), { text: "done" });
      expect(await runTurn(threadId, "read")).toMatchObject({ status: "completed", stopReason: "finalAnswer" });

      const results = resultsOfCalls(calls.length);
      expect(results[0]).toMatch(/^\s+1\troot:/);
      expect(results[1]).toBe("     1\tsecret");
      expect(results[2]).toBe("     1\tsecret");
      expect(results[3]).toBe("     1\tinside");
      expect(results[4]).toMatch(/^Cannot read .*planted-secret\.txt: .* which the server keeps hidden from every tool and command/);
      expect(results[4]).not.toContain("home secret");
      expect(results[5]).toMatch(/^Refused to apply the patch: .*read-only/);
      // The command runs, inside the read-only OS sandbox, and fails there.
      expect(results[6]).toMatch(/^Exit code: 1\n[^]*Read-only file system/);
      expect(readdirSync(dirs.ws).sort()).toEqual(["inside.txt", "link", "secret-link.txt"]);
      outsideUntouched();
      noneAsked();
    });
  });
  describe("on-request: asks only for what the sandbox does not allow", () => {
    it("inside runs unasked; a workdir or a patch outside is asked, and runs once accepted", async () => {
      const threadId = (await client.request("thread/start", { cwd: dirs.ws, approvalPolicy: "on-request", sandbox: "workspace-write" })).thread.id;
      const asked: any[] = [];
      client.onServerRequest(COMMAND_APPROVAL, (p) => (asked.push(p), { decision: "accept" }));
      client.onServerRequest(FILE_APPROVAL, (p) => (asked.push(p), { decision: "accept" }));
      h.mock.enqueue(
        { toolCalls: [{ name: "shell", arguments: { command: "touch inside.txt" } }] },
        { toolCalls: [{ name: "apply_patch", arguments: { patch: addFilePatch("inside2.txt", ["in"]) } }] },
        { toolCalls: [{ name: "shell", arguments: { command: "touch granted.txt", workdir: dirs.outside } }] },
        { toolCalls: [{ name: "apply_patch", arguments: { patch: addFilePatch("../outside/granted2.txt", ["out"]) } }] },
        { text: "done" },
      );
      expect(await runTurn(threadId, "work")).toMatchObject({ status: "completed" });
      expect(readdirSync(dirs.ws).sort()).toEqual(["inside.txt", "inside2.txt"]);
      expect(readdirSync(dirs.outside).sort()).toEqual(["granted.txt", "granted2.txt"]);
      expect(asked).toHaveLength(2);
      expect(asked[0]).toMatchObject({ command: shellInvocation("touch granted.txt"), cwd: dirs.outside, reason: expect.stringMatching(/working directory/) });
      expect(asked[1]).toMatchObject({ reason: expect.stringMatching(/escapes the workspace/) });
      // The accepted workdir was writable for that command only: the sandbox still confined the rest.
      expect(itemsCompleted(client, "commandExecution").map((i) => i.status)).toEqual(["completed", "completed"]);
      expect(itemsCompleted(client, "fileChange").map((i) => i.status)).toEqual(["completed", "completed"]);
    });
  });
});
