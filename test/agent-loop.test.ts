/**
 * The agent loop's contracts (DESIGN.md §3), one test (or a small group) per contract, driven with
 * the REAL provider adapters against the mock model server. Provider-dependent contracts (stream
 * parsing, stop reasons, error mapping) run for all three providers; pure orchestration contracts
 * use one provider or a scripted in-test provider. No wall-clock assertions: ordering is proven
 * with a logical clock, Retry-After with the `retryInMs` the loop reports.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  INTERRUPTED_RESULT,
  MAX_STOP_CONTINUATIONS,
  runAgentLoop,
  STEERED_RESULT,
  TRUNCATED_RESULT,
  type LoopConfig,
  type LoopEvent,
  type LoopHooks,
  type LoopResult,
} from "../src/agent/loop.js";
import { emptyUsage, type AssistantMessage, type DeveloperMessage, type Message, type ToolCallBlock, type ToolResultMessage, type UserMessage } from "../src/agent/messages.js";
import { NOT_EXECUTED } from "../src/agent/repair.js";
import { SteeringQueue } from "../src/agent/steering.js";
import type { RetryPolicy } from "../src/agent/retry.js";
import { textOutcome, ToolHostError, type LoopTool, type ToolOutcome } from "../src/agent/tools.js";
import { createProvider, PROVIDER_IDS, type ProviderId } from "../src/providers/index.js";
import { ProviderError, type ModelProvider, type ModelRequest, type ProviderStopReason, type ProviderStreamEvent } from "../src/providers/types.js";
import { startMockModelServer, type MockModelServer, type MockStep, type RecordedRequest } from "./support/mock-model-server.js";

// ---------------------------------------------------------------------------------------------
// Fixtures

let mock: MockModelServer;
beforeAll(async () => {
  mock = await startMockModelServer();
});
afterAll(async () => {
  await mock.close();
});
beforeEach(() => mock.reset());

const RETRY: RetryPolicy = { maxRetries: 3, baseDelayMs: 5, maxDelayMs: 40, maxRetryAfterMs: 120_000 };

function providerFor(id: ProviderId): ModelProvider {
  return createProvider(id, { baseURL: id === "anthropic" ? mock.anthropicBaseUrl : mock.openaiBaseUrl, apiKey: "test" });
}

const user = (text: string): UserMessage => ({ role: "user", content: [{ type: "text", text }] });
const textOf = (r: ToolResultMessage) => r.content.map((b) => (b.type === "text" ? b.text : "")).join("");

/** A logical clock shared by the tools of one test: start/end order without timing. */
class ToolLab {
  private clock = 0;
  running = 0;
  maxRunning = 0;
  /** Every start and end, in the order they happened, with how many tools ran at that point. */
  readonly log: Array<{ id: string; name: string; phase: "start" | "end"; t: number; running: number }> = [];
  readonly executed: ToolCallBlock[] = [];

  tool(name: string, opts: { readOnly?: boolean; run?: (call: ToolCallBlock, signal: AbortSignal) => Promise<ToolOutcome | void> | ToolOutcome | void } = {}): LoopTool {
    return {
      spec: { name, description: `test tool ${name}`, inputSchema: { type: "object", properties: {} } },
      readOnly: opts.readOnly ?? false,
      execute: async (call, signal) => {
        this.executed.push(call);
        this.running++;
        this.maxRunning = Math.max(this.maxRunning, this.running);
        this.log.push({ id: call.id, name, phase: "start", t: this.clock++, running: this.running });
        try {
          const out = await opts.run?.(call, signal);
          return out ?? textOutcome(`${name} ok ${call.id}`);
        } finally {
          this.running--;
          this.log.push({ id: call.id, name, phase: "end", t: this.clock++, running: this.running });
        }
      },
    };
  }

  /** Start/end order as "start:id" / "end:id". */
  order(): string[] {
    return this.log.map((e) => `${e.phase}:${e.id}`);
  }
}

/** Yields to the event loop so concurrently started tools really overlap. */
const tick = () => new Promise<void>((r) => setTimeout(r, 1));

interface Harness {
  events: LoopEvent[];
  /** The production queue (the runtime's turn/steer input goes through the same class). */
  steerQueue: SteeringQueue;
  hooks: LoopHooks;
  compactCalls: Array<readonly Message[]>;
}

function makeHooks(
  opts: {
    onEvent?: (e: LoopEvent) => void | Promise<void>;
    compact?: LoopHooks["compact"];
  } = {},
): Harness {
  const h: Harness = {
    events: [],
    steerQueue: new SteeringQueue(),
    compactCalls: [],
    hooks: {
      emit: async (e) => {
        h.events.push(e);
        await opts.onEvent?.(e);
      },
      takeSteering: () => h.steerQueue.take(),
      hasSteering: () => h.steerQueue.length > 0,
    },
  };
  if (opts.compact) {
    const compact = opts.compact;
    h.hooks.compact = (history, signal) => {
      h.compactCalls.push(structuredClone(history));
      return compact(history, signal);
    };
  }
  return h;
}

function config(provider: ModelProvider, tools: LoopTool[] = [], over: Partial<LoopConfig> = {}): LoopConfig {
  return {
    provider,
    request: { model: "mock-model", system: "You are a test agent.", tools: tools.map((t) => t.spec) },
    history: [user("hi")],
    tools: new Map(tools.map((t) => [t.spec.name, t])),
    maxModelCalls: 10,
    retry: RETRY,
    maxParallelTools: 4,
    signal: new AbortController().signal,
    ...over,
  };
}

const ofType = <T extends LoopEvent["type"]>(events: LoopEvent[], type: T) => events.filter((e): e is Extract<LoopEvent, { type: T }> => e.type === type);

/**
 * A recorded request's conversation, provider-neutral, as strings:
 * "user:<text>", "assistant:<text>", "call:<id>:<name>", "result:<id>:<text>".
 */
function conversation(req: RecordedRequest): string[] {
  const out: string[] = [];
  const joined = (c: unknown): string =>
    typeof c === "string"
      ? c
      : Array.isArray(c)
        ? c.map((b: any) => (typeof b?.text === "string" ? b.text : "")).join("")
        : "";
  const body = req.body;
  if (req.api === "anthropic") {
    for (const m of body.messages) {
      const blocks = typeof m.content === "string" ? [{ type: "text", text: m.content }] : m.content;
      for (const b of blocks) {
        if (b.type === "text") out.push(`${m.role}:${b.text}`);
        else if (b.type === "tool_use") out.push(`call:${b.id}:${b.name}`);
        else if (b.type === "tool_result") out.push(`result:${b.tool_use_id}:${joined(b.content)}`);
      }
    }
  } else if (req.api === "openai-responses") {
    for (const item of body.input) {
      if (item.type === "message") out.push(`${item.role}:${joined(item.content)}`);
      else if (item.type === "function_call") out.push(`call:${item.call_id}:${item.name}`);
      else if (item.type === "function_call_output") out.push(`result:${item.call_id}:${joined(item.output)}`);
    }
  } else {
    for (const m of body.messages) {
      if (m.role === "system") continue;
      if (m.role === "tool") out.push(`result:${m.tool_call_id}:${joined(m.content)}`);
      else {
        const text = joined(m.content);
        if (m.role !== "assistant" || text !== "") out.push(`${m.role}:${text}`);
        for (const c of m.tool_calls ?? []) out.push(`call:${c.id}:${c.function.name}`);
      }
    }
  }
  return out;
}

