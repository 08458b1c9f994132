/**
 * Running one assistant message's tool calls (DESIGN.md §3.2, §3.7, §3.8): consecutive read-only
 * calls concurrently (bounded), anything else alone and in order; results in call order, each
 * paired to its call. A tool's own failure becomes a result the model can read; a failure of the
 * host around it (ToolHostError: its item could not be recorded) ends the turn instead — after the
 * rest of its group has been stopped and has finished.
 */
import type { ToolCallBlock, ToolResultMessage } from "./messages.js";
import { syntheticResult } from "./repair.js";
import { ToolHostError, type LoopTool, type ToolOutcome } from "./tools.js";

export const INTERRUPTED_RESULT = "Tool call was not executed: the user interrupted the turn.";
export const STEERED_RESULT = "Tool call was not executed: the user sent new input before it started.";
export const NOT_RERUN_RESULT = "Tool call was interrupted by a server restart while it ran; it was not run again. Check its effects before retrying.";

export interface ToolRunContext {
  tools: ReadonlyMap<string, LoopTool>;
  maxParallelTools: number;
  signal: AbortSignal;
  hasSteering(): boolean;
  /** Appends one result to the loop's history and reports it (in call order). */
  appendResult(result: ToolResultMessage, call: ToolCallBlock): Promise<void>;
}

/** Returns "interrupted" when the user interrupted or cancelled at an approval prompt. */
export async function runToolCalls(ctx: ToolRunContext, calls: ToolCallBlock[], notRerun: ReadonlySet<string> = new Set()): Promise<"continue" | "interrupted"> {
  const { signal, tools } = ctx;
  let endTurn = false;
  let i = 0;
  while (i < calls.length) {
    // A group: one write call, or a run of consecutive read-only calls.
    const first = tools.get(calls[i]!.name);
    let j = i + 1;
    if (first?.readOnly && !notRerun.has(calls[i]!.id))
      while (j < calls.length && j - i < ctx.maxParallelTools && tools.get(calls[j]!.name)?.readOnly && !notRerun.has(calls[j]!.id)) j++;
    const group = calls.slice(i, j);
    i = j;

    let outcomes: ToolResultMessage[];
    if (group.every((c) => notRerun.has(c.id))) {
      outcomes = group.map((c) => syntheticResult(c, NOT_RERUN_RESULT));
    } else if (signal.aborted || endTurn) {
      outcomes = group.map((c) => syntheticResult(c, INTERRUPTED_RESULT));
    } else if (ctx.hasSteering()) {
      outcomes = group.map((c) => syntheticResult(c, STEERED_RESULT));
    } else {
      outcomes = await runGroup(ctx, group, () => (endTurn = true));
    }
    for (let k = 0; k < group.length; k++) await ctx.appendResult(outcomes[k]!, group[k]!);
  }
  return signal.aborted || endTurn ? "interrupted" : "continue";
}

/**
 * Runs one group (calls run together) to its end. A failure that ends the turn (the host could not
 * record an item) aborts the other calls of the group and waits until every one has stopped, so
 * nothing of the group runs or records after the turn has ended; then the first failure is thrown.
 */
async function runGroup(ctx: ToolRunContext, group: ToolCallBlock[], endTurn: () => void): Promise<ToolResultMessage[]> {
  if (group.length === 1) return [await runOne(ctx, group[0]!, ctx.signal, endTurn)];
  const stop = new AbortController();
  const forward = () => stop.abort(ctx.signal.reason);
  if (ctx.signal.aborted) forward();
  else ctx.signal.addEventListener("abort", forward, { once: true });
  let failure: { error: unknown } | null = null;
  try {
    const settled = await Promise.allSettled(
      group.map((call) =>
        runOne(ctx, call, stop.signal, endTurn).catch((error: unknown) => {
          failure ??= { error };
          stop.abort(error);
          throw error;
        }),
      ),
    );
    if (failure) throw (failure as { error: unknown }).error;
    return settled.map((s) => (s as PromiseFulfilledResult<ToolResultMessage>).value);
  } finally {
    ctx.signal.removeEventListener("abort", forward);
  }
}

async function runOne(ctx: ToolRunContext, call: ToolCallBlock, signal: AbortSignal, endTurn: () => void): Promise<ToolResultMessage> {
  const outcome = await executeOne(ctx.tools.get(call.name), call, signal);
  if (outcome.endTurn) endTurn();
  return { role: "toolResult", toolCallId: call.id, toolName: call.name, content: outcome.content, isError: outcome.isError };
}

async function executeOne(tool: LoopTool | undefined, call: ToolCallBlock, signal: AbortSignal): Promise<ToolOutcome> {
  if (!tool) return { content: [{ type: "text", text: `Unknown tool: ${call.name}` }], isError: true };
  try {
    return await tool.execute(call, signal);
  } catch (err) {
    if (err instanceof ToolHostError) throw err; // the side effect may have happened: never "the tool failed"
    // A tool bug becomes a result the model can read; the turn goes on.
    return { content: [{ type: "text", text: `Tool ${call.name} failed: ${err instanceof Error ? err.message : String(err)}` }], isError: true };
  }
}
