/**
 * Issue 32, the loop's contracts round two, end to end per provider over a real WebSocket against
 * the mock model server with the real SDKs:
 *   - a refused or filtered answer fails the turn with who and why, keeps its text as a visibly
 *     incomplete item, never runs its tool calls and never reaches the next request;
 *   - quota errors are not retried;
 *   - a failed attempt leaves nothing that looks final, whatever the order of its blocks;
 *   - compaction keeps the current request (shortened, with its beginning and end), asks for the
 *     summary without tools and retries it like any model call;
 *   - the stop-guard reads the thread's newest plan, across a compaction and across turns;
 *   - the adapters for the streams that exist (Responses phase, Chat typed parts, reasoning_content).
 */
import { afterEach, describe, expect, it } from "vitest";
import { BACKENDS } from "./support/db.js";
import { TestClient } from "./support/client.js";
import { openLookupThread, PROVIDERS, type LookupThread, type TurnHarness } from "./support/turns.js";
import { itemsCompleted, messagesOf, serverRequests, toolCallsIn, userTextsIn } from "./support/wire.js";
import type { StartOptions } from "../src/server.js";

const backend = BACKENDS[BACKENDS.length - 1]!;

describe.each(PROVIDERS)("loop contracts, round two, with %s", (provider) => {
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

  it("a refused answer: the turn fails naming the provider and its reason, the text stays visibly incomplete, its tool call never runs, the next request never carries it", async () => {
    const { threadId, run, mock } = await open();
    client!.onServerRequest("item/tool/call", () => ({ contentItems: [{ type: "inputText", text: "ran" }], success: true }));
    mock.enqueue({ text: ["Sure, the first ", "step is"], toolCalls: [{ name: "lookup", arguments: { key: "secret" } }], stop: "refusal" }, { text: "Let's do something else." });
    const turn = await run("do the questionable thing");
    expect(turn).toMatchObject({ status: "failed", stopReason: "refused" });
    const reason = { anthropic: 'stop_reason "refusal"', openai: 'incomplete (reason "content_filter")', "openai-chat": 'finish_reason "content_filter"' }[provider];
    expect(turn.error.message).toContain(`${provider}: the provider refused or filtered the model's answer (${reason})`);
    expect(turn.error.message).toMatch(/tool call was not run/);
    expect(turn.error.codexErrorInfo).toBe("other");
    expect(serverRequests(client!, "item/tool/call")).toHaveLength(0);
    expect(itemsCompleted(client!, "dynamicToolCall")).toHaveLength(0);
    const [message] = itemsCompleted(client!, "agentMessage");
    expect(message.text).toBe(`Sure, the first step is\n\n[incomplete: the provider refused or filtered this answer (${reason})]`);
    // Nothing is broken: the thread is idle, not systemError; thread/read has the same item.
    expect(client!.notifications("thread/status/changed").at(-1)!.params.status).toEqual({ type: "idle" });
    const read = await client!.request("thread/read", { threadId, includeTurns: true });
    expect(read.thread.turns[0].items.find((i: any) => i.type === "agentMessage").text).toBe(message.text);

    expect(await run("then something else")).toMatchObject({ status: "completed" });
    const next = mock.requests[1]!;
    expect(next.rawBody).not.toContain("the first ");
    expect(toolCallsIn(provider, next.body)).toEqual([]);
    expect(userTextsIn(provider, next.body)).toEqual(expect.arrayContaining(["do the questionable thing", "then something else"]));
  });

  it("an exhausted quota fails the turn at once with usageLimitExceeded, no retries", async () => {
    const { run, mock } = await open();
    mock.enqueue(
      provider === "anthropic"
        ? { kind: "error", status: 402, message: "Your credit balance is too low to access the Anthropic API." }
        : { kind: "error", status: 429, type: "insufficient_quota", code: "insufficient_quota", message: "You exceeded your current quota, please check your plan and billing details." },
      { text: "not reached" },
    );
    const turn = await run("hello");
    expect(turn.status).toBe("failed");
    expect(turn.error.codexErrorInfo).toBe("usageLimitExceeded");
    expect(turn.error.message).toMatch(/not retried: check the plan and billing/);
    expect(mock.requests).toHaveLength(1);
    expect(client!.notifications("error").map((f) => f.params.willRetry)).toEqual([false]);
  });

  it("a stream cut in a thinking block that follows text: the failed attempt's text is voided, live and in thread/read; the retry's answer is the only one", async () => {
    const { threadId, run, mock } = await open();
    // Cut after the first thinking delta that follows the text block (frame indices per API).
    const cutAfter = { anthropic: 7, openai: 11, "openai-chat": 3 }[provider];
    mock.enqueue({ text: "Partial answer that must not stand", reasoning: { text: ["think", "ing"] }, reasoningAfterText: true, cutAfterEvents: cutAfter }, { text: "Complete answer." });
    const turn = await run("hello?");
    expect(turn).toMatchObject({ status: "completed", stopReason: "finalAnswer" });
    const texts = itemsCompleted(client!, "agentMessage").map((i) => i.text);
    expect(texts.filter((t) => t.includes("Partial"))).toEqual([]);
    expect(texts.at(-1)).toBe("Complete answer.");
    // The failed attempt's reasoning is voided too (closed empty), whatever it had completed.
    for (const r of itemsCompleted(client!, "reasoning")) expect(r.content.join("")).not.toContain("think");
    const read = await client!.request("thread/read", { threadId, includeTurns: true });
    const stored = read.thread.turns[0].items.filter((i: any) => i.type === "agentMessage").map((i: any) => i.text);
    expect(stored.filter((t: string) => t.includes("Partial"))).toEqual([]);
    expect(stored.at(-1)).toBe("Complete answer.");
  });

  describe("compaction that keeps the request", () => {
    const WINDOW = 6000; // tokens, as the mock counts them (4 characters each)
    // Over 20% of the window (the share kept for user messages) on its own.
    const request = `BEGIN-OF-MY-REQUEST please read the logs and ${"explain every detail of this long request ".repeat(160)} END-OF-MY-REQUEST`;

    it("the current request over a fifth of the window survives shortened (beginning, end, marker); the summary request offers no tools", async () => {
      const { run, mock } = await open({ contextWindow: WINDOW });
      mock.contextLimit = WINDOW;
      client!.onServerRequest("item/tool/call", () => ({ contentItems: [{ type: "inputText", text: "log line with details\n".repeat(4000) }], success: true }));
      mock.enqueue({ toolCalls: [{ name: "lookup", arguments: { key: "logs" } }] }, { text: "Summary: the user wants the logs explained; lookup returned them." }, { text: "The logs look fine." });
      const turn = await run(request);
      expect(turn).toMatchObject({ status: "completed", stopReason: "finalAnswer" });
      expect(mock.overflowed.map((r) => r.seq)).toEqual([2]);
      const retried = mock.requests.find((r) => r.seq === 4)!;
      const users = userTextsIn(provider, retried.body).join("\n");
      expect(users).toContain("BEGIN-OF-MY-REQUEST");
      expect(users).toContain("END-OF-MY-REQUEST");
      expect(users).toMatch(/characters omitted to fit the context window/);
      expect(retried.rawBody).toContain("the user wants the logs explained");
      const summary = mock.requests.find((r) => r.seq === 3)!;
      expect(summary.body.tools ?? []).toEqual([]);
      expect(summary.rawBody).not.toMatch(/"tool_use"|"function_call"|"tool_calls"/);
    });

    it("a summary request that fails with a 500 is retried with backoff (announced), and the turn completes", async () => {
      const { run, mock } = await open({ contextWindow: WINDOW });
      mock.contextLimit = WINDOW;
      client!.onServerRequest("item/tool/call", () => ({ contentItems: [{ type: "inputText", text: "x".repeat(100_000) }], success: true }));
      mock.enqueue({ toolCalls: [{ name: "lookup", arguments: { key: "k" } }] }, { kind: "error", status: 500 }, { text: "Summary: a lookup returned a lot." }, { text: "Done." });
      expect(await run("go")).toMatchObject({ status: "completed", stopReason: "finalAnswer" });
      const retries = client!.notifications("error").filter((f) => /retrying the summary request/.test(f.params.error.additionalDetails ?? ""));
      expect(retries).toHaveLength(1);
      expect(retries[0]!.params.willRetry).toBe(true);
      expect(itemsCompleted(client!, "agentMessage").map((i) => i.text)).toEqual(["Done."]);
    });
  });

  describe("the stop-guard reads the thread's newest plan", () => {
    const plan = (statuses: string[]) => ({ name: "update_plan", arguments: { plan: statuses.map((status, i) => ({ step: `step ${i + 1}`, status })) } });

    it("a plan written before an in-turn compaction still gets its reminder", async () => {
      const WINDOW = 6000;
      const { run, mock } = await open({ contextWindow: WINDOW });
      mock.contextLimit = WINDOW;
      client!.onServerRequest("item/tool/call", () => ({ contentItems: [{ type: "inputText", text: "y".repeat(100_000) }], success: true }));
      mock.enqueue(
        { toolCalls: [plan(["in_progress", "pending"])] },
        { toolCalls: [{ name: "lookup", arguments: { key: "k" } }] },
        { text: "Summary: a plan of two steps; a lookup returned a lot." }, // (after the overflow)
        { text: "All done." },
        { text: "Step 2 is not needed: the lookup answered it." },
      );
      expect(await run("plan and work")).toMatchObject({ status: "completed" });
      expect(itemsCompleted(client!, "contextCompaction")).toHaveLength(1);
      const last = mock.requests.at(-1)!;
      expect(last.rawBody).toContain("plan_reminder");
      expect(last.rawBody).toContain("step 2");
      expect(mock.pending()).toBe(0);
    });

    it("a plan left open by an earlier turn gets a reminder in the next one", async () => {
      const { run, mock } = await open();
      mock.enqueue({ toolCalls: [plan(["completed", "pending"])] }, { text: "Done for now." }, { text: "Step 2 stays open." });
      await run("start the plan");
      mock.enqueue({ text: "Nothing else." }, { text: "Step 2 is still open; I will leave it." });
      const before = mock.requests.length;
      expect(await run("anything else?")).toMatchObject({ status: "completed" });
      expect(mock.requests.length - before).toBe(2);
      expect(mock.requests.at(-1)!.rawBody).toContain("plan_reminder");
    });
  });
});