/** A provider scripted in-test: each call runs the next step (for orchestration-only contracts). */
type ScriptStep = (request: ModelRequest, signal: AbortSignal) => AsyncIterable<ProviderStreamEvent>;
function scriptedProvider(steps: ScriptStep[]): ModelProvider & { requests: ModelRequest[] } {
  const requests: ModelRequest[] = [];
  return {
    id: "scripted",
    requests,
    stream(request, signal) {
      requests.push(structuredClone(request));
      const step = steps.shift();
      if (!step) throw new Error("scriptedProvider: no step left");
      return step(request, signal);
    },
  };
}
function reply(message: AssistantMessage, stopReason: ProviderStopReason): ScriptStep {
  return async function* () {
    yield { type: "done", message, stopReason, usage: emptyUsage() };
  };
}

/** Index, per API, of the frame right after the first text delta (to gate a stream mid-text). */
const AFTER_FIRST_TEXT: Record<ProviderId, number> = { anthropic: 4, openai: 5, "openai-chat": 2 };

// ---------------------------------------------------------------------------------------------
// 1. Content decides whether to continue

describe.each(PROVIDER_IDS)("§3.1 content decides, not the stop reason [%s]", (id) => {
  it("runs a tool call whose block arrives after the stop reason, then calls the model again", async () => {
    const lab = new ToolLab();
    const tool = lab.tool("shell");
    mock.enqueue({ text: "let me check", toolCalls: [{ id: "call_late", name: "shell", arguments: { cmd: "ls" } }], stopReasonBeforeToolCall: true }, { text: "all done" });
    const h = makeHooks();
    const res = await runAgentLoop(config(providerFor(id), [tool]), h.hooks);

    expect(res.stopReason).toBe("finalAnswer");
    expect(lab.executed.map((c) => c.id)).toEqual(["call_late"]);
    expect(JSON.parse(lab.executed[0]!.arguments)).toEqual({ cmd: "ls" });
    expect(mock.requests).toHaveLength(2);
    expect(res.modelCalls).toBe(2);
    const first = ofType(h.events, "assistantMessage")[0]!;
    // Anthropic really reports end_turn here: proof the loop did not look at it.
    if (id === "anthropic") expect(first.stopReason).toBe("endTurn");
    expect(conversation(mock.requests[1]!)).toEqual(["user:hi", "assistant:let me check", "call:call_late:shell", "result:call_late:shell ok call_late"]);
  });
});

describe("§3.1 content decides (scripted stop reasons)", () => {
  it("a text-only message ends the turn as finalAnswer even when the stop reason says toolUse", async () => {
    const provider = scriptedProvider([reply({ role: "assistant", content: [{ type: "text", text: "the answer" }] }, "toolUse")]);
    const h = makeHooks();
    const res = await runAgentLoop(config(provider, [new ToolLab().tool("shell")]), h.hooks);
    expect(res.stopReason).toBe("finalAnswer");
    expect(res.modelCalls).toBe(1);
    expect(provider.requests).toHaveLength(1);
    expect(ofType(h.events, "toolResult")).toHaveLength(0);
  });

  it("a message with a tool call continues even when the stop reason says endTurn", async () => {
    const lab = new ToolLab();
    const provider = scriptedProvider([
      reply({ role: "assistant", content: [{ type: "toolCall", id: "c1", name: "shell", arguments: "{}" }] }, "endTurn"),
      reply({ role: "assistant", content: [{ type: "text", text: "done" }] }, "toolUse"),
    ]);
    const res = await runAgentLoop(config(provider, [lab.tool("shell")]), makeHooks().hooks);
    expect(res.stopReason).toBe("finalAnswer");
    expect(lab.executed).toHaveLength(1);
    expect(provider.requests).toHaveLength(2);
  });
});

// ---------------------------------------------------------------------------------------------
// 2. Results after their assistant message, in call order, paired by id

describe.each(PROVIDER_IDS)("§3.2 results follow their assistant message in call order [%s]", (id) => {
  it("orders results by call, not by completion, each paired to its id", async () => {
    const lab = new ToolLab();
    let releaseSlow!: () => void;
    const slowMayFinish = new Promise<void>((r) => (releaseSlow = r));
    const completed: string[] = [];
    const read = lab.tool("read", {
      readOnly: true,
      run: async (call) => {
        const { n } = JSON.parse(call.arguments) as { n: number };
        if (n === 1) await slowMayFinish; // the first call is the slowest: it waits for the last one
        else await tick();
        if (n === 3) releaseSlow();
        completed.push(call.id);
        return textOutcome(`read #${n}`);
      },
    });
    mock.enqueue(
      {
        text: "reading",
        toolCalls: [
          { id: "call_1", name: "read", arguments: { n: 1 } },
          { id: "call_2", name: "read", arguments: { n: 2 } },
          { id: "call_3", name: "read", arguments: { n: 3 } },
        ],
      },
      { text: "done" },
    );
    const h = makeHooks();
    const res = await runAgentLoop(config(providerFor(id), [read]), h.hooks);

    expect(res.stopReason).toBe("finalAnswer");
    expect(completed[completed.length - 1]).toBe("call_1"); // it really finished last
    expect(completed).not.toEqual(["call_1", "call_2", "call_3"]);
    const results = ofType(h.events, "toolResult");
    expect(results.map((e) => [e.call.id, e.result.toolCallId, textOf(e.result)])).toEqual([
      ["call_1", "call_1", "read #1"],
      ["call_2", "call_2", "read #2"],
      ["call_3", "call_3", "read #3"],
    ]);
    // The assistant message is emitted before any of its results.
    const types = h.events.map((e) => e.type).filter((t) => t === "assistantMessage" || t === "toolResult");
    expect(types).toEqual(["assistantMessage", "toolResult", "toolResult", "toolResult", "assistantMessage"]);
    expect(conversation(mock.requests[1]!)).toEqual([
      "user:hi",
      "assistant:reading",
      "call:call_1:read",
      "call:call_2:read",
      "call:call_3:read",
      "result:call_1:read #1",
      "result:call_2:read #2",
      "result:call_3:read #3",
    ]);
  });
});

// ---------------------------------------------------------------------------------------------
// 3. Repair before each model call

describe.each(PROVIDER_IDS)("§3.3 repair before each model call [%s]", (id) => {
  it("sends a synthetic 'not executed' result for a dangling call and drops an orphan result", async () => {
    const history: Message[] = [
      user("first"),
      { role: "toolResult", toolCallId: "call_orphan", toolName: "shell", content: [{ type: "text", text: "stale output" }], isError: false },
      { role: "assistant", content: [{ type: "text", text: "working" }, { type: "toolCall", id: "call_lost", name: "shell", arguments: '{"cmd":"make"}' }] },
      user("continue"),
    ];
    mock.enqueue({ text: "ok" });
    const res = await runAgentLoop(config(providerFor(id), [new ToolLab().tool("shell")], { history }), makeHooks().hooks);

    expect(res.stopReason).toBe("finalAnswer");
    expect(mock.requests).toHaveLength(1);
    const conv = conversation(mock.requests[0]!);
    // Anthropic merges the user side into one message with tool_result blocks first; the order
    // of the entries is the same for all three formats.
    expect(conv).toEqual(["user:first", "assistant:working", "call:call_lost:shell", `result:call_lost:${NOT_EXECUTED}`, "user:continue"]);
    expect(mock.requests[0]!.rawBody).not.toContain("call_orphan");
    expect(mock.requests[0]!.rawBody).not.toContain("stale output");
    if (id === "anthropic") {
      const results = mock.requests[0]!.body.messages.flatMap((m: any) => m.content).filter((b: any) => b.type === "tool_result");
      expect(results).toHaveLength(1);
      expect(results[0].is_error).toBe(true);
    }
    // The caller's history is not mutated by the repair.
    expect(history).toHaveLength(4);
  });
});

