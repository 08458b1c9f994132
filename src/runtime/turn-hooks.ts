/**
 * The user's hooks inside the record (issue 32): every hook run of a turn is recorded and announced
 * as Codex's `hook/started` / `hook/completed`; a vetoed tool call is the call's own item, closed
 * with the veto's reason (src/tools/host.ts, through ToolContext.preToolUse); a stop hook that sends
 * the model back to work leaves a `hookPrompt` item with its message. A hook's own failure is
 * reported as the hook's: a postToolUse hook that fails never turns into "the tool failed" after
 * the tool ran. Recording failures are store failures (ToolHostError on a tool's path).
 */
import type { AssistantMessage, DeveloperMessage, ToolCallBlock } from "../agent/messages.js";
import { hookBlockedOutcome, ToolHostError, type ToolOutcome } from "../agent/tools.js";
import type { HookReporter, HookRunner, ToolCallFacts } from "../hooks/runner.js";
import { uuidv7 } from "../ids.js";
import type { HookRunSummary } from "../protocol/hooks.js";
import type { ThreadItem } from "../protocol/items.js";
import type { ActiveTurn } from "./active-turn.js";
import type { ItemRecorder } from "./item-recorder.js";
import type { TurnDeps } from "./turn-deps.js";
import type { LoadedThread } from "./loaded-thread.js";

/** Tag of the developer message a stop hook's "continue" becomes in the model history. */
export const STOP_HOOK_TAG = "stop_hook_feedback";

/** Records each hook run of `turn` before announcing it. */
export function hookReporter(deps: TurnDeps, thread: LoadedThread, turn: ActiveTurn): HookReporter {
  const commit = (method: "hook/started" | "hook/completed", run: HookRunSummary) =>
    deps.runtime.commit(thread, [{ method, params: { threadId: thread.id, turnId: turn.id, run } }]).then(() => undefined);
  return { started: (run) => commit("hook/started", run), completed: (run) => commit("hook/completed", run) };
}

/** The same reporter, whose recording failures are ToolHostError (the turn fails; the model is not told a tool failed). */
function toolPathReporter(deps: TurnDeps, thread: LoadedThread, turn: ActiveTurn): HookReporter {
  const inner = hookReporter(deps, thread, turn);
  const guard = async (step: () => Promise<void>) => {
    try {
      await step();
    } catch (err) {
      throw err instanceof ToolHostError ? err : new ToolHostError(`could not record a hook run: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    }
  };
  return { started: (run) => guard(() => inner.started(run)), completed: (run) => guard(() => inner.completed(run)) };
}

function factsOf(thread: LoadedThread, turn: ActiveTurn, tool: string, call: ToolCallBlock): ToolCallFacts {
  return { threadId: thread.id, turnId: turn.id, cwd: thread.record.cwd, tool, callId: call.id, arguments: call.arguments };
}

/** The preToolUse verdict for a call: the reason it is blocked, or null. */
export function preToolUse(deps: TurnDeps, hooks: HookRunner, thread: LoadedThread, turn: ActiveTurn, tool: string, call: ToolCallBlock, signal: AbortSignal): Promise<string | null> {
  return hooks.beforeTool(factsOf(thread, turn, tool, call), signal, toolPathReporter(deps, thread, turn));
}

/** Runs the preToolUse hooks for a tool that records no item; the outcome to answer with when they block. */
export async function vetoOutcome(deps: TurnDeps, hooks: HookRunner, thread: LoadedThread, turn: ActiveTurn, tool: string, call: ToolCallBlock, signal: AbortSignal): Promise<ToolOutcome | null> {
  const veto = await preToolUse(deps, hooks, thread, turn, tool, call, signal);
  return veto === null ? null : hookBlockedOutcome(veto);
}

/** Runs the postToolUse hooks; a hook that fails is reported as its own failure, never the tool's. */
export async function postToolUse(deps: TurnDeps, hooks: HookRunner, thread: LoadedThread, turn: ActiveTurn, tool: string, call: ToolCallBlock, outcome: ToolOutcome, signal: AbortSignal): Promise<void> {
  try {
    await hooks.afterTool({ ...factsOf(thread, turn, tool, call), outcome }, signal, toolPathReporter(deps, thread, turn));
  } catch (err) {
    if (err instanceof ToolHostError) throw err;
    // A bug around the hook (not the hook process): still the hook's failure, not the tool's.
    deps.log.warn({ err, threadId: thread.id, tool }, "postToolUse hook failed");
  }
}

const answerText = (m: AssistantMessage | null) => (m ? m.content.flatMap((b) => (b.type === "text" ? [b.text] : [])).join("") : null);

/**
 * The stop hooks as the model ends a turn with `answer`: null to let it end, or the message that
 * sends it back to work (its hookPrompt item recorded first). Observe-only when `mayContinue` is false.
 */
export async function stopHooks(
  deps: TurnDeps,
  recorder: ItemRecorder,
  thread: LoadedThread,
  turn: ActiveTurn,
  end: { status: string; stopReason: string; error: string | null; answer: AssistantMessage | null },
  mayContinue: boolean,
  signal: AbortSignal,
): Promise<DeveloperMessage | null> {
  const hooks = deps.hooks;
  if (!hooks?.has("stop")) return null;
  const facts = {
    threadId: thread.id,
    turnId: turn.id,
    cwd: thread.record.cwd,
    status: end.status,
    stopReason: end.stopReason,
    error: end.error,
    lastAssistantMessage: answerText(end.answer),
    stopHookActive: turn.stopHookContinued,
  };
  const next = await hooks.stop(facts, mayContinue, signal, hookReporter(deps, thread, turn));
  if (!next) {
    turn.stopHooksRan = true; // they let the turn end: its end does not run them again
    return null;
  }
  turn.stopHookContinued = true;
  const now = Date.now();
  const item: ThreadItem = { type: "hookPrompt", id: uuidv7(), fragments: [{ text: next.text, hookRunId: next.runId }], startedAtMs: now, completedAtMs: now };
  await recorder.started(thread, turn, { ...item, completedAtMs: null });
  await recorder.completed(thread, turn, [item]);
  return { role: "developer", content: [{ type: "text", text: `<${STOP_HOOK_TAG}>\nA stop hook asks you to go on before ending your turn:\n${next.text}\n</${STOP_HOOK_TAG}>` }] };
}
