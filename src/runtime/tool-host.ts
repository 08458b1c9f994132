/**
 * The runtime side of the one tool host (src/tools/host.ts is the tool side): which tools a turn
 * offers — each source (built-in, the client's dynamic tools, next MCP servers) contributes
 * LoopTools with a read-only hint — and the ToolContext they all record through.
 *
 * Every call runs:
 *   - in the scope of its call id, so items are recorded with the call they belong to (how a
 *     restarted process, and the history repair, match items to the model's calls);
 *   - between the user's hooks: preToolUse (a veto; tools with an item run it through the host,
 *     ToolContext.preToolUse, so the vetoed call is its item closed with the reason) and postToolUse
 *     (observes; its failure is reported as the hook's, never as the tool's);
 *   - against a context whose recording failures are ToolHostError: never a tool result.
 */
import type { ToolCallBlock } from "../agent/messages.js";
import { ToolHostError, type LoopTool } from "../agent/tools.js";
import { uuidv7 } from "../ids.js";
import { policyOfMode } from "../sandbox/policy.js";
import { builtinTools } from "../tools/builtin.js";
import { shellTool } from "../tools/shell.js";
import type { ToolContext } from "../tools/context.js";
import { dynamicTool } from "../tools/dynamic.js";
import { currentCall, type ActiveTurn } from "./active-turn.js";
import { requestApproval } from "./approvals.js";
import type { ItemRecorder } from "./item-recorder.js";
import type { ToolSource, TurnDeps } from "./turn-deps.js";
import type { LoadedThread } from "./loaded-thread.js";
import { postToolUse, preToolUse, vetoOutcome } from "./turn-hooks.js";

export type { ToolSource } from "./turn-deps.js";

export const builtinSource: ToolSource = { name: "builtin", tools: (ctx) => builtinTools(ctx) };
// thread/start rejects dynamic tools named like built-ins, so nothing is replaced.
export const dynamicSource: ToolSource = { name: "dynamic", tools: (ctx, thread) => thread.record.dynamicTools.map((spec) => dynamicTool(spec, ctx)) };

export const DEFAULT_SOURCES: readonly ToolSource[] = [builtinSource, dynamicSource];

/** Runs a recording step; a failure becomes ToolHostError (the turn fails, the model is not told). */
async function recording<T>(what: string, step: () => Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (err) {
    if (err instanceof ToolHostError) throw err;
    throw new ToolHostError(`could not record ${what}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
}

export function toolsFor(deps: TurnDeps, recorder: ItemRecorder, thread: LoadedThread, turn: ActiveTurn, sources: readonly ToolSource[] = DEFAULT_SOURCES): Map<string, LoopTool> {
  const ctx = toolContext(deps, recorder, thread, turn);
  const tools = new Map<string, LoopTool>();
  for (const source of sources) for (const tool of source.tools(ctx, thread)) if (!tools.has(tool.spec.name)) tools.set(tool.spec.name, tool);
  const hooks = deps.hooks;
  for (const [name, tool] of tools) {
    tools.set(name, {
      ...tool,
      execute: (call, signal) =>
        currentCall.run(call.id, async () => {
          if (hooks && !tool.gatesPreToolUse) {
            const vetoed = await vetoOutcome(deps, hooks, thread, turn, name, call, signal);
            if (vetoed) return vetoed;
          }
          const outcome = await tool.execute(call, signal);
          if (hooks && !outcome.blockedByHook) await postToolUse(deps, hooks, thread, turn, name, call, outcome, signal);
          return outcome;
        }),
    });
  }
  return tools;
}

/**
 * The `shell` tool for the user's own `!command` (thread/shellCommand): the thread's sandbox
 * exactly as the model's commands get it, but nothing is asked (the user typed it) — so never a
 * run outside the sandbox either — and no hooks (they govern the model's tool calls).
 */
export function userShellTool(deps: TurnDeps, recorder: ItemRecorder, thread: LoadedThread, turn: ActiveTurn, timeoutMs: number): LoopTool {
  const ctx: ToolContext = { ...toolContext(deps, recorder, thread, turn), approvalPolicy: "never", preToolUse: undefined };
  const ms = Math.max(1, timeoutMs); // 0 asks for an immediate timeout, not none
  return shellTool(ctx, { source: "userShell", defaultTimeoutMs: ms, maxTimeoutMs: ms });
}

function toolContext(deps: TurnDeps, recorder: ItemRecorder, thread: LoadedThread, turn: ActiveTurn): ToolContext {
  const { runtime } = deps;
  const base = { threadId: thread.id, turnId: turn.id };
  return {
    ...base,
    cwd: thread.record.cwd,
    sandbox: thread.record.sandbox,
    sandboxPolicy: thread.record.sandboxPolicy ?? policyOfMode(thread.record.sandbox),
    commands: deps.commands,
    approvalPolicy: thread.record.approvalPolicy,
    sessionApprovals: thread.sessionApprovals,
    execPolicy: {
      // The thread owner's rules (docs/teams.md).
      patterns: () => recording("the approval rules", async () => (await deps.execPolicy.list(thread.record.userId)).map((r) => r.pattern)),
      add: (pattern) => recording("an approval rule", async () => void (await deps.execPolicy.add(pattern, thread.id, thread.record.userId))),
    },
    newItemId: () => {
      // A restored turn re-runs the call that waited on approval under its recorded item id.
      const call = currentCall.getStore();
      const restored = call === undefined ? undefined : turn.restoredItems.get(call);
      if (restored === undefined) return uuidv7();
      turn.restoredItems.delete(call!);
      turn.alreadyRecorded.add(restored);
      return restored;
    },
    startItem: (item) => (turn.alreadyRecorded.delete(item.id) ? Promise.resolve() : recording("the start of a tool item", () => recorder.started(thread, turn, item))),
    completeItem: (item) => recording("a completed tool item", () => recorder.completed(thread, turn, [item])),
    outputDelta: (itemId, delta) => runtime.publishLive(thread, "item/commandExecution/outputDelta", { ...base, itemId, delta }),
    mcpProgress: (itemId, message) => runtime.publishLive(thread, "item/mcpToolCall/progress", { ...base, itemId, message }),
    diffUpdated: (diff) => recording("the turn diff", async () => void (await runtime.commit(thread, [{ method: "turn/diff/updated", params: { ...base, diff } }]))),
    planUpdated: (explanation, plan) =>
      recording("the plan", async () => void (await runtime.commit(thread, [{ method: "turn/plan/updated", params: { ...base, explanation, plan } }]))),
    requestApproval: (request, signal) => recording("an approval request", () => requestApproval(deps, thread, turn, request, signal)),
    askClients: (method, params, signal) => thread.ask(method, params, signal),
    ...(deps.hooks ? { preToolUse: (tool: string, call: ToolCallBlock, signal: AbortSignal) => preToolUse(deps, deps.hooks!, thread, turn, tool, call, signal) } : {}),
  };
}