// ---------------------------------------------------------------------------------------------
// 4. Stop kinds

describe.each(PROVIDER_IDS)("§3.4 stop kinds [%s]", (id) => {
  it("finalAnswer: the model answers without tool calls", async () => {
    mock.enqueue({ text: ["The ", "answer"] });
    const h = makeHooks();
    const res = await runAgentLoop(config(providerFor(id)), h.hooks);
    expect(res).toMatchObject({ stopReason: "finalAnswer", error: null, note: null, modelCalls: 1 });
    expect(res.usage.outputTokens).toBe(5);
    expect(mock.requests).toHaveLength(1);
    const msg = ofType(h.events, "assistantMessage")[0]!;
    expect(msg.message.content.filter((b) => b.type === "text")).toEqual([{ type: "text", text: "The answer" }]);
  });

  it("maxTokens: tool calls from a truncated message are not executed; a truncation result is recorded", async () => {
    const lab = new ToolLab();
    mock.enqueue({ text: "I will run", toolCalls: [{ id: "call_cut", name: "shell", arguments: { cmd: "rm -rf build" } }], stop: "maxTokens" });
    const h = makeHooks();
    const res = await runAgentLoop(config(providerFor(id), [lab.tool("shell")]), h.hooks);

    expect(res.stopReason).toBe("maxTokens");
    expect(res.note).toMatch(/token limit/);
    expect(res.error).toBeNull();
    expect(lab.executed).toHaveLength(0);
    expect(mock.requests).toHaveLength(1);
    const msg = ofType(h.events, "assistantMessage")[0]!;
    expect(msg.stopReason).toBe("maxTokens");
    const calls = msg.message.content.filter((b) => b.type === "toolCall");
    expect(calls.length).toBeGreaterThan(0);
    const results = ofType(h.events, "toolResult");
    expect(results.map((r) => r.result.toolCallId)).toEqual(calls.map((c) => (c as ToolCallBlock).id));
    for (const r of results) {
      expect(textOf(r.result)).toBe(TRUNCATED_RESULT);
      expect(r.result.isError).toBe(true);
    }
  });

  it("maxTokens: a truncated text answer is reported as truncated, not as a final answer", async () => {
    mock.enqueue({ text: "half an ans", stop: "maxTokens" });
    const res = await runAgentLoop(config(providerFor(id)), makeHooks().hooks);
    expect(res.stopReason).toBe("maxTokens");
    expect(res.note).toBeTruthy();
  });

  it("maxTurns: stops after maxModelCalls model calls", async () => {
    const lab = new ToolLab();
    for (let i = 0; i < 4; i++) mock.enqueue({ toolCalls: [{ id: `call_${i}`, name: "shell", arguments: {} }] });
    const res = await runAgentLoop(config(providerFor(id), [lab.tool("shell")], { maxModelCalls: 2 }), makeHooks().hooks);
    expect(res.stopReason).toBe("maxTurns");
    expect(res.note).toMatch(/2 model calls/);
    expect(res.modelCalls).toBe(2);
    expect(mock.requests).toHaveLength(2);
  });

  it("interrupted: aborting while the model hangs stops the turn, with no further request", async () => {
    mock.enqueue({ kind: "hang" });
    const ac = new AbortController();
    void mock.waitForRequests(1).then(() => ac.abort()); // the request is at the mock, which never answers it
    const h = makeHooks();
    const res = await runAgentLoop(config(providerFor(id), [], { signal: ac.signal }), h.hooks);
    expect(res.stopReason).toBe("interrupted");
    expect(res.error).toBeNull();
    expect(mock.requests).toHaveLength(1);
    const failed = ofType(h.events, "modelCallFailed");
    expect(failed).toHaveLength(1);
    expect(failed[0]!.error.kind).toBe("aborted");
    expect(failed[0]!.willRetry).toBe(false);
  });

  it("interrupted: aborting mid-stream (gated after the first text delta)", async () => {
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    mock.enqueue({ text: ["first ", "second"], gate: { afterEvents: AFTER_FIRST_TEXT[id], wait: gate } });
    const ac = new AbortController();
    const h = makeHooks({
      onEvent: (e) => {
        if (e.type === "stream" && e.event.type === "textDelta") ac.abort();
      },
    });
    try {
      const res = await runAgentLoop(config(providerFor(id), [], { signal: ac.signal }), h.hooks);
      expect(res.stopReason).toBe("interrupted");
      expect(mock.requests).toHaveLength(1);
      expect(ofType(h.events, "assistantMessage")).toHaveLength(0);
    } finally {
      open();
    }
  });

  it("error: a 401 ends the turn with the provider error after exactly one request", async () => {
    mock.enqueue({ kind: "error", status: 401 });
    const res = await runAgentLoop(config(providerFor(id)), makeHooks().hooks);
    expect(res.stopReason).toBe("error");
    expect(res.error).toBeInstanceOf(ProviderError);
    expect((res.error as ProviderError).kind).toBe("auth");
    expect(mock.requests).toHaveLength(1);
  });
});

describe("§3.4 stop kinds (orchestration)", () => {
  it("interrupted before the first call: no request at all", async () => {
    const ac = new AbortController();
    ac.abort();
    const res = await runAgentLoop(config(providerFor("anthropic"), [], { signal: ac.signal }), makeHooks().hooks);
    expect(res.stopReason).toBe("interrupted");
    expect(mock.requests).toHaveLength(0);
  });

  it("interrupted while a tool runs: the running tool is cancelled, later calls are not executed, no further request", async () => {
    const lab = new ToolLab();
    const ac = new AbortController();
    const slow = lab.tool("slow", {
      run: (_call, signal) => {
        const cancelled = new Promise<ToolOutcome>((_resolve, reject) => {
          signal.addEventListener("abort", () => reject(new Error("cancelled by signal")), { once: true });
        });
        ac.abort(); // the user interrupts while this tool runs
        return cancelled;
      },
    });
    const other = lab.tool("other");
    mock.enqueue({
      toolCalls: [
        { id: "c_slow", name: "slow", arguments: {} },
        { id: "c_other", name: "other", arguments: {} },
      ],
    });
    const h = makeHooks();
    const res = await runAgentLoop(config(providerFor("anthropic"), [slow, other], { signal: ac.signal }), h.hooks);
    expect(res.stopReason).toBe("interrupted");
    expect(lab.executed.map((c) => c.id)).toEqual(["c_slow"]);
    expect(mock.requests).toHaveLength(1);
    const results = ofType(h.events, "toolResult");
    expect(results.map((r) => r.result.toolCallId)).toEqual(["c_slow", "c_other"]);
    expect(results[0]!.result.isError).toBe(true);
    expect(textOf(results[1]!.result)).toBe(INTERRUPTED_RESULT);
  });

  it("interrupted while the compaction hook runs: the turn is interrupted, not an error", async () => {
    mock.enqueue({ kind: "error", status: 400, contextOverflow: true });
    const ac = new AbortController();
    const h = makeHooks({
      compact: (_history, signal) => {
        const cancelled = new Promise<null>((_resolve, reject) => {
          signal.addEventListener("abort", () => reject(signal.reason), { once: true });
        });
        ac.abort(); // the user interrupts while the compaction runs
        return cancelled;
      },
    });
    const res = await runAgentLoop(config(providerFor("anthropic"), [], { signal: ac.signal }), h.hooks);
    expect(res.stopReason).toBe("interrupted");
    expect(mock.requests).toHaveLength(1);
  });

  it("a tool that ends the turn (approval cancelled) stops the loop as interrupted", async () => {
    const lab = new ToolLab();
    const ask = lab.tool("ask", { run: () => ({ ...textOutcome("user declined", true), endTurn: true }) });
    const after = lab.tool("after");
    mock.enqueue({
      toolCalls: [
        { id: "c1", name: "ask", arguments: {} },
        { id: "c2", name: "after", arguments: {} },
      ],
    });
    const h = makeHooks();
    const res = await runAgentLoop(config(providerFor("anthropic"), [ask, after]), h.hooks);
    expect(res.stopReason).toBe("interrupted");
    expect(lab.executed.map((c) => c.id)).toEqual(["c1"]);
    expect(ofType(h.events, "toolResult").map((r) => textOf(r.result))).toEqual(["user declined", INTERRUPTED_RESULT]);
    expect(mock.requests).toHaveLength(1);
  });
});

