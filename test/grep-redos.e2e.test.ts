/**
 * One regex must not freeze the server: grep is read-only, never asked about under any policy, and
 * used to run the model's JavaScript regex on the event loop — `^(a+)+$` over a line of 40 `a`s
 * and a `!` stopped every connection, /healthz and turn/interrupt until the process was killed.
 * Now the search runs in a worker with a linear-time engine: while the turn searches, another
 * connection and /healthz are answered, and the turn completes ("No matches found.").
 */
import { writeFileSync } from "node:fs";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { TestClient } from "./support/client.js";
import { makeWorkspace, toolResultTexts } from "./support/approvals.js";
import { startTurnHarness, text, turnCompleted, type TurnHarness } from "./support/turns.js";

let h: TurnHarness;
let ws: { dir: string; cleanup(): void };
beforeEach(async () => {
  h = await startTurnHarness("pglite", "openai");
  ws = makeWorkspace();
});
afterEach(async () => {
  await h.close();
  ws.cleanup();
});

describe("a catastrophic regex in grep", () => {
  it("stalls nothing: other connections and /healthz are answered, the turn completes", async () => {
    writeFileSync(path.join(ws.dir, "input.txt"), `${"a".repeat(40)}!\n`.repeat(2000));
    const client = await TestClient.initialized(h.ts.url);
    const other = await TestClient.initialized(h.ts.url);
    const { thread } = await client.request("thread/start", { cwd: ws.dir, approvalPolicy: "never", sandbox: "read-only" });
    h.mock.enqueue({ toolCalls: [{ name: "grep", arguments: { pattern: "^(a+)+$" } }] }, { text: "done" });
    const { turn } = await client.request("turn/start", { threadId: thread.id, input: text("search") });
    // Meanwhile (no timing asserted: answered at all, where the old code never answered again).
    expect((await fetch(`${h.ts.httpUrl}/healthz`)).status).toBe(200);
    expect((await other.request("thread/list", {})).data.length).toBeGreaterThanOrEqual(1);
    expect((await turnCompleted(client, turn.id, 30_000)).params.turn.status).toBe("completed");
    expect(toolResultTexts(h.mock, "openai", 1).at(-1)).toBe("No matches found.");
    // The same pattern matches what it should (one pass, no backtracking).
    writeFileSync(path.join(ws.dir, "match.txt"), "aaaa\n");
    h.mock.enqueue({ toolCalls: [{ name: "grep", arguments: { pattern: "^(a+)+$", path: "match.txt" } }] }, { text: "done" });
    const second = await client.request("turn/start", { threadId: thread.id, input: text("again") });
    await turnCompleted(client, second.turn.id, 30_000);
    expect(toolResultTexts(h.mock, "openai", 3).at(-1)).toBe("match.txt:1: aaaa");
    await other.close();
    await client.close();
  });
});