describe("adapters for the streams that exist", () => {
  let client: TestClient | undefined;
  let opened: LookupThread | undefined;
  afterEach(async () => {
    await opened?.close();
    opened = client = undefined;
  });
  async function open(provider: (typeof PROVIDERS)[number]) {
    opened = await openLookupThread(backend, provider);
    client = opened.client;
    return { run: opened.run, mock: opened.h.mock };
  }

  it("Responses: a commentary message and a final answer are two agentMessage items with their phase, sent back with it", async () => {
    const { run, mock } = await open("openai");
    mock.enqueue({ commentary: "Looking at it.", text: "It is fine." }, { text: "ok" });
    await run("check");
    expect(itemsCompleted(client!, "agentMessage").map((i) => [i.text, i.phase])).toEqual([
      ["Looking at it.", "commentary"],
      ["It is fine.", "final_answer"],
    ]);
    await run("and now?");
    const assistant = messagesOf("openai", mock.requests[1]!.body).filter((i: any) => i.role === "assistant");
    expect(assistant.map((i: any) => i.phase)).toEqual(["commentary", "final_answer"]);
  });

  it("Chat, Mistral magistral: typed content parts become reasoning and text, never [object Object]", async () => {
    const { run, mock } = await open("openai-chat");
    mock.enqueue({ reasoning: { text: "Two and two." }, text: "Four.", chatContentParts: true }, { text: "ok" });
    await run("2+2?");
    expect(itemsCompleted(client!, "reasoning").map((i) => i.content)).toEqual([["Two and two."]]);
    expect(itemsCompleted(client!, "agentMessage").map((i) => i.text)).toEqual(["Four."]);
    await run("sure?");
    expect(mock.requests[1]!.rawBody).not.toContain("[object Object]");
    expect(messagesOf("openai-chat", mock.requests[1]!.body).find((m: any) => m.role === "assistant")).toEqual({ role: "assistant", content: "Four." });
  });

  it("Chat, DeepSeek thinking mode: the reasoning of a tool-calling message goes back, so the server accepts the next request", async () => {
    const { run, mock } = await open("openai-chat");
    mock.chatRequiresReasoningContent = true;
    client!.onServerRequest("item/tool/call", () => ({ contentItems: [{ type: "inputText", text: "42" }], success: true }));
    mock.enqueue({ reasoning: { text: "I need the value." }, toolCalls: [{ name: "lookup", arguments: { key: "v" } }] }, { text: "It is 42." });
    expect(await run("what is v?")).toMatchObject({ status: "completed", stopReason: "finalAnswer" });
    expect(itemsCompleted(client!, "agentMessage").map((i) => i.text)).toEqual(["It is 42."]);
  });
});