// ---------------------------------------------------------------------------------------------
// 5. Retries

describe.each(PROVIDER_IDS)("§3.5 retries [%s]", (id) => {
  const run = (over: Partial<LoopConfig> = {}, tools: LoopTool[] = [], h = makeHooks()) =>
    runAgentLoop(config(providerFor(id), tools, over), h.hooks).then((res) => ({ res, h }));

  it("429 then success: retried once, honouring Retry-After: 0", async () => {
    mock.enqueue({ kind: "error", status: 429, retryAfterSeconds: 0 }, { text: "ok" });
    const { res, h } = await run();
    expect(res.stopReason).toBe("finalAnswer");
    expect(mock.requests).toHaveLength(2);
    const failed = ofType(h.events, "modelCallFailed");
    expect(failed).toHaveLength(1);
    expect(failed[0]).toMatchObject({ willRetry: true, retryInMs: 0 });
    expect(failed[0]!.error.kind).toBe("rateLimited");
    expect(ofType(h.events, "modelCallStart").map((e) => [e.call, e.attempt])).toEqual([
      [0, 0],
      [0, 1],
    ]);
  });

  it("honours retry-after-ms", async () => {
    mock.enqueue({ kind: "error", status: 429, retryAfterMs: 30 }, { text: "ok" });
    const { res, h } = await run();
    expect(res.stopReason).toBe("finalAnswer");
    expect(ofType(h.events, "modelCallFailed")[0]).toMatchObject({ willRetry: true, retryInMs: 30 });
  });

  it.each<[string, MockStep]>([
    ["HTTP 500", { kind: "error", status: 500 }],
    ["HTTP 529/503 overloaded", { kind: "error", status: 503 }],
    ["a cut stream", { text: ["never ", "finished"], cutAfterEvents: 3 }],
    ["a malformed chunk", { text: ["never ", "finished"], malformedAfterEvents: 2 }],
    ["a mid-stream error event", { text: "x", midStreamError: { afterEvents: 2 } }],
  ])("retries %s, then succeeds", async (_name, fault) => {
    mock.enqueue(fault, { text: "recovered" });
    const { res, h } = await run();
    expect(res.stopReason).toBe("finalAnswer");
    expect(mock.requests).toHaveLength(2);
    const failed = ofType(h.events, "modelCallFailed");
    expect(failed).toHaveLength(1);
    expect(failed[0]!.willRetry).toBe(true);
    expect(failed[0]!.error.retryable).toBe(true);
    expect(failed[0]!.retryInMs).toBe(RETRY.baseDelayMs); // no Retry-After: the first backoff step
    const msg = ofType(h.events, "assistantMessage");
    expect(msg).toHaveLength(1);
    expect(msg[0]!.message.content).toEqual([{ type: "text", text: "recovered" }]);
  });

  it.each([400, 401, 403, 404])("never retries HTTP %i", async (status) => {
    mock.enqueue({ kind: "error", status }, { text: "must not be reached" });
    const { res, h } = await run();
    expect(res.stopReason).toBe("error");
    expect(mock.requests).toHaveLength(1);
    const failed = ofType(h.events, "modelCallFailed");
    expect(failed).toHaveLength(1);
    expect(failed[0]).toMatchObject({ willRetry: false, retryInMs: null });
    expect(res.error).toBe(failed[0]!.error);
  });

  it("gives up after maxRetries with exponential backoff (3 × 500 with maxRetries 2)", async () => {
    mock.enqueue({ kind: "error", status: 500 }, { kind: "error", status: 500 }, { kind: "error", status: 500 }, { text: "not reached" });
    const { res, h } = await run({ retry: { ...RETRY, maxRetries: 2 } });
    expect(res.stopReason).toBe("error");
    expect((res.error as ProviderError).kind).toBe("server");
    expect(mock.requests).toHaveLength(3);
    expect(ofType(h.events, "modelCallFailed").map((e) => [e.willRetry, e.retryInMs])).toEqual([
      [true, 5],
      [true, 10],
      [false, null],
    ]);
  });

  it("abort during the backoff sleep: interrupted, no further request (Retry-After capped)", async () => {
    mock.enqueue({ kind: "error", status: 429, retryAfterSeconds: 3600 }, { text: "not reached" });
    const ac = new AbortController();
    // The abort comes once the backoff sleep listens for it: the first "abort" listener added to
    // the turn's signal after the retry was announced.
    let retryAnnounced = false;
    const listen = ac.signal.addEventListener.bind(ac.signal);
    ac.signal.addEventListener = ((type: string, listener: EventListenerOrEventListenerObject, options?: AddEventListenerOptions) => {
      listen(type, listener, options);
      if (type === "abort" && retryAnnounced && !ac.signal.aborted) ac.abort();
    }) as AbortSignal["addEventListener"];
    const h = makeHooks({
      onEvent: (e) => {
        if (e.type === "modelCallFailed" && e.willRetry) retryAnnounced = true;
      },
    });
    const { res } = await run({ signal: ac.signal, retry: { ...RETRY, maxRetryAfterMs: 50_000 } }, [], h);
    expect(res.stopReason).toBe("interrupted");
    expect(mock.requests).toHaveLength(1);
    expect(ofType(h.events, "modelCallFailed")[0]).toMatchObject({ willRetry: true, retryInMs: 50_000 });
  });

  it("a retry after a tool already ran re-sends the model call only", async () => {
    const lab = new ToolLab();
    mock.enqueue({ toolCalls: [{ id: "call_once", name: "write", arguments: { path: "a.txt" } }] }, { kind: "error", status: 500 }, { text: "done" });
    const { res } = await run({}, [lab.tool("write")]);
    expect(res.stopReason).toBe("finalAnswer");
    expect(lab.executed).toHaveLength(1);
    expect(mock.requests).toHaveLength(3);
    // The retried request is the same request, carrying the one real result.
    expect(conversation(mock.requests[2]!)).toEqual(conversation(mock.requests[1]!));
    expect(conversation(mock.requests[2]!)).toEqual(["user:hi", "call:call_once:write", "result:call_once:write ok call_once"]);
    expect(res.modelCalls).toBe(2);
  });
});

