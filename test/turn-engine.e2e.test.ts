/**
 * Issue 13, the turn engine under faults, over a real WebSocket against the mock model server with
 * the real SDKs (no shell commands here; those are in turn-engine-tools.e2e.test.ts):
 *   - compaction against a model that enforces its window (each provider's real overflow error):
 *     a turn that overflows on its own tool output completes, the next turn too, and no request
 *     after the compaction is oversized;
 *   - the stream idle timeout: no headers, or a stream that stalls, is a retryable error and then
 *     `failed` — never a hang (small timeouts; outcomes asserted, not durations);
 *   - the plan stop-guard: exactly one extra request when steps are open, none when all are done
 *     or when it is configured off.
 */
import { afterEach, describe, expect, it } from "vitest";
import { BACKENDS } from "./support/db.js";
import { TestClient } from "./support/client.js";
import { mockTokens } from "./support/mock-model-server.js";
import { openLookupThread, PROVIDERS, type LookupThread, type TurnHarness } from "./support/turns.js";
import { afterFirstTextDelta, itemsCompleted, toolResultsIn, userTextsIn } from "./support/wire.js";
import { expectExtends } from "./support/durability.js";
import type { StartOptions } from "../src/server.js";

const backend = BACKENDS[BACKENDS.length - 1]!;

