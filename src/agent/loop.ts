/**
 * The agent loop: model → tools → results → model … until the model answers without tool calls.
 * Pure orchestration: it imports nothing about sockets, JSON-RPC or SQL. It takes a context, a
 * provider and tools, and reports everything through `hooks.emit`, which the caller awaits
 * (so the caller can record before it publishes). The contracts it implements are DESIGN.md §3:
 *
 * 1. content decides whether to continue (tool calls in the finished message), never the stop reason;
 * 2. results are appended after their assistant message, in call order, paired by call id;
 * 3. tool-call/result pairs are repaired before each model call (truthfully: a call recorded as
 *    started gets "outcome unknown", only one that never started "not executed");
 * 4. final answer, truncation (max tokens), refusal (the provider refused or filtered the answer),
 *    budget (max model calls), interrupt and error are distinct stop reasons; tool calls of a
 *    truncated or refused message are never run;
 * 5. transient failures are retried with backoff honouring Retry-After; 400/401/403/404, quota
 *    and user cancels are not; a retry repeats only the model call, never a tool;
 * 6. context overflow calls the compaction hook (once per model call), then fails; a model that
 *    ends while the thread's newest plan has open steps is reminded once per turn (the
 *    stop-guard), and the caller's stop hooks may send it back to work a bounded number of times;
 * 7. consecutive read-only tools run concurrently (bounded); anything else runs alone, in order;
 *    a failure that ends the turn stops the whole group before the loop returns;
 * 8. steering input is injected before the next model call and cancels tools not yet started;
 * 9. it always returns exactly one result (the caller's single terminal event), even on a bug.
 *
 * The loop owns the turn's history: it starts from `config.history` and every message it appends
 * is reported by exactly one event (assistantMessage, toolResult, steered, reminded); `compacted`
 * reports a replacement. A refused message is reported (`refused`) but not appended: it is not an
 * answer, and the provider would be sent back what it refused. The caller persists those events
 * and keeps no copy of its own in step.
 */
import { addUsage, emptyUsage, type AssistantMessage, type DeveloperMessage, type Message, type ToolCallBlock, type ToolResultMessage, type Usage, type UserMessage } from "./messages.js";
import { latestPlan, openSteps, planReminder, type PlanStep } from "./plan-guard.js";
import { repairToolPairs, syntheticResult } from "./repair.js";
import { retryDelayMs, sleep, type RetryPolicy } from "./retry.js";
import { runToolCalls, type ToolRunContext } from "./tool-calls.js";
import type { LoopTool } from "./tools.js";
import { ProviderError, type ModelProvider, type ModelRequest, type ProviderStopReason, type ProviderStreamEvent } from "../providers/types.js";

export { INTERRUPTED_RESULT, NOT_RERUN_RESULT, STEERED_RESULT } from "./tool-calls.js";

export type LoopStopReason = "finalAnswer" | "maxTokens" | "maxTurns" | "refused" | "interrupted" | "error";

export type LoopEvent =
  /** A model call (or a retry of one) is about to start. */
  | { type: "modelCallStart"; call: number; attempt: number }
  /** A streamed delta of the current attempt. */
  | { type: "stream"; event: Exclude<ProviderStreamEvent, { type: "done" }> }
  /** The current attempt failed; anything it streamed is void. `attempt` is 0-based. */
  | { type: "modelCallFailed"; error: ProviderError; willRetry: boolean; retryInMs: number | null; attempt: number; maxRetries: number }
  /** A finished assistant message, appended to the history. */
  | { type: "assistantMessage"; message: AssistantMessage; stopReason: ProviderStopReason; usage: Usage }
  /**
   * A finished message the provider refused or filtered: NOT appended to the history. What it
   * streamed is shown as an incomplete answer; its tool calls are never run. The turn ends with `error`.
   */
  | { type: "refused"; message: AssistantMessage; usage: Usage; error: ProviderError; detail: string }
  /** One tool result, appended to the history (emitted in call order). */
  | { type: "toolResult"; result: ToolResultMessage; call: ToolCallBlock }
  /** Steering input appended to the history before the next model call. */
  | { type: "steered"; messages: UserMessage[] }
  /** A harness message appended instead of ending the turn: the plan stop-guard's reminder, or a stop hook's "continue". */
  | { type: "reminded"; message: DeveloperMessage }
  /** The history was replaced by a compacted one (context overflow). */
  | { type: "compacted"; history: Message[] };

export interface LoopHooks {
  emit(event: LoopEvent): Promise<void> | void;
  /** Drains the steering input queued since the last call (SteeringQueue.take). */
  takeSteering(): UserMessage[];
  hasSteering(): boolean;
  /** Context overflow: return a smaller history to retry with, or null to give up (or throw why). */
  compact?(history: readonly Message[], signal: AbortSignal): Promise<Message[] | null>;
  /**
   * The model is about to end the turn with a final answer: the caller's stop hooks may send it
   * back to work with a message, or return null. `mayContinue` is false once they have done so
   * MAX_STOP_CONTINUATIONS times this turn (the hooks still run; a message is then ignored).
   */
  beforeStop?(answer: AssistantMessage, mayContinue: boolean, signal: AbortSignal): Promise<DeveloperMessage | null>;
}

