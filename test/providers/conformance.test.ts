/**
 * The behaviour every adapter must share, driven through the real SDKs against the mock server:
 * streaming and the done message, reasoning, tool calls, stop reasons, usage, every error kind,
 * abort, deterministic bytes and the append-only prefix property.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import type { Message } from "../../src/agent/messages.js";
import { PROVIDER_IDS, type ProviderId } from "../../src/providers/index.js";
import { startMockModelServer, type MockModelServer } from "../support/mock-model-server.js";
import {
  API_OF,
  baseRequest,
  collect,
  collectError,
  conversationOf,
  developer,
  providerFor,
  replayDeltas,
  TEST_KEY,
  toolResult,
  user,
} from "./helpers.js";

let mock: MockModelServer;
beforeAll(async () => {
  mock = await startMockModelServer();
});
afterAll(async () => {
  await mock.close();
});
beforeEach(() => mock.reset());

describe.each(PROVIDER_IDS)("%s adapter", (id: ProviderId) => {
  const api = API_OF[id];
  const provider = () => providerFor(id, mock);
  const req = (extra = {}) => baseRequest([user("hi")], extra);

  it("streams text deltas and ends with one done message", async () => {
    mock.enqueue({ text: ["Hel", "lo", " world"] });
    const { events, done } = await collect(provider(), req());
    expect(events.filter((e) => e.type === "textDelta").map((e) => (e.type === "textDelta" ? e.delta : ""))).toEqual(["Hel", "lo", " world"]);
    expect(done.message.role).toBe("assistant");
    expect(done.message.content).toEqual([{ type: "text", text: "Hello world" }]);
    expect(done.stopReason).toBe("endTurn");
    expect(done.message.providerMessageId).toBeTruthy();
    expect(replayDeltas(events).get(0)?.text).toBe("Hello world");
    expect(mock.requests).toHaveLength(1);
    expect(mock.requests[0].api).toBe(api);
  });

  it("keeps reasoning (with its provider-specific replay data)", async () => {
    mock.enqueue({
      reasoning: { summary: ["Plan: look", "then act"], text: ["think ", "hard"], signature: "sig_abc", encryptedContent: "enc_xyz" },
      text: "answer",
    });
    const { events, done } = await collect(provider(), req({ reasoningEffort: "medium" }));
    const [r, t] = done.message.content;
    expect(t).toEqual({ type: "text", text: "answer" });
    expect(r.type).toBe("reasoning");
    if (r.type !== "reasoning") return;
    expect(r.text).toBe("think hard");
    const replay = replayDeltas(events).get(0);
    expect(replay?.text).toBe("think hard");
    if (id === "anthropic") expect(r.signature).toBe("sig_abc");
    if (id === "openai") {
      expect(r.summary).toEqual(["Plan: look", "then act"]);
      expect(replay?.summary).toEqual(["Plan: look", "then act"]);
      expect(r.encryptedContent).toBe("enc_xyz");
      expect(r.providerId).toMatch(/^rs_/);
    }
  });

  it("assembles tool calls with their exact arguments", async () => {
    mock.enqueue({
      text: "Let me look.",
      toolCalls: [
        { id: "call_one", name: "read_file", arguments: { path: "src/é 日本.ts", nested: { a: [1, 2] } } },
        { id: "call_two", name: "shell", arguments: '{"cmd": "ls -la",  "broken": ' },
      ],
    });
    const { events, done } = await collect(provider(), req());
    const calls = done.message.content.filter((b) => b.type === "toolCall");
    expect(calls.map((c) => (c.type === "toolCall" ? [c.id, c.name, c.arguments] : null))).toEqual([
      ["call_one", "read_file", JSON.stringify({ path: "src/é 日本.ts", nested: { a: [1, 2] } })],
      ["call_two", "shell", '{"cmd": "ls -la",  "broken": '],
    ]);
    expect(done.stopReason).toBe("toolUse");
    // Deltas routed by index rebuild the same arguments; starts name the same ids.
    const replay = replayDeltas(events);
    done.message.content.forEach((b, i) => {
      if (b.type === "toolCall") expect(replay.get(i)?.args).toBe(b.arguments);
    });
    const starts = events.filter((e) => e.type === "toolCallStart");
    expect(starts.map((s) => (s.type === "toolCallStart" ? [s.index, s.id, s.name] : null))).toEqual(
      calls.map((c) => (c.type === "toolCall" ? [done.message.content.indexOf(c), c.id, c.name] : null)),
    );
  });

  it("still yields tool calls that arrive after the stop reason", async () => {
    mock.enqueue({ text: "ok", stopReasonBeforeToolCall: true, toolCalls: [{ id: "call_late", name: "shell", arguments: { cmd: "pwd" } }] });
    const { done } = await collect(provider(), req());
    const calls = done.message.content.filter((b) => b.type === "toolCall");
    expect(calls).toHaveLength(1);
    expect(calls[0]).toMatchObject({ type: "toolCall", id: "call_late", name: "shell", arguments: '{"cmd":"pwd"}' });
    expect(done.message.content.filter((b) => b.type === "text")).toEqual([{ type: "text", text: "ok" }]);
  });

  it("reports a truncated response as maxTokens", async () => {
    mock.enqueue({ text: "half an ans", stop: "maxTokens" });
    const { done } = await collect(provider(), req());
    expect(done.stopReason).toBe("maxTokens");
    expect(done.message.content).toEqual([{ type: "text", text: "half an ans" }]);
  });

  it("normalises usage: inputTokens includes cached tokens", async () => {
    mock.enqueue({ text: "x", usage: { input: 1000, output: 40, cached: 600, cacheWrite: id === "anthropic" ? 300 : 0, reasoning: 7 } });
    const { done } = await collect(provider(), req());
    expect(done.usage.inputTokens).toBe(1000);
    expect(done.usage.cachedInputTokens).toBe(600);
    expect(done.usage.outputTokens).toBe(40);
    expect(done.usage.totalTokens).toBe(1040);
    if (id === "anthropic") expect(done.usage.cacheWriteInputTokens).toBe(300);
    else expect(done.usage.reasoningOutputTokens).toBe(7);
  });

  describe("errors", () => {
    it("429 → rateLimited with retry-after-ms", async () => {
      mock.enqueue({ kind: "error", status: 429, retryAfterMs: 1500, retryAfterSeconds: 9 });
      const { error } = await collectError(provider(), req());
      expect(error.kind).toBe("rateLimited");
      expect(error.status).toBe(429);
      expect(error.retryAfterMs).toBe(1500);
      expect(error.retryable).toBe(true);
    });

    it("429 → retry-after seconds when there is no retry-after-ms", async () => {
      mock.enqueue({ kind: "error", status: 429, retryAfterSeconds: 3 });
      const { error } = await collectError(provider(), req());
      expect(error.retryAfterMs).toBe(3000);
    });

    it("500 → server, 503/529 → overloaded (retryable)", async () => {
      mock.enqueue({ kind: "error", status: 500 }, { kind: "error", status: 503 }, { kind: "error", status: 529 });
      for (const kind of ["server", "overloaded", "overloaded"]) {
        const { error } = await collectError(provider(), req());
        expect(error.kind).toBe(kind);
        expect(error.retryable).toBe(true);
      }
    });

    it("401/403 → auth, 404 → notFound, 400 → badRequest (none retryable), no key in messages", async () => {
      mock.enqueue(
        { kind: "error", status: 401, message: `Incorrect API key provided: ${TEST_KEY}` },
        { kind: "error", status: 403 },
        { kind: "error", status: 404 },
        { kind: "error", status: 400, message: "messages: field required" },
      );
      for (const kind of ["auth", "auth", "notFound", "badRequest"]) {
        const { error } = await collectError(provider(), req());
        expect(error.kind).toBe(kind);
        expect(error.retryable).toBe(false);
        expect(error.message).not.toContain(TEST_KEY);
        expect(error.message.startsWith(`${id}: `)).toBe(true);
      }
    });

    it("400 prompt too long → contextOverflow", async () => {
      mock.enqueue({ kind: "error", status: 400, contextOverflow: true });
      const { error } = await collectError(provider(), req());
      expect(error.kind).toBe("contextOverflow");
      expect(error.retryable).toBe(false);
    });

    it("a cut stream → streamIncomplete (retryable)", async () => {
      mock.enqueue({ text: ["a", "b", "c", "d"], cutAfterEvents: 4 });
      const { error } = await collectError(provider(), req());
      expect(error.kind).toBe("streamIncomplete");
      expect(error.retryable).toBe(true);
    });

    it("a stream cut just before its terminal event → streamIncomplete", async () => {
      // Anthropic: before message_stop; Responses: before response.completed; Chat: after the
      // finish_reason and usage chunks but before [DONE].
      const cutAt: Record<ProviderId, number> = { anthropic: 6, openai: 8, "openai-chat": 4 };
      mock.enqueue({ text: "abc", cutAfterEvents: cutAt[id] });
      const { error, events } = await collectError(provider(), req());
      expect(error.kind).toBe("streamIncomplete");
      expect(events.map((e) => e.type)).toEqual(["textDelta"]);
    });

    it("a malformed chunk → streamIncomplete", async () => {
      const quiet = vi.spyOn(console, "error").mockImplementation(() => {});
      try {
        mock.enqueue({ text: ["a", "b"], malformedAfterEvents: 3 });
        const { error } = await collectError(provider(), req());
        expect(error.kind).toBe("streamIncomplete");
        expect(error.retryable).toBe(true);
      } finally {
        quiet.mockRestore();
      }
    });

    it("an in-stream error event is mapped (overloaded / server)", async () => {
      mock.enqueue({ text: ["a", "b"], midStreamError: { afterEvents: 3 } });
      const { error } = await collectError(provider(), req());
      expect(error.kind).toBe(id === "anthropic" ? "overloaded" : "server");
      expect(error.retryable).toBe(true);
      mock.enqueue({ text: ["a", "b"], midStreamError: { afterEvents: 3, type: id === "anthropic" ? "api_error" : "server_error" } });
      expect((await collectError(provider(), req())).error.kind).toBe("server");
    });

    it("connection refused → network, not retried (nothing listens there; test/providers/connection-errors.test.ts)", async () => {
      const dead = await startMockModelServer();
      const base = id === "anthropic" ? dead.anthropicBaseUrl : dead.openaiBaseUrl;
      await dead.close();
      const { createProvider } = await import("../../src/providers/index.js");
      const { error } = await collectError(createProvider(id, { apiKey: TEST_KEY, baseURL: base }), req());
      expect(error.kind).toBe("network");
      expect(error.retryable).toBe(false);
      expect(error.message).toContain(`cannot reach ${base}: connection refused`);
    });

    it("aborting a hung stream → aborted, not retryable", async () => {
      mock.enqueue({ kind: "hang" });
      const ac = new AbortController();
      const pending = collectError(provider(), req(), ac.signal);
      await mock.waitForRequests(1);
      await new Promise((r) => setTimeout(r, 50));
      ac.abort();
      const { error } = await pending;
      expect(error.kind).toBe("aborted");
      expect(error.retryable).toBe(false);
    });

    it("aborting mid-stream (after some deltas) → aborted", async () => {
      let open!: () => void;
      const wait = new Promise<void>((r) => (open = r));
      mock.enqueue({ text: ["one", "two"], gate: { afterEvents: id === "openai-chat" ? 2 : 5, wait } });
      const ac = new AbortController();
      const events: string[] = [];
      let caught: unknown;
      try {
        for await (const ev of provider().stream(req(), ac.signal)) {
          events.push(ev.type);
          if (ev.type === "textDelta") ac.abort();
        }
      } catch (err) {
        caught = err;
      } finally {
        open();
      }
      expect(events).toContain("textDelta");
      expect(events).not.toContain("done");
      expect(caught).toMatchObject({ kind: "aborted" });
    });

    it("an already-aborted signal fails without a request", async () => {
      const ac = new AbortController();
      ac.abort();
      const { error } = await collectError(provider(), req(), ac.signal);
      expect(error.kind).toBe("aborted");
      expect(mock.requests).toHaveLength(0);
    });
  });

  describe("request bytes", () => {
    const history: Message[] = [
      developer("<environment>cwd=/repo</environment>"),
      user("Fix the bug."),
      {
        role: "assistant",
        content: [
          { type: "reasoning", text: "look first", summary: ["look"], signature: "sig_1", providerId: "rs_1", encryptedContent: "enc_1" },
          { type: "text", text: "Reading." },
          { type: "toolCall", id: "call_a", name: "read_file", arguments: '{"path":"a.ts"}' },
        ],
      },
      toolResult("call_a", "read_file", "export const a = 1;"),
    ];

    it("are byte-identical for the same request", async () => {
      const r = baseRequest(history, { cacheKey: "thread-1", reasoningEffort: "high", maxOutputTokens: 4000 });
      await collect(provider(), r);
      await collect(provider(), structuredClone(r));
      expect(mock.requests).toHaveLength(2);
      expect(mock.requests[1].rawBody).toBe(mock.requests[0].rawBody);
    });

    it("keep the earlier request's history as an exact prefix across a multi-turn conversation", async () => {
      // Drive a small agent conversation, appending what the model really returned.
      const p = provider();
      const msgs: Message[] = [developer("<environment>cwd=/repo</environment>"), user("Fix the bug.")];
      const call = async () => (await collect(p, baseRequest([...msgs], { cacheKey: "thread-1" }))).done.message;
      mock.enqueue(
        { reasoning: { text: "plan", summary: ["plan"], signature: "sig_1", encryptedContent: "enc_1" }, text: "Looking.", toolCalls: [{ id: "c1", name: "read_file", arguments: { path: "a.ts" } }] },
        { toolCalls: [{ id: "c2", name: "shell", arguments: { cmd: "npm test" } }, { id: "c3", name: "read_file", arguments: { path: "b.ts" } }] },
        { text: "Fixed." },
        { text: "Done again." },
      );
      msgs.push(await call());
      msgs.push(toolResult("c1", "read_file", "const a = 1;"));
      msgs.push(await call());
      msgs.push(toolResult("c2", "shell", "ok"), toolResult("c3", "read_file", "const b = 2;", true));
      msgs.push(await call());
      // Next turn after a settings change: a developer message, then the user.
      msgs.push(developer("<settings>approval=never</settings>"), user("Now run it again."));
      msgs.push(await call());

      expect(mock.requests).toHaveLength(4);
      for (let i = 1; i < mock.requests.length; i++) {
        const prev = conversationOf(api, mock.requests[i - 1]);
        const next = conversationOf(api, mock.requests[i]);
        expect(next.prefix).toEqual(prev.prefix);
        expect(next.history.length).toBeGreaterThan(prev.history.length);
        expect(next.history.slice(0, prev.history.length)).toEqual(prev.history);
        // Byte-level too: the JSON of the earlier history is a prefix of the later one.
        const a = JSON.stringify(prev.history);
        expect(JSON.stringify(next.history).startsWith(a.slice(0, -1))).toBe(true);
      }
    });
  });
});