// ---------------------------------------------------------------------------------------------
// 6. Context overflow

describe.each(PROVIDER_IDS)("§3.6 context overflow [%s]", (id) => {
  const overflow: MockStep = { kind: "error", status: 400, contextOverflow: true };
  const longHistory: Message[] = [user("very old"), { role: "assistant", content: [{ type: "text", text: "old answer" }] }, user("hi")];

  it("compacts once and retries with the smaller history", async () => {
    mock.enqueue(overflow, { text: "fits now" });
    const h = makeHooks({ compact: async () => [user("summary"), user("hi")] });
    const res = await runAgentLoop(config(providerFor(id), [], { history: longHistory }), h.hooks);
    expect(res.stopReason).toBe("finalAnswer");
    expect(h.compactCalls).toEqual([longHistory]);
    expect(mock.requests).toHaveLength(2);
    expect(conversation(mock.requests[0]!)).toEqual(["user:very old", "assistant:old answer", "user:hi"]);
    expect(conversation(mock.requests[1]!)).toEqual(["user:summary", "user:hi"]);
    expect(ofType(h.events, "compacted")).toHaveLength(1);
    expect(ofType(h.events, "modelCallFailed")[0]!.error.kind).toBe("contextOverflow");
  });

  it("fails the turn when it still overflows after compaction (no second compaction)", async () => {
    mock.enqueue(overflow, overflow, { text: "not reached" });
    const h = makeHooks({ compact: async () => [user("still too long")] });
    const res = await runAgentLoop(config(providerFor(id), [], { history: longHistory }), h.hooks);
    expect(res.stopReason).toBe("error");
    expect((res.error as ProviderError).kind).toBe("contextOverflow");
    expect(h.compactCalls).toHaveLength(1);
    expect(mock.requests).toHaveLength(2);
    expect(ofType(h.events, "modelCallFailed").at(-1)).toMatchObject({ willRetry: false });
  });

  it("fails with kind contextOverflow when there is no compaction hook", async () => {
    mock.enqueue(overflow, { text: "not reached" });
    const h = makeHooks();
    const res = await runAgentLoop(config(providerFor(id), [], { history: longHistory }), h.hooks);
    expect(res.stopReason).toBe("error");
    expect(res.error).toBeInstanceOf(ProviderError);
    expect((res.error as ProviderError).kind).toBe("contextOverflow");
    expect(mock.requests).toHaveLength(1);
  });

  it("fails when the compaction hook gives up (returns null)", async () => {
    mock.enqueue(overflow, { text: "not reached" });
    const h = makeHooks({ compact: async () => null });
    const res = await runAgentLoop(config(providerFor(id), [], { history: longHistory }), h.hooks);
    expect(res.stopReason).toBe("error");
    expect((res.error as ProviderError).kind).toBe("contextOverflow");
    expect(h.compactCalls).toHaveLength(1);
    expect(mock.requests).toHaveLength(1);
    expect(ofType(h.events, "modelCallFailed").at(-1)).toMatchObject({ willRetry: false });
  });
});

// ---------------------------------------------------------------------------------------------
// 7. Parallel where safe

describe("§3.7 parallel where safe", () => {
  const readTool = (lab: ToolLab, name = "read") => lab.tool(name, { readOnly: true, run: tick });
  const writeTool = (lab: ToolLab, name = "write") => lab.tool(name, { run: tick });
  const calls = (...specs: Array<[string, string]>) => ({ toolCalls: specs.map(([cid, name]) => ({ id: cid, name, arguments: {} })) });

  /** A read-only tool whose runs all wait for release(): how many run at once shows, without timers. */
  const heldReadTool = (lab: ToolLab) => {
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    return { tool: lab.tool("read", { readOnly: true, run: () => released }), release };
  };

  it("runs consecutive read-only calls concurrently", async () => {
    const lab = new ToolLab();
    const read = heldReadTool(lab);
    mock.enqueue(calls(["r1", "read"], ["r2", "read"], ["r3", "read"]), { text: "done" });
    const loop = runAgentLoop(config(providerFor("anthropic"), [read.tool]), makeHooks().hooks);
    try {
      // All three run at once: none of them can end before the release.
      await expect.poll(() => lab.running, { timeout: 10_000 }).toBe(3);
    } finally {
      read.release();
    }
    const res = await loop;
    expect(res.stopReason).toBe("finalAnswer");
    expect(lab.maxRunning).toBe(3);
    expect(lab.order().slice(0, 3)).toEqual(["start:r1", "start:r2", "start:r3"]);
  });

  it("a write call between read-only calls runs alone; writes keep their order", async () => {
    const lab = new ToolLab();
    mock.enqueue(
      calls(["r1", "read"], ["r2", "read"], ["w1", "write"], ["w2", "write"], ["r3", "read"], ["r4", "read"]),
      { text: "done" },
    );
    const h = makeHooks();
    const res = await runAgentLoop(config(providerFor("anthropic"), [readTool(lab), writeTool(lab)]), h.hooks);
    expect(res.stopReason).toBe("finalAnswer");
    const order = lab.order();
    // Each write starts only after everything before it ended, and ends before anything after it starts.
    for (const w of ["w1", "w2"]) {
      const s = order.indexOf(`start:${w}`);
      expect(order[s + 1]).toBe(`end:${w}`);
      expect(lab.log[s]!.running).toBe(1);
    }
    expect(order.indexOf("end:r1")).toBeLessThan(order.indexOf("start:w1"));
    expect(order.indexOf("end:r2")).toBeLessThan(order.indexOf("start:w1"));
    expect(order.indexOf("end:w1")).toBeLessThan(order.indexOf("start:w2"));
    expect(order.indexOf("end:w2")).toBeLessThan(order.indexOf("start:r3"));
    expect(lab.executed.map((c) => c.id)).toEqual(["r1", "r2", "w1", "w2", "r3", "r4"]);
    // The read-only runs on each side of the writes still overlapped.
    expect(lab.log.find((e) => e.id === "r2" && e.phase === "start")!.running).toBe(2);
    expect(lab.log.find((e) => e.id === "r4" && e.phase === "start")!.running).toBe(2);
    expect(ofType(h.events, "toolResult").map((e) => e.call.id)).toEqual(["r1", "r2", "w1", "w2", "r3", "r4"]);
  });

  it("is bounded by maxParallelTools", async () => {
    const lab = new ToolLab();
    const read = heldReadTool(lab);
    mock.enqueue(calls(["r1", "read"], ["r2", "read"], ["r3", "read"], ["r4", "read"], ["r5", "read"]), { text: "done" });
    const loop = runAgentLoop(config(providerFor("anthropic"), [read.tool], { maxParallelTools: 2 }), makeHooks().hooks);
    try {
      // Two run, held; the others wait for them (a group's calls start together, in one go).
      await expect.poll(() => lab.running, { timeout: 10_000 }).toBe(2);
      expect(lab.executed.map((c) => c.id)).toEqual(["r1", "r2"]);
    } finally {
      read.release();
    }
    const res = await loop;
    expect(res.stopReason).toBe("finalAnswer");
    expect(lab.maxRunning).toBe(2);
    expect(lab.executed).toHaveLength(5);
  });

  it("an unknown tool runs alone and becomes an error result", async () => {
    const lab = new ToolLab();
    mock.enqueue(calls(["r1", "read"], ["x1", "nope"], ["r2", "read"]), { text: "done" });
    const h = makeHooks();
    const res = await runAgentLoop(config(providerFor("anthropic"), [readTool(lab)]), h.hooks);
    expect(res.stopReason).toBe("finalAnswer");
    const results = ofType(h.events, "toolResult");
    expect(results.map((r) => r.result.toolCallId)).toEqual(["r1", "x1", "r2"]);
    expect(results[1]!.result.isError).toBe(true);
    expect(textOf(results[1]!.result)).toMatch(/Unknown tool: nope/);
  });
});

