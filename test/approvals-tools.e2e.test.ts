// @needs-os-sandbox: runs commands in the OS sandbox (vitest.config.ts leaves this file out where bubblewrap cannot run).
/**
 * Built-in tool notifications and bad input over a real WebSocket (approvalPolicy "never",
 * sandbox workspace-write, so nothing is asked): turn/diff/updated aggregates the turn's patches,
 * turn/plan/updated mirrors update_plan, and a patch that does not apply, a missing file, an
 * unknown command or malformed arguments from the model each give a clear tool result while the
 * turn goes on to complete.
 */
import { readFileSync, writeFileSync, readdirSync } from "node:fs";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { BACKENDS } from "./support/db.js";
import { TestClient } from "./support/client.js";
import { startTurnHarness, text, turnCompleted, type TurnHarness } from "./support/turns.js";
import { expectSeqIncreasing, itemsCompleted, itemsStarted, wireSequence } from "./support/wire.js";
import { addFilePatch, makeWorkspace, toolResultTexts, updateFilePatch } from "./support/approvals.js";

const backend = BACKENDS[BACKENDS.length - 1]!;
const provider = "openai" as const;

describe("tool notifications and bad input (approvalPolicy never)", () => {
  let h: TurnHarness;
  let client: TestClient;
  let ws: string;
  let cleanup: () => void;
  let threadId: string;

  beforeEach(async () => {
    const w = makeWorkspace();
    ws = w.dir;
    cleanup = w.cleanup;
    h = await startTurnHarness(backend, provider);
    client = await TestClient.initialized(h.ts.url);
    threadId = (await client.request("thread/start", { cwd: ws, approvalPolicy: "never", sandbox: "workspace-write" })).thread.id;
  });
  afterEach(async () => {
    await client?.close();
    await h?.close();
    cleanup?.();
  });

  const runTurn = async (input: string) => {
    const { turn } = await client.request("turn/start", { threadId, input: text(input) });
    return (await turnCompleted(client, turn.id)).params.turn;
  };
  /** Queues one model reply per tool call, then a final text. */
  const script = (calls: Array<{ name: string; arguments: unknown }>, final = "done") =>
    h.mock.enqueue(...calls.map((c) => ({ toolCalls: [c] })), { text: final });
  const resultsOfCalls = (n: number) => Array.from({ length: n }, (_, i) => toolResultTexts(h.mock, provider, i + 1).at(-1)!);

  describe("turn/diff/updated and turn/plan/updated", () => {
    it("two patches on two files: the second diff holds both files, as one unified diff of the turn", async () => {
      writeFileSync(path.join(ws, "a.txt"), "one\ntwo\n");
      script([
        { name: "apply_patch", arguments: { patch: updateFilePatch("a.txt", "two", "TWO") } },
        { name: "apply_patch", arguments: { patch: addFilePatch("b.txt", ["bee"]) } },
        { name: "apply_patch", arguments: { patch: updateFilePatch("a.txt", "one", "ONE") } },
      ]);
      const turn = await runTurn("patch both");
      expect(turn.status).toBe("completed");

      const diffs = client.notifications("turn/diff/updated").map((f) => f.params);
      expect(diffs).toHaveLength(3);
      for (const d of diffs) expect(d).toMatchObject({ threadId, turnId: turn.id, seq: expect.any(Number) });
      const aFirst = ["diff --git a/a.txt b/a.txt", "--- a/a.txt", "+++ b/a.txt", "@@ -1,2 +1,2 @@", " one", "-two", "+TWO", ""].join("\n");
      const bAdded = ["diff --git a/b.txt b/b.txt", "new file mode 100644", "--- /dev/null", "+++ b/b.txt", "@@ -0,0 +1 @@", "+bee", ""].join("\n");
      const aBoth = ["diff --git a/a.txt b/a.txt", "--- a/a.txt", "+++ b/a.txt", "@@ -1,2 +1,2 @@", "-one", "-two", "+ONE", "+TWO", ""].join("\n");
      expect(diffs[0]!.diff).toBe(aFirst);
      expect(diffs[1]!.diff).toBe(aFirst + bAdded);
      // Against the file as it was before the turn, not before the last patch.
      expect(diffs[2]!.diff).toBe(aBoth + bAdded);

      // Each diff follows its fileChange item's completion.
      const seq = wireSequence(client, threadId).filter((l) => l.includes("fileChange") || l === "turn/diff/updated");
      expect(seq).toEqual(Array(3).fill(["item/started:fileChange", "item/completed:fileChange", "turn/diff/updated"]).flat());
      expect(itemsCompleted(client, "fileChange").map((i) => i.status)).toEqual(["completed", "completed", "completed"]);
      expectSeqIncreasing(client, threadId);

      // A new turn starts a new aggregate.
      script([{ name: "apply_patch", arguments: { patch: updateFilePatch("b.txt", "bee", "BEE") } }]);
      const next = await runTurn("again");
      const last = client.notifications("turn/diff/updated").at(-1)!.params;
      expect(last.turnId).toBe(next.id);
      expect(last.diff).toBe(["diff --git a/b.txt b/b.txt", "--- a/b.txt", "+++ b/b.txt", "@@ -1 +1 @@", "-bee", "+BEE", ""].join("\n"));
    });

    it("update_plan becomes turn/plan/updated with in_progress mapped to inProgress", async () => {
      script([
        {
          name: "update_plan",
          arguments: {
            explanation: "Starting with the parser.",
            plan: [
              { step: "Read the parser", status: "completed" },
              { step: "Fix the bug", status: "in_progress" },
              { step: "Add a test", status: "pending" },
            ],
          },
        },
        { name: "update_plan", arguments: { plan: [{ step: "Fix the bug", status: "completed" }] } },
      ]);
      const turn = await runTurn("plan");
      expect(turn.status).toBe("completed");
      expect(client.notifications("turn/plan/updated").map((f) => f.params)).toEqual([
        {
          threadId,
          turnId: turn.id,
          explanation: "Starting with the parser.",
          plan: [
            { step: "Read the parser", status: "completed" },
            { step: "Fix the bug", status: "inProgress" },
            { step: "Add a test", status: "pending" },
          ],
          seq: expect.any(Number),
        },
        { threadId, turnId: turn.id, explanation: null, plan: [{ step: "Fix the bug", status: "completed" }], seq: expect.any(Number) },
      ]);
      expect(resultsOfCalls(2)).toEqual(["Plan updated", "Plan updated"]);
    });
  });

  describe("bad input never crashes the turn", () => {
    it("a patch that does not apply changes nothing and says why", async () => {
      writeFileSync(path.join(ws, "a.txt"), "one\n");
      script([
        { name: "apply_patch", arguments: { patch: updateFilePatch("a.txt", "not in the file", "x") } },
        { name: "apply_patch", arguments: { patch: updateFilePatch("missing.txt", "one", "two") } },
        { name: "apply_patch", arguments: { patch: "this is not a patch" } },
        // Two hunks, the second bad: the good first one is not written either.
        { name: "apply_patch", arguments: { patch: ["*** Begin Patch", "*** Add File: new.txt", "+new", "*** Update File: a.txt", "@@", "-nope", "+x", "*** End Patch"].join("\n") } },
      ]);
      const turn = await runTurn("patch");
      expect(turn).toMatchObject({ status: "completed", stopReason: "finalAnswer", error: null });
      const results = resultsOfCalls(4);
      expect(results[0]).toMatch(/^Failed to apply the patch: .*a\.txt/s);
      expect(results[0]).toContain("not in the file");
      expect(results[1]).toMatch(/^Failed to apply the patch: .*missing\.txt/s);
      expect(results[2]).toMatch(/^Invalid patch: The first line of the patch must be '\*\*\* Begin Patch'/);
      expect(results[3]).toMatch(/^Failed to apply the patch: .*a\.txt/s);
      for (const r of results) expect(r).toMatch(/No files were changed/);
      expect(readFileSync(path.join(ws, "a.txt"), "utf8")).toBe("one\n");
      expect(readdirSync(ws).sort()).toEqual(["a.txt"]);
      // As implemented, a patch is checked before its item starts: no fileChange item, no diff.
      expect(itemsStarted(client, "fileChange")).toEqual([]);
      expect(client.notifications("turn/diff/updated")).toEqual([]);
      expect(itemsCompleted(client, "agentMessage").map((i) => i.text)).toEqual(["done"]);
    });

    it("read_file of a missing file, a directory, and past the end", async () => {
      writeFileSync(path.join(ws, "short.txt"), "only line\n");
      script([
        { name: "read_file", arguments: { path: "nope.txt" } },
        { name: "read_file", arguments: { path: "." } },
        { name: "read_file", arguments: { path: "short.txt", offset: 5 } },
      ]);
      expect(await runTurn("read")).toMatchObject({ status: "completed" });
      expect(resultsOfCalls(3)).toEqual([
        "Cannot read nope.txt: the file does not exist.",
        "Cannot read .: it is a directory; use list_dir.",
        "offset 5 is past the end of short.txt (1 lines).",
      ]);
    });

    it("a command that does not exist: exit 127, a failed item, the model is told", async () => {
      script([{ name: "shell", arguments: { command: "definitely-not-a-command-4711 --flag" } }]);
      expect(await runTurn("run")).toMatchObject({ status: "completed", stopReason: "finalAnswer" });
      const [item] = itemsCompleted(client, "commandExecution");
      expect(item).toMatchObject({ status: "failed", exitCode: 127 });
      expect(item.aggregatedOutput).toMatch(/definitely-not-a-command-4711: command not found/);
      const [result] = resultsOfCalls(1);
      expect(result).toMatch(/Exit code: 127 \(command not found\)/);
    });

    it("invalid tool arguments from the model get a result naming the problem; no item starts", async () => {
      script([
        { name: "shell", arguments: { command: 5 } },
        { name: "shell", arguments: {} },
        { name: "shell", arguments: "{not json" },
        { name: "read_file", arguments: { path: "x.txt", offset: 0 } },
        { name: "apply_patch", arguments: ["a", "list"] },
        { name: "update_plan", arguments: { plan: [{ step: "x", status: "doing" }] } },
        { name: "no_such_tool", arguments: {} },
      ]);
      expect(await runTurn("bad")).toMatchObject({ status: "completed", stopReason: "finalAnswer", error: null });
      const results = resultsOfCalls(7);
      expect(results[0]).toMatch(/^Invalid arguments for shell: command: expected string, received number/);
      expect(results[1]).toMatch(/^Invalid arguments for shell: command: missing \(required\)/);
      expect(results[2]).toMatch(/^Invalid arguments for shell: not valid JSON/);
      expect(results[3]).toMatch(/^Invalid arguments for read_file: offset: /);
      expect(results[4]).toMatch(/^Invalid arguments for apply_patch: expected a JSON object/);
      expect(results[5]).toMatch(/^Invalid arguments for update_plan: plan\[0\]\.status: /);
      expect(results[6]).toMatch(/no_such_tool/);
      expect(itemsStarted(client, "commandExecution")).toEqual([]);
      expect(client.notifications("turn/plan/updated")).toEqual([]);
      expect(itemsCompleted(client, "agentMessage").map((i) => i.text)).toEqual(["done"]);
    });
  });
});