describe.each(PROVIDERS)("turn engine with %s", (provider) => {
  let h: TurnHarness | undefined;
  let client: TestClient | undefined;
  let opened: LookupThread | undefined;
  afterEach(async () => {
    await opened?.close();
    opened = client = h = undefined;
  });

  async function open(turns: NonNullable<StartOptions["turns"]> = {}) {
    opened = await openLookupThread(backend, provider, turns);
    ({ h, client } = opened);
    return { threadId: opened.threadId, run: opened.run, mock: opened.h.mock };
  }

  describe("compaction that fits the window", () => {
    const WINDOW = 6000; // tokens, as the mock counts them (4 characters each)

    it("a turn that overflows on its own tool output completes, the next one too; nothing oversized after the compaction", async () => {
      const { run, mock } = await open({ contextWindow: WINDOW });
      mock.contextLimit = WINDOW;
      const huge = "log line with details\n".repeat(4000); // ~88 KB: far past the window
      client!.onServerRequest("item/tool/call", () => ({ contentItems: [{ type: "inputText", text: huge }], success: true }));
      mock.enqueue(
        { text: "Looking.", toolCalls: [{ name: "lookup", arguments: { key: "logs" } }] },
        // (the next agent request overflows: rejected without consuming a step)
        { text: "The user asked to read the logs; lookup returned a very long log." }, // the summary
        { text: "The logs look fine." }, // the retried call
        { text: "Second answer." }, // the next turn
      );
      const first = await run("read the logs");
      expect(first).toMatchObject({ status: "completed", stopReason: "finalAnswer", error: null });
      expect(itemsCompleted(client!, "contextCompaction")).toHaveLength(1);
      expect(itemsCompleted(client!, "agentMessage").map((i) => i.text)).toEqual(["Looking.", "The logs look fine."]);

      // Exactly one request was too large: the one that triggered the compaction.
      expect(mock.overflowed.map((r) => r.seq)).toEqual([2]);
      const after = mock.requests.filter((r) => r.seq > 2);
      for (const r of after) expect(mockTokens(r.rawBody)).toBeLessThanOrEqual(WINDOW);
      // The retried request carries the summary and the user's request verbatim.
      const retried = mock.requests.find((r) => r.seq === 4)!;
      expect(retried.rawBody).toContain("lookup returned a very long log");
      expect(userTextsIn(provider, retried.body).some((t) => t.includes("read the logs"))).toBe(true);
      expect(retried.rawBody).not.toContain(huge.slice(0, 2000));

      const second = await run("anything else?");
      expect(second).toMatchObject({ status: "completed", stopReason: "finalAnswer" });
      expect(mock.overflowed).toHaveLength(1);
      const next = mock.requests.at(-1)!;
      expect(mockTokens(next.rawBody)).toBeLessThanOrEqual(WINDOW);
      // Prefix-stable from the compaction point on.
      expectExtends(provider, retried, next);
    });

    it("with the window unknown to the server, the summary request is retried smaller until the model accepts it", async () => {
      const { run, mock } = await open();
      mock.contextLimit = WINDOW;
      const huge = "x".repeat(200_000);
      client!.onServerRequest("item/tool/call", () => ({ contentItems: [{ type: "inputText", text: huge }], success: true }));
      mock.enqueue({ toolCalls: [{ name: "lookup", arguments: { key: "k" } }] }, { text: "Summary: a lookup returned a lot." }, { text: "Done." }, { text: "Still fine." });
      expect(await run("go")).toMatchObject({ status: "completed", stopReason: "finalAnswer" });
      // Oversized summary attempts were rejected by the model, never an oversized request afterwards.
      const accepted = mock.requests.filter((r) => !mock.overflowed.includes(r));
      const lastOverflow = Math.max(...mock.overflowed.map((r) => r.seq));
      expect(accepted.filter((r) => r.seq > lastOverflow)).toHaveLength(2);
      expect(await run("and now?")).toMatchObject({ status: "completed" });
      expect(Math.max(...mock.overflowed.map((r) => r.seq))).toBe(lastOverflow);
    });
  });

  describe("stream idle timeout", () => {
    it("no response headers: retried as a stream error (willRetry), then failed with a clear message", async () => {
      const { run, mock } = await open({ streamIdleTimeoutMs: 150 });
      mock.enqueue({ kind: "hang", beforeHeaders: true }, { kind: "hang", beforeHeaders: true }, { kind: "hang", beforeHeaders: true });
      const turn = await run("hello?");
      expect(turn.status).toBe("failed");
      expect(turn.error.message).toMatch(/no response from the model within 150 ms/);
      const errors = client!.notifications("error").map((f) => f.params);
      expect(errors.map((e) => e.willRetry)).toEqual([true, true, false]);
      expect(errors[0].error.additionalDetails).toMatch(/retrying in \d+ ms \(retry 1 of 2\)/);
      expect(mock.requests).toHaveLength(3);
    });

    it("a stream that stalls mid-answer: retried, and the retry's answer is the turn's; its partial text is not an answer", async () => {
      // Long enough that the retry's own stream never idles that long on a loaded machine (the first
      // attempt stalls for good, so the timeout only sets how long the test waits for it).
      const { run, mock } = await open({ streamIdleTimeoutMs: 2000 });
      const never = new Promise<void>(() => {});
      mock.enqueue({ text: ["Partial", " never finished"], gate: { afterEvents: afterFirstTextDelta(provider), wait: never } }, { text: "Complete answer." });
      const turn = await run("hello?");
      expect(turn).toMatchObject({ status: "completed", stopReason: "finalAnswer" });
      const errors = client!.notifications("error").map((f) => f.params);
      expect(errors).toEqual([expect.objectContaining({ willRetry: true })]);
      expect(errors[0].error.message).toMatch(/stalled: nothing received for 2000 ms/);
      const texts = itemsCompleted(client!, "agentMessage").map((i) => i.text);
      expect(texts.at(-1)).toBe("Complete answer.");
      expect(texts.filter((t) => t.includes("Partial"))).toEqual([]);
    });

    it("a stream that keeps stalling: failed after the retries", async () => {
      const { run, mock } = await open({ streamIdleTimeoutMs: 150 });
      const never = new Promise<void>(() => {});
      for (let i = 0; i < 3; i++) mock.enqueue({ text: ["a", "b"], gate: { afterEvents: afterFirstTextDelta(provider), wait: never } });
      const turn = await run("hello?");
      expect(turn.status).toBe("failed");
      expect(turn.error.codexErrorInfo).toEqual({ responseTooManyFailedAttempts: expect.anything() });
      expect(client!.notifications("error").map((f) => f.params.willRetry)).toEqual([true, true, false]);
      expect(itemsCompleted(client!, "agentMessage").every((i) => i.text === "")).toBe(true);
    });
  });

  describe("plan stop-guard", () => {
    const plan = (statuses: string[]) => ({ name: "update_plan", arguments: { plan: statuses.map((status, i) => ({ step: `step ${i + 1}`, status })) } });

    it("open steps at the end: exactly one reminder and one extra request", async () => {
      const { run, mock } = await open();
      mock.enqueue({ toolCalls: [plan(["completed", "in_progress", "pending"])] }, { text: "All done." }, { text: "Steps 2 and 3 are not needed." }, { text: "unused" });
      const turn = await run("do the plan");
      expect(turn).toMatchObject({ status: "completed", stopReason: "finalAnswer" });
      expect(mock.requests).toHaveLength(3);
      const reminded = mock.requests[2]!.rawBody;
      expect(reminded).toContain("plan_reminder");
      expect(reminded).toContain("step 2");
      expect(mock.requests[1]!.rawBody).not.toContain("plan_reminder");
      // The reminder is appended: the earlier request is a prefix of the reminded one.
      expectExtends(provider, mock.requests[1]!, mock.requests[2]!);
      // Once per turn: the model ended again with the plan still open, and the turn ended.
      expect(mock.pending()).toBe(1);
    });

    it("all steps completed: no extra request", async () => {
      const { run, mock } = await open();
      mock.enqueue({ toolCalls: [plan(["completed", "completed"])] }, { text: "All done." });
      expect(await run("do the plan")).toMatchObject({ status: "completed" });
      expect(mock.requests).toHaveLength(2);
    });

    it("configured off: no extra request", async () => {
      const { run, mock } = await open({ planStopGuard: false });
      mock.enqueue({ toolCalls: [plan(["pending"])] }, { text: "Stopping." });
      expect(await run("do the plan")).toMatchObject({ status: "completed" });
      expect(mock.requests).toHaveLength(2);
      expect(toolResultsIn(provider, mock.requests[1]!.body)).toHaveLength(1);
    });
  });
});