// ---------------------------------------------------------------------------------------------
// 8. Steering

describe("§3.8 steering", () => {
  it("input queued during a model call is injected after that call's tool results, before the next call", async () => {
    const lab = new ToolLab();
    mock.enqueue({ text: "looking", toolCalls: [{ id: "c1", name: "read", arguments: {} }] }, { text: "done" });
    let queued = false;
    const h: Harness = makeHooks({
      onEvent: (e) => {
        if (e.type === "modelCallStart" && !queued) {
          queued = true;
          h.steerQueue.push({ message: user("also check the tests") });
        }
      },
    });
    const res = await runAgentLoop(config(providerFor("anthropic"), [lab.tool("read", { readOnly: true })]), h.hooks);
    expect(res.stopReason).toBe("finalAnswer");
    expect(mock.requests).toHaveLength(2);
    // The call had not started when the input arrived, so it is cancelled (DESIGN.md §3.8).
    expect(lab.executed).toHaveLength(0);
    expect(conversation(mock.requests[1]!)).toEqual(["user:hi", "assistant:looking", "call:c1:read", `result:c1:${STEERED_RESULT}`, "user:also check the tests"]);
    const steered = ofType(h.events, "steered");
    expect(steered).toHaveLength(1);
    expect(steered[0]!.messages).toEqual([user("also check the tests")]);
    expect(h.steerQueue).toHaveLength(0);
  });

  it("input sent while tool 1 of 3 runs: tools 2 and 3 are not executed, tool 1 finishes", async () => {
    const lab = new ToolLab();
    let h!: Harness;
    const first = lab.tool("first", {
      run: async () => {
        h.steerQueue.push({ message: user("stop, do X instead") });
        await tick();
        return textOutcome("first finished");
      },
    });
    const w = lab.tool("write");
    mock.enqueue(
      {
        toolCalls: [
          { id: "c1", name: "first", arguments: {} },
          { id: "c2", name: "write", arguments: {} },
          { id: "c3", name: "write", arguments: {} },
        ],
      },
      { text: "doing X" },
    );
    h = makeHooks();
    const res = await runAgentLoop(config(providerFor("anthropic"), [first, w]), h.hooks);
    expect(res.stopReason).toBe("finalAnswer");
    expect(lab.executed.map((c) => c.id)).toEqual(["c1"]);
    expect(ofType(h.events, "toolResult").map((e) => [e.result.toolCallId, textOf(e.result)])).toEqual([
      ["c1", "first finished"],
      ["c2", STEERED_RESULT],
      ["c3", STEERED_RESULT],
    ]);
    expect(conversation(mock.requests[1]!)).toEqual([
      "user:hi",
      "call:c1:first",
      "call:c2:write",
      "call:c3:write",
      "result:c1:first finished",
      `result:c2:${STEERED_RESULT}`,
      `result:c3:${STEERED_RESULT}`,
      "user:stop, do X instead",
    ]);
  });

  it("input arriving during a final answer makes the loop call the model again", async () => {
    mock.enqueue({ text: "all done" }, { text: "and the extra bit" });
    let queued = false;
    const h: Harness = makeHooks({
      onEvent: (e) => {
        if (e.type === "stream" && !queued) {
          queued = true;
          h.steerQueue.push({ message: user("one more thing") });
        }
      },
    });
    const res = await runAgentLoop(config(providerFor("anthropic")), h.hooks);
    expect(res.stopReason).toBe("finalAnswer");
    expect(res.modelCalls).toBe(2);
    expect(mock.requests).toHaveLength(2);
    expect(conversation(mock.requests[1]!)).toEqual(["user:hi", "assistant:all done", "user:one more thing"]);
  });
});

// ---------------------------------------------------------------------------------------------
// 9. Exactly one result on every path

describe("§3.9 exactly one result on every path", () => {
  /** Runs the loop and checks it resolves (never rejects) and emits nothing afterwards. */
  async function settle(cfg: LoopConfig, h: Harness): Promise<LoopResult> {
    const outcome = await runAgentLoop(cfg, h.hooks).then(
      (res) => ({ ok: true as const, res }),
      (err: unknown) => ({ ok: false as const, err }),
    );
    expect(outcome.ok).toBe(true);
    if (!outcome.ok) throw outcome.err;
    const n = h.events.length;
    await tick();
    await tick();
    expect(h.events.length).toBe(n);
    expect(["finalAnswer", "maxTokens", "maxTurns", "refused", "interrupted", "error"]).toContain(outcome.res.stopReason);
    return outcome.res;
  }

  it.each(["modelCallStart", "stream", "assistantMessage", "toolResult"] as const)("a hook emit that throws on %s → error, one request", async (type) => {
    const lab = new ToolLab();
    mock.enqueue({ text: "x", toolCalls: [{ id: "c1", name: "t", arguments: {} }] }, { text: "done" });
    const h = makeHooks({
      onEvent: (e) => {
        if (e.type === type) throw new Error(`emit failed on ${type}`);
      },
    });
    const res = await settle(config(providerFor("anthropic"), [lab.tool("t")]), h);
    expect(res.stopReason).toBe("error");
    expect(res.error?.message).toContain(`emit failed on ${type}`);
    // A hook failure is not a transient model failure: nothing is re-requested.
    expect(mock.requests.length).toBeLessThanOrEqual(1);
  });

  it("a tool that throws becomes an error result and the turn goes on", async () => {
    const lab = new ToolLab();
    mock.enqueue({ toolCalls: [{ id: "c1", name: "boom", arguments: {} }] }, { text: "recovered" });
    const h = makeHooks();
    const res = await settle(
      config(providerFor("anthropic"), [
        lab.tool("boom", {
          run: () => {
            throw new TypeError("kaboom");
          },
        }),
      ]),
      h,
    );
    expect(res.stopReason).toBe("finalAnswer");
    const r = ofType(h.events, "toolResult")[0]!.result;
    expect(r.isError).toBe(true);
    expect(textOf(r)).toContain("kaboom");
    expect(conversation(mock.requests[1]!)).toEqual(["user:hi", "call:c1:boom", "result:c1:Tool boom failed: kaboom"]);
  });

  it("a provider that throws a non-ProviderError mid-stream → error, not retried", async () => {
    const provider = scriptedProvider([
      async function* () {
        yield { type: "textDelta", index: 0, delta: "par" };
        throw new TypeError("adapter bug");
      },
      reply({ role: "assistant", content: [{ type: "text", text: "not reached" }] }, "endTurn"),
    ]);
    const res = await settle(config(provider), makeHooks());
    expect(res.stopReason).toBe("error");
    expect(res.error?.message).toContain("adapter bug");
    expect(provider.requests).toHaveLength(1);
  });

  it("a provider whose stream() throws synchronously → error", async () => {
    const provider: ModelProvider = {
      id: "broken",
      stream() {
        throw new Error("sync failure");
      },
    };
    const res = await settle(config(provider), makeHooks());
    expect(res.stopReason).toBe("error");
    expect(res.error?.message).toContain("sync failure");
  });

  it("a provider stream that ends without its done event is retried, then fails with streamIncomplete", async () => {
    const empty: ScriptStep = async function* () {};
    const provider = scriptedProvider([empty, empty, empty]);
    const h = makeHooks();
    const res = await settle(config(provider, [], { retry: { ...RETRY, maxRetries: 2 } }), h);
    expect(res.stopReason).toBe("error");
    expect((res.error as ProviderError).kind).toBe("streamIncomplete");
    expect(provider.requests).toHaveLength(3);
  });

  it("takeSteering or compact throwing → error", async () => {
    const h1 = makeHooks();
    h1.hooks.takeSteering = () => {
      throw new Error("queue broken");
    };
    const r1 = await settle(config(providerFor("anthropic")), h1);
    expect(r1.stopReason).toBe("error");
    expect(r1.error?.message).toBe("queue broken");

    mock.enqueue({ kind: "error", status: 400, contextOverflow: true });
    const h2 = makeHooks({
      compact: async () => {
        throw new Error("compactor broken");
      },
    });
    const r2 = await settle(config(providerFor("anthropic")), h2);
    expect(r2.stopReason).toBe("error");
    expect(r2.error?.message).toBe("compactor broken");
  });
});

