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
 * 4. final answer, truncation (max tokens: tool calls are NOT run), budget (max model calls),
 *    interrupt and error are distinct stop reasons;
 * 5. transient failures are retried with backoff honouring Retry-After; 400/401/403/404 and user
 *    cancels are not; a retry repeats only the model call, never a tool;
 * 6. context overflow calls the compaction hook (once per model call), then fails; a model that
 *    ends with open plan steps is reminded once per turn (the stop-guard);
 * 7. consecutive read-only tools run concurrently (bounded); anything else runs alone, in order;
 * 8. steering input is injected before the next model call and cancels tools not yet started;
 * 9. it always returns exactly one result (the caller's single terminal event), even on a bug.
 *
 * The loop owns the turn's history: it starts from `config.history` and every message it appends
 * is reported by exactly one event (assistantMessage, toolResult, steered, reminded); `compacted`
 * reports a replacement. The caller persists those and keeps no copy of its own in step.
 */
import { addUsage, emptyUsage, type AssistantMessage, type DeveloperMessage, type Message, type ToolCallBlock, type ToolResultMessage, type Usage, type UserMessage } from "./messages.js";
import { openPlanSteps, planReminder } from "./plan-guard.js";
import { repairToolPairs, syntheticResult } from "./repair.js";
import { retryDelayMs, sleep, type RetryPolicy } from "./retry.js";
import { runToolCalls } from "./tool-calls.js";
import type { LoopTool } from "./tools.js";
import { ProviderError, type ModelProvider, type ModelRequest, type ProviderStopReason, type ProviderStreamEvent } from "../providers/types.js";

export { INTERRUPTED_RESULT, NOT_RERUN_RESULT, STEERED_RESULT } from "./tool-calls.js";

export type LoopStopReason = "finalAnswer" | "maxTokens" | "maxTurns" | "interrupted" | "error";

export type LoopEvent =
  /** A model call (or a retry of one) is about to start. */
  | { type: "modelCallStart"; call: number; attempt: number }
  /** A streamed delta of the current attempt. */
  | { type: "stream"; event: Exclude<ProviderStreamEvent, { type: "done" }> }
  /** The current attempt failed; anything it streamed is void. `attempt` is 0-based. */
  | { type: "modelCallFailed"; error: ProviderError; willRetry: boolean; retryInMs: number | null; attempt: number; maxRetries: number }
  /** A finished assistant message, appended to the history. */
  | { type: "assistantMessage"; message: AssistantMessage; stopReason: ProviderStopReason; usage: Usage }
  /** One tool result, appended to the history (emitted in call order). */
  | { type: "toolResult"; result: ToolResultMessage; call: ToolCallBlock }
  /** Steering input appended to the history before the next model call. */
  | { type: "steered"; messages: UserMessage[] }
  /** The plan stop-guard's reminder, appended to the history. */
  | { type: "reminded"; message: DeveloperMessage }
  /** The history was replaced by a compacted one (context overflow). */
  | { type: "compacted"; history: Message[] };

export interface LoopHooks {
  emit(event: LoopEvent): Promise<void> | void;
  /** Drains steering input queued since the last call. */
  takeSteering(): UserMessage[];
  hasSteering(): boolean;
  /** Context overflow: return a smaller history to retry with, or null to give up. */
  compact?(history: readonly Message[], signal: AbortSignal): Promise<Message[] | null>;
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
   * Resuming a turn a previous process left waiting (on an approval): the last assistant
   * message's calls that have no result yet, run before the first model call. Calls in
   * `notRerun` had started before the restart; they get a "not executed again" result instead
   * (a tool whose side effects may have happened is never run twice).
   */
  resumeToolCalls?: { calls: ToolCallBlock[]; notRerun: ReadonlySet<string> };
}

export interface LoopResult {
  stopReason: LoopStopReason;
  /** Set for stopReason "error" (and for an overflow that compaction could not fix). */
  error: Error | null;
  /** Set when the turn ended for a reason the user should read (truncation, budget). */
  note: string | null;
  modelCalls: number;
  usage: Usage;
}

export const TRUNCATED_RESULT = "Tool call was not executed: the model's output was cut off by the token limit.";
export const TRUNCATED_NOTE = "The model's output was cut off by the output token limit; the answer is incomplete.";

const toolCallsOf = (m: AssistantMessage) => m.content.filter((b): b is ToolCallBlock => b.type === "toolCall");

function asProviderError(err: unknown, signal: AbortSignal): ProviderError {
  if (signal.aborted) return new ProviderError("aborted", "interrupted", { cause: err });
  if (err instanceof ProviderError) return err;
  return new ProviderError("streamIncomplete", err instanceof Error ? err.message : String(err), { cause: err });
}

export async function runAgentLoop(config: LoopConfig, hooks: LoopHooks): Promise<LoopResult> {
  let usage = emptyUsage();
  let modelCalls = 0;
  const result = (stopReason: LoopStopReason, error: Error | null = null, note: string | null = null): LoopResult => ({ stopReason, error, note, modelCalls, usage });
  try {
    let history: Message[] = [...config.history];
    /** Where this turn's own messages start (the stop-guard reads the plan from them). */
    let turnStart = history.length;
    const { signal } = config;
    let reminded = false;
    const tools = {
      tools: config.tools,
      maxParallelTools: config.maxParallelTools,
      signal,
      hasSteering: () => hooks.hasSteering(),
      appendResult: async (r: ToolResultMessage, call: ToolCallBlock) => {
        history.push(r);
        await hooks.emit({ type: "toolResult", result: r, call });
      },
    };

    if (config.resumeToolCalls) {
      const { calls, notRerun } = config.resumeToolCalls;
      if ((await runToolCalls(tools, calls, notRerun)) === "interrupted") return result("interrupted");
    }

    for (;;) {
      if (signal.aborted) return result("interrupted");
      const steer = hooks.takeSteering();
      if (steer.length > 0) {
        history.push(...steer);
        await hooks.emit({ type: "steered", messages: steer });
      }
      if (modelCalls >= config.maxModelCalls) {
        return result("maxTurns", null, `Stopped after ${modelCalls} model calls (the per-turn limit); the task may be unfinished.`);
      }

      // ---- one model call, with retries ----
      let done: Extract<ProviderStreamEvent, { type: "done" }> | null = null;
      let compactedThisCall = false;
      for (let attempt = 0; done === null; attempt++) {
        await hooks.emit({ type: "modelCallStart", call: modelCalls, attempt });
        try {
          const request: ModelRequest = { ...config.request, messages: repairToolPairs(history, config.startedCalls) };
          for await (const event of config.provider.stream(request, signal)) {
            if (event.type === "done") done = event;
            else await hooks.emit({ type: "stream", event });
          }
          if (done === null) throw new ProviderError("streamIncomplete", "the model stream ended without its final event");
        } catch (raw) {
          done = null;
          // Not a model failure (a hook's emit threw, or a provider bug): never retried, the turn
          // fails with the original error (the outer catch).
          if (!(raw instanceof ProviderError) && !signal.aborted) throw raw;
          const error = asProviderError(raw, signal);
          const failed = (willRetry: boolean, retryInMs: number | null) =>
            hooks.emit({ type: "modelCallFailed", error, willRetry, retryInMs, attempt, maxRetries: config.retry.maxRetries });
          if (error.kind === "aborted") {
            await failed(false, null);
            return result("interrupted");
          }
          if (error.kind === "contextOverflow" && !compactedThisCall && hooks.compact) {
            compactedThisCall = true;
            await failed(true, 0);
            const smaller = await hooks.compact(history, signal);
            if (signal.aborted) return result("interrupted");
            if (smaller) {
              history = smaller;
              turnStart = Math.min(turnStart, history.length);
              await hooks.emit({ type: "compacted", history: smaller });
              attempt--; // compaction is not a retry of a transient failure
              continue;
            }
          }
          const willRetry = error.retryable && attempt < config.retry.maxRetries;
          const retryInMs = willRetry ? retryDelayMs(config.retry, attempt + 1, error.retryAfterMs) : null;
          await failed(willRetry, retryInMs);
          if (!willRetry) return result("error", error);
          try {
            await sleep(retryInMs!, signal);
          } catch {
            return result("interrupted");
          }
        }
      }
      modelCalls++;
      usage = addUsage(usage, done.usage);
      const message = done.message;
      history.push(message);
      await hooks.emit({ type: "assistantMessage", message, stopReason: done.stopReason, usage: done.usage });

      const calls = toolCallsOf(message);
      if (done.stopReason === "maxTokens") {
        // Never run tool calls from a truncated message; record why they did not run.
        for (const call of calls) await tools.appendResult(syntheticResult(call, TRUNCATED_RESULT), call);
        return result("maxTokens", null, TRUNCATED_NOTE);
      }
      if (calls.length === 0) {
        if (hooks.hasSteering()) continue; // input arrived while the model was answering
        if (config.planStopGuard !== false && !reminded) {
          const open = openPlanSteps(history.slice(turnStart));
          if (open.length > 0) {
            reminded = true;
            const reminder = planReminder(open);
            history.push(reminder);
            await hooks.emit({ type: "reminded", message: reminder });
            continue;
          }
        }
        return result("finalAnswer");
      }
      if ((await runToolCalls(tools, calls)) === "interrupted") return result("interrupted");
    }
  } catch (err) {
    // Whatever threw after a user interrupt (a hook rejecting on the signal) is the interrupt.
    if (config.signal.aborted) return result("interrupted");
    return result("error", err instanceof Error ? err : new Error(String(err)));
  }
}