export interface LoopConfig {
  provider: ModelProvider;
  /** Everything of the request but the messages (model, system, tools, cache key …). */
  request: Omit<ModelRequest, "messages">;
  /** The model history so far, ending with the new user input. Not mutated. */
  history: readonly Message[];
  tools: ReadonlyMap<string, LoopTool>;
  /** Harness budget: model calls per turn. */
  maxModelCalls: number;
  retry: RetryPolicy;
  /** Bound on concurrently running read-only tools. */
  maxParallelTools: number;
  signal: AbortSignal;
  /** Calls the host recorded as started (their repaired result says "outcome unknown"). */
  startedCalls?: ReadonlySet<string>;
  /** Remind the model once per turn when it ends with open plan steps (default on). */
  planStopGuard?: boolean;
  /**
   * The thread's newest plan when the turn starts, read from its whole log (a compaction may have
   * replaced the messages that wrote it). Default: the newest plan in `history`.
   */
  plan?: PlanStep[] | null;
  /**
   * Resuming a turn a previous process left waiting (on an approval): the last assistant
   * message's calls that have no result yet, run before the first model call. Calls in
   * `notRerun` had started before the restart; they get a "not executed again" result instead
   * (a tool whose side effects may have happened is never run twice).
   */
  resumeToolCalls?: { calls: ToolCallBlock[]; notRerun: ReadonlySet<string> };
}

export interface LoopResult {
  stopReason: LoopStopReason;
  /** Set for stopReason "error" and "refused" (and for an overflow that compaction could not fix). */
  error: Error | null;
  /** Set when the turn ended for a reason the user should read (truncation, budget). */
  note: string | null;
  modelCalls: number;
  usage: Usage;
}

export const TRUNCATED_RESULT = "Tool call was not executed: the model's output was cut off by the token limit.";
export const TRUNCATED_NOTE = "The model's output was cut off by the output token limit; the answer is incomplete.";
/** Stop hooks may send the model back to work at most this many times per turn (a hook that always says "continue" must not loop forever). */
export const MAX_STOP_CONTINUATIONS = 3;

const toolCallsOf = (m: AssistantMessage) => m.content.filter((b): b is ToolCallBlock => b.type === "toolCall");

function asProviderError(err: unknown, signal: AbortSignal): ProviderError {
  if (signal.aborted) return new ProviderError("aborted", "interrupted", { cause: err });
  if (err instanceof ProviderError) return err;
  return new ProviderError("streamIncomplete", err instanceof Error ? err.message : String(err), { cause: err });
}

/** The turn's error for a refused or filtered message: who stopped it, why, and what did not happen. */
export function refusalError(provider: string, detail: string | undefined, calls: number): ProviderError {
  const skipped = calls > 0 ? `; its ${calls === 1 ? "tool call was" : `${calls} tool calls were`} not run` : "";
  return new ProviderError("refused", `${provider}: the provider refused or filtered the model's answer (${detail ?? "refusal"}): what it wrote is incomplete${skipped}.`);
}

type Done = Extract<ProviderStreamEvent, { type: "done" }>;

export function runAgentLoop(config: LoopConfig, hooks: LoopHooks): Promise<LoopResult> {
  return new LoopRun(config, hooks).run();
}

/** One run of the loop: its history and counters, and the steps of DESIGN.md §3 as methods. */
class LoopRun {
  private history: Message[];
  private usage = emptyUsage();
  private modelCalls = 0;
  private plan: PlanStep[] | null;
  private reminded = false;
  private continuations = 0;
  private readonly tools: ToolRunContext;

  constructor(
    private readonly config: LoopConfig,
    private readonly hooks: LoopHooks,
  ) {
    this.history = [...config.history];
    this.plan = config.plan !== undefined ? config.plan : latestPlan(config.history);
    this.tools = {
      tools: config.tools,
      maxParallelTools: config.maxParallelTools,
      signal: config.signal,
      hasSteering: () => hooks.hasSteering(),
      appendResult: async (r: ToolResultMessage, call: ToolCallBlock) => {
        this.history.push(r);
        await hooks.emit({ type: "toolResult", result: r, call });
      },
    };
  }

  private result(stopReason: LoopStopReason, error: Error | null = null, note: string | null = null): LoopResult {
    return { stopReason, error, note, modelCalls: this.modelCalls, usage: this.usage };
  }

  async run(): Promise<LoopResult> {
    const { config, hooks } = this;
    try {
      if (config.resumeToolCalls) {
        const { calls, notRerun } = config.resumeToolCalls;
        if ((await runToolCalls(this.tools, calls, notRerun)) === "interrupted") return this.result("interrupted");
      }
      for (;;) {
        if (config.signal.aborted) return this.result("interrupted");
        const steer = hooks.takeSteering();
        if (steer.length > 0) {
          this.history.push(...steer);
          await hooks.emit({ type: "steered", messages: steer });
        }
        if (this.modelCalls >= config.maxModelCalls) {
          return this.result("maxTurns", null, `Stopped after ${this.modelCalls} model calls (the per-turn limit); the task may be unfinished.`);
        }
        const done = await this.modelCall();
        if (!("type" in done)) return done; // the call ended the turn
        const ended = await this.afterMessage(done);
        if (ended) return ended;
      }
    } catch (err) {
      // Whatever threw after a user interrupt (a hook rejecting on the signal) is the interrupt.
      if (config.signal.aborted) return this.result("interrupted");
      return this.result("error", err instanceof Error ? err : new Error(String(err)));
    }
  }