// ---------------------------------------------------------------------------------------------
// Round two (issue 32): refusals, quota, plans across compaction, stop hooks, parallel groups

describe.each(PROVIDER_IDS)("§3.4 a refused or filtered answer is not an answer [%s]", (id) => {
  const reasonOf: Record<ProviderId, RegExp> = {
    anthropic: /anthropic: .*\(stop_reason "refusal"\)/,
    "openai-chat": /openai-chat: .*\(finish_reason "content_filter"\)/,
    openai: /openai: .*\(incomplete \(reason "content_filter"\)\)/,
  };

  it("ends the turn refused, names the provider and its reason, never runs the message's tool calls", async () => {
    const lab = new ToolLab();
    mock.enqueue({ text: "Sure, here is how to", toolCalls: [{ id: "call_refused", name: "shell", arguments: { cmd: "rm -rf /" } }], stop: "refusal" }, { text: "not reached" });
    const h = makeHooks();
    const res = await runAgentLoop(config(providerFor(id), [lab.tool("shell")]), h.hooks);
    expect(res.stopReason).toBe("refused");
    expect(res.error).toBeInstanceOf(ProviderError);
    expect((res.error as ProviderError).kind).toBe("refused");
    expect((res.error as ProviderError).retryable).toBe(false);
    expect(res.error!.message).toMatch(reasonOf[id]);
    expect(res.error!.message).toMatch(/tool call was not run/);
    expect(lab.executed).toHaveLength(0);
    expect(mock.requests).toHaveLength(1);
    // Reported (its text is shown as incomplete), never appended as an answer, no result invented.
    const [refused] = ofType(h.events, "refused");
    expect(refused!.message.content.filter((b) => b.type === "text").map((b) => (b as { text: string }).text).join("")).toBe("Sure, here is how to");
    expect(ofType(h.events, "assistantMessage")).toHaveLength(0);
    expect(ofType(h.events, "toolResult")).toHaveLength(0);
  });

  it("a refusal after tools ran ends the turn without running the new calls", async () => {
    const lab = new ToolLab();
    mock.enqueue({ toolCalls: [{ id: "c1", name: "shell", arguments: {} }] }, { text: "half", toolCalls: [{ id: "c2", name: "shell", arguments: {} }], stop: "refusal" });
    const res = await runAgentLoop(config(providerFor(id), [lab.tool("shell")]), makeHooks().hooks);
    expect(res.stopReason).toBe("refused");
    expect(lab.executed.map((c) => c.id)).toEqual(["c1"]);
    expect(res.modelCalls).toBe(2);
  });
});

describe("§3.4 refusals: the other wire shapes", () => {
  it("Responses: incomplete for a reason other than max_output_tokens is a refusal, not an answer", async () => {
    mock.enqueue({ text: "partial", stop: "refusal", incompleteReason: "max_tool_calls" });
    const res = await runAgentLoop(config(providerFor("openai")), makeHooks().hooks);
    expect(res.stopReason).toBe("refused");
    expect(res.error!.message).toMatch(/incomplete \(reason "max_tool_calls"\)/);
  });
});

describe.each(PROVIDER_IDS)("§3.5 quota and billing errors are not retried [%s]", (id) => {
  const exhausted: Record<ProviderId, MockStep> = {
    anthropic: { kind: "error", status: 402, message: "Your credit balance is too low to access the Anthropic API." },
    openai: { kind: "error", status: 429, type: "insufficient_quota", code: "insufficient_quota", message: "You exceeded your current quota, please check your plan and billing details." },
    "openai-chat": { kind: "error", status: 429, type: "insufficient_quota", code: "insufficient_quota", message: "You exceeded your current quota, please check your plan and billing details." },
  };

  it("an exhausted quota (HTTP) fails at once with a quota error that says what to do", async () => {
    mock.enqueue(exhausted[id], { text: "not reached" });
    const h = makeHooks();
    const res = await runAgentLoop(config(providerFor(id)), h.hooks);
    expect(res.stopReason).toBe("error");
    expect((res.error as ProviderError).kind).toBe("quota");
    expect(res.error!.message).toMatch(/quota or billing limit is reached; not retried/);
    expect(mock.requests).toHaveLength(1);
    expect(ofType(h.events, "modelCallFailed")).toEqual([expect.objectContaining({ willRetry: false })]);
  });

  it("an exhausted quota reported mid-stream is not retried either", async () => {
    mock.enqueue({ text: ["Hel", "lo"], midStreamError: { afterEvents: 2, type: id === "anthropic" ? "billing_error" : "insufficient_quota", message: "You exceeded your current quota." } }, { text: "not reached" });
    const res = await runAgentLoop(config(providerFor(id)), makeHooks().hooks);
    expect(res.stopReason).toBe("error");
    expect((res.error as ProviderError).kind).toBe("quota");
    expect(mock.requests).toHaveLength(1);
  });
});

describe("§3.6 the stop-guard reads the thread's newest plan", () => {
  const planCall = (id: string, statuses: string[]): ToolCallBlock => ({
    type: "toolCall",
    id,
    name: "update_plan",
    arguments: JSON.stringify({ plan: statuses.map((status, i) => ({ step: `step ${i + 1}`, status })) }),
  });
  const answer = (text: string): AssistantMessage => ({ role: "assistant", content: [{ type: "text", text }] });

  it("a plan left open by an earlier turn (in the history) gets the reminder", async () => {
    const earlier: Message[] = [user("plan it"), { role: "assistant", content: [planCall("p1", ["completed", "pending"])] }, { role: "toolResult", toolCallId: "p1", toolName: "update_plan", content: [{ type: "text", text: "Plan updated" }], isError: false }, answer("planned"), user("anything else?")];
    const provider = scriptedProvider([reply(answer("nothing"), "endTurn"), reply(answer("step 2 is done too"), "endTurn")]);
    const h = makeHooks();
    const res = await runAgentLoop(config(provider, [], { history: earlier }), h.hooks);
    expect(res.stopReason).toBe("finalAnswer");
    expect(provider.requests).toHaveLength(2);
    expect(ofType(h.events, "reminded")).toHaveLength(1);
  });

  it("a plan the runtime read from before a compaction (config.plan) still gets the reminder after the history is replaced", async () => {
    const lab = new ToolLab();
    const provider = scriptedProvider([
      async function* () {
        throw new ProviderError("contextOverflow", "prompt is too long");
      },
      reply(answer("done"), "endTurn"),
      reply(answer("really done"), "endTurn"),
    ]);
    const h = makeHooks({ compact: async () => [user("<conversation_summary>\nwork\n</conversation_summary>")] });
    const res = await runAgentLoop(config(provider, [lab.tool("shell")], { plan: [{ step: "write tests", status: "in_progress" }] }), h.hooks);
    expect(res.stopReason).toBe("finalAnswer");
    expect(provider.requests).toHaveLength(3);
    expect(JSON.stringify(provider.requests[2]!.messages)).toContain("write tests");
  });

  it("a plan completed in this turn clears an earlier open one", async () => {
    const provider = scriptedProvider([reply({ role: "assistant", content: [planCall("p2", ["completed", "completed"])] }, "toolUse"), reply(answer("all done"), "endTurn")]);
    const updatePlan: LoopTool = { spec: { name: "update_plan", description: "plan", inputSchema: { type: "object" } }, readOnly: false, execute: async () => textOutcome("Plan updated") };
    const h = makeHooks();
    const res = await runAgentLoop(config(provider, [updatePlan], { plan: [{ step: "old", status: "pending" }] }), h.hooks);
    expect(res.stopReason).toBe("finalAnswer");
    expect(provider.requests).toHaveLength(2);
    expect(ofType(h.events, "reminded")).toHaveLength(0);
  });
});

describe("§3.6 stop hooks may send the model back to work, a bounded number of times", () => {
  const answer = (text: string): AssistantMessage => ({ role: "assistant", content: [{ type: "text", text }] });
  const goOn = (text: string): DeveloperMessage => ({ role: "developer", content: [{ type: "text", text }] });

  it("a 'continue' appends the hook's message and starts another model request", async () => {
    const provider = scriptedProvider([reply(answer("first"), "endTurn"), reply(answer("second"), "endTurn")]);
    const h = makeHooks();
    const seen: string[] = [];
    h.hooks.beforeStop = async (a) => {
      seen.push(a.content.map((b) => (b.type === "text" ? b.text : "")).join(""));
      return seen.length === 1 ? goOn("run the tests first") : null;
    };
    const res = await runAgentLoop(config(provider), h.hooks);
    expect(res).toMatchObject({ stopReason: "finalAnswer", modelCalls: 2 });
    expect(seen).toEqual(["first", "second"]);
    expect(JSON.stringify(provider.requests[1]!.messages)).toContain("run the tests first");
    expect(ofType(h.events, "reminded").map((e) => e.message.content[0]!.text)).toEqual(["run the tests first"]);
  });

  it(`a hook that always says 'continue' is followed ${MAX_STOP_CONTINUATIONS} times, then the turn ends (the hook still runs, told it may not)`, async () => {
    const steps = Array.from({ length: MAX_STOP_CONTINUATIONS + 2 }, (_, i) => reply(answer(`answer ${i}`), "endTurn"));
    const provider = scriptedProvider(steps);
    const h = makeHooks();
    const mays: boolean[] = [];
    h.hooks.beforeStop = async (_a, mayContinue) => {
      mays.push(mayContinue);
      return goOn("again");
    };
    const res = await runAgentLoop(config(provider), h.hooks);
    expect(res.stopReason).toBe("finalAnswer");
    expect(provider.requests).toHaveLength(MAX_STOP_CONTINUATIONS + 1);
    expect(mays).toEqual([...Array(MAX_STOP_CONTINUATIONS).fill(true), false]);
  });

  it("the plan reminder comes first; the stop hooks run on the answer after it", async () => {
    const provider = scriptedProvider([reply(answer("done?"), "endTurn"), reply(answer("done."), "endTurn")]);
    const h = makeHooks();
    let calls = 0;
    h.hooks.beforeStop = async () => {
      calls++;
      return null;
    };
    const res = await runAgentLoop(config(provider, [], { plan: [{ step: "x", status: "pending" }] }), h.hooks);
    expect(res.stopReason).toBe("finalAnswer");
    expect(provider.requests).toHaveLength(2);
    expect(calls).toBe(1);
  });
});

describe("§3.7 a parallel group ends together", () => {
  it("a host failure in one read-only call aborts its siblings and waits for them before the turn ends", async () => {
    const lab = new ToolLab();
    const settledBeforeEnd: string[] = [];
    let loopReturned = false;
    const sibling = (name: string) =>
      lab.tool(name, {
        readOnly: true,
        run: (_call, signal) =>
          new Promise<ToolOutcome>((resolve) => {
            // A long read that stops when asked (and records, late, if it was not waited for).
            signal.addEventListener("abort", () =>
              setTimeout(() => {
                settledBeforeEnd.push(`${name}:${loopReturned ? "after" : "before"}`);
                resolve(textOutcome(`${name} stopped`));
              }, 5),
            );
          }),
      });
    const failing = lab.tool("store_fails", {
      readOnly: true,
      run: async () => {
        await tick();
        throw new ToolHostError("could not record a completed tool item: injected");
      },
    });
    mock.enqueue({ toolCalls: [{ id: "a", name: "slow_a", arguments: {} }, { id: "f", name: "store_fails", arguments: {} }, { id: "b", name: "slow_b", arguments: {} }] }, { text: "not reached" });
    const res = await runAgentLoop(config(providerFor("anthropic"), [sibling("slow_a"), failing, sibling("slow_b")]), makeHooks().hooks);
    loopReturned = true;
    expect(res.stopReason).toBe("error");
    expect(res.error).toBeInstanceOf(ToolHostError);
    expect(settledBeforeEnd.sort()).toEqual(["slow_a:before", "slow_b:before"]);
    expect(lab.running).toBe(0);
    expect(mock.requests).toHaveLength(1);
  });
});

describe("§3.8 steering: the queue the loop drains is the production one", () => {
  it("take() drains; what was taken is claimed once, in order, for the record", () => {
    const q = new SteeringQueue<{ message: UserMessage; clientId: string }>();
    q.push({ message: user("a"), clientId: "1" });
    q.push({ message: user("b"), clientId: "2" });
    expect(q.length).toBe(2);
    expect(q.take()).toEqual([user("a"), user("b")]);
    expect(q.length).toBe(0);
    expect(q.take()).toEqual([]);
    q.push({ message: user("c"), clientId: "3" });
    expect(q.claimTaken(1).map((e) => e.clientId)).toEqual(["1"]);
    expect(q.claimTaken(5).map((e) => e.clientId)).toEqual(["2"]);
    expect(q.length).toBe(1);
  });
});