  /** One model call with its retries (and at most one compaction); the finished message, or how the turn ended. */
  private async modelCall(): Promise<Done | LoopResult> {
    const { config, hooks } = this;
    const { signal } = config;
    let compacted = false;
    for (let attempt = 0; ; attempt++) {
      await hooks.emit({ type: "modelCallStart", call: this.modelCalls, attempt });
      try {
        return await this.attempt();
      } catch (raw) {
        // Not a model failure (a hook's emit threw, or a provider bug): never retried, the turn
        // fails with the original error (run's catch).
        if (!(raw instanceof ProviderError) && !signal.aborted) throw raw;
        const error = asProviderError(raw, signal);
        const failed = (willRetry: boolean, retryInMs: number | null) =>
          hooks.emit({ type: "modelCallFailed", error, willRetry, retryInMs, attempt, maxRetries: config.retry.maxRetries });
        if (error.kind === "aborted") {
          await failed(false, null);
          return this.result("interrupted");
        }
        if (error.kind === "contextOverflow" && !compacted && hooks.compact) {
          compacted = true;
          await failed(true, 0);
          const smaller = await hooks.compact(this.history, signal);
          if (signal.aborted) return this.result("interrupted");
          if (smaller) {
            this.history = smaller;
            await hooks.emit({ type: "compacted", history: smaller });
            attempt--; // compaction is not a retry of a transient failure
            continue;
          }
        }
        const willRetry = error.retryable && attempt < config.retry.maxRetries;
        const retryInMs = willRetry ? retryDelayMs(config.retry, attempt + 1, error.retryAfterMs) : null;
        await failed(willRetry, retryInMs);
        if (!willRetry) return this.result("error", error);
        try {
          await sleep(retryInMs!, signal);
        } catch {
          // The backoff sleep rejects only when the turn's signal aborts: an interrupt.
          return this.result("interrupted");
        }
      }
    }
  }

  /** One attempt: streams the call's events to the caller and returns its `done`. */
  private async attempt(): Promise<Done> {
    const { config, hooks } = this;
    const request: ModelRequest = { ...config.request, messages: repairToolPairs(this.history, config.startedCalls) };
    let done: Done | null = null;
    for await (const event of config.provider.stream(request, config.signal)) {
      if (event.type === "done") done = event;
      else await hooks.emit({ type: "stream", event });
    }
    if (done === null) throw new ProviderError("streamIncomplete", "the model stream ended without its final event");
    return done;
  }

  /** What follows a finished message: tools, or the end of the turn (returned), or another call (null). */
  private async afterMessage(done: Done): Promise<LoopResult | null> {
    const { config, hooks } = this;
    this.modelCalls++;
    this.usage = addUsage(this.usage, done.usage);
    const message = done.message;
    const calls = toolCallsOf(message);
    if (done.stopReason === "refusal") {
      const error = refusalError(config.provider.id, done.stopDetail, calls.length);
      await hooks.emit({ type: "refused", message, usage: done.usage, error, detail: done.stopDetail ?? "refusal" });
      return this.result("refused", error);
    }
    this.history.push(message);
    this.plan = latestPlan([message]) ?? this.plan;
    await hooks.emit({ type: "assistantMessage", message, stopReason: done.stopReason, usage: done.usage });

    if (done.stopReason === "maxTokens") {
      // Never run tool calls from a truncated message; record why they did not run.
      for (const call of calls) await this.tools.appendResult(syntheticResult(call, TRUNCATED_RESULT), call);
      return this.result("maxTokens", null, TRUNCATED_NOTE);
    }
    if (calls.length > 0) return (await runToolCalls(this.tools, calls)) === "interrupted" ? this.result("interrupted") : null;
    if (hooks.hasSteering()) return null; // input arrived while the model was answering
    const reminder = await this.stopGuard(message);
    if (!reminder) return this.result("finalAnswer");
    this.history.push(reminder);
    await hooks.emit({ type: "reminded", message: reminder });
    return null;
  }

  /** Before a final answer: the plan reminder (once per turn), then the stop hooks (bounded); null lets the turn end. */
  private async stopGuard(answer: AssistantMessage): Promise<DeveloperMessage | null> {
    const { config, hooks } = this;
    if (config.planStopGuard !== false && !this.reminded) {
      const open = openSteps(this.plan);
      if (open.length > 0) {
        this.reminded = true;
        return planReminder(open);
      }
    }
    if (!hooks.beforeStop) return null;
    const mayContinue = this.continuations < MAX_STOP_CONTINUATIONS;
    const next = await hooks.beforeStop(answer, mayContinue, config.signal);
    if (!next || !mayContinue) return null;
    this.continuations++;
    return next;
  }
}
