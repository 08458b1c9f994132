/**
 * The one tool host (DESIGN.md §2 "One tool host", §4): every tool that acts — built-in, a
 * client's dynamic tool, (next) an MCP server's — is a source that only *plans* a call and
 * *executes* it; this wrapper owns everything around that, in one order for all of them:
 *
 *   parse arguments → plan (checks; no item yet for a call that cannot run) → allocate the item id
 *   → record item/started → the user's preToolUse hooks (a veto closes the item with its reason)
 *   → policy/approval gate → execute → record item/completed
 *
 * (postToolUse hooks, preToolUse for tools without an item, and the call-id scope items are recorded
 * under, are added by the runtime around each LoopTool: src/runtime/tool-host.ts.)
 *
 * Recording goes through the ToolContext, whose runtime implementation throws ToolHostError when
 * the store fails. That error is never caught here: the side effect may have happened, so it must
 * not become "the tool failed" for the model (the loop ends the turn instead). A tool's own
 * exception after its item started completes the item as failed and is reported to the model.
 */
import type { z } from "zod";
import type { ToolCallBlock } from "../agent/messages.js";
import { hookBlockedOutcome, hookBlockedText, textOutcome, ToolHostError, type LoopTool, type ToolOutcome } from "../agent/tools.js";
import type { ThreadItem } from "../protocol/items.js";
import type { Decision } from "./approval.js";
import type { ApprovalAnswer, ApprovalRequest, ToolContext } from "./context.js";
import { inputSchemaOf, parseToolArgs } from "./define.js";

/** An item as a tool drafts it; the host adds `id` and `startedAtMs`. */
export type ItemDraft = Omit<ThreadItem, "id" | "startedAtMs" | "completedAtMs"> & Record<string, unknown>;

/** The item's final fields (status, output …) and what the model is told. */
export interface ToolResult {
  patch: Record<string, unknown>;
  outcome: ToolOutcome;
  /** Runs once the completed item is recorded (e.g. announcing the turn's diff after the file change). */
  afterCompleted?: () => Promise<void>;
}

/** What a running tool may use from the host. */
export interface RunHandle {
  readonly itemId: string;
  readonly startedAtMs: number;
  /** The recorded item (a tool may fill in fields as it runs, e.g. processId). */
  readonly item: Record<string, unknown>;
  /** Asks the user again during execution (e.g. to run a command outside the sandbox). */
  ask(reason: string): Promise<ApprovalAnswer>;
}

export interface ToolAction {
  /** The item recorded before anything happens; null for tools that record none (reads, the plan). */
  item: ItemDraft | null;
  /** The policy's verdict before running. */
  gate: Decision;
  /** The approval question (for gate "ask", and for RunHandle.ask). */
  approval?(itemId: string, startedAtMs: number, reason: string): ApprovalRequest;
  /** The user chose acceptForSession. */
  acceptedForSession?(): void;
  /** The user chose acceptWithExecpolicyAmendment: save the proposed rule (a storage failure propagates). */
  acceptedWithRule?(): Promise<void>;
  /** Final state when the call does not run: the user declined or cancelled, or the policy refused. */
  notRun(why: "decline" | "cancel" | "refuse", reason: string, elapsedMs: number): ToolResult;
  execute(run: RunHandle, signal: AbortSignal): Promise<ToolResult>;
}

export interface HostedToolDefinition<S extends z.ZodType> {
  name: string;
  description: string;
  /** Argument schema; the JSON Schema the model sees comes from it. */
  schema: S;
  /** Read-only hint: may run concurrently with read-only neighbours. */
  readOnly: boolean;
  /** Checks and prepares the call; a ToolOutcome answers at once (nothing recorded, nothing run). */
  plan(args: z.infer<S>, call: ToolCallBlock, signal: AbortSignal): Promise<ToolAction | ToolOutcome>;
}

/** A source whose schema is not ours to parse (a client's dynamic tool, an MCP tool). */
export interface RawHostedToolDefinition {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
  readOnly: boolean;
  plan(call: ToolCallBlock, signal: AbortSignal): Promise<ToolAction | ToolOutcome>;
}

const isAction = (v: ToolAction | ToolOutcome): v is ToolAction => "execute" in v;
const errorText = (err: unknown) => (err instanceof Error ? err.message : String(err));

export function hostTool<S extends z.ZodType>(def: HostedToolDefinition<S>, ctx: ToolContext): LoopTool {
  return hostRawTool(
    {
      name: def.name,
      description: def.description,
      inputSchema: inputSchemaOf(def.schema),
      readOnly: def.readOnly,
      plan: async (call, signal) => {
        const args = parseToolArgs(def.name, call.arguments, def.schema);
        return args.ok ? def.plan(args.value, call, signal) : textOutcome(args.error, true);
      },
    },
    ctx,
  );
}

export function hostRawTool(def: RawHostedToolDefinition, ctx: ToolContext): LoopTool {
  return {
    spec: { name: def.name, description: def.description, inputSchema: def.inputSchema },
    readOnly: def.readOnly,
    gatesPreToolUse: true,
    async execute(call, signal) {
      let action: ToolAction | ToolOutcome;
      try {
        action = await def.plan(call, signal);
      } catch (err) {
        if (err instanceof ToolHostError) throw err;
        return textOutcome(`${def.name} failed: ${errorText(err)}`, true);
      }
      if (!isAction(action)) return action;
      return runAction(def.name, call, action, ctx, signal);
    },
  };
}

async function runAction(name: string, call: ToolCallBlock, action: ToolAction, ctx: ToolContext, signal: AbortSignal): Promise<ToolOutcome> {
  const startedAtMs = Date.now();
  const itemId = ctx.newItemId();
  const item: Record<string, unknown> | null = action.item ? { ...action.item, id: itemId, startedAtMs } : null;
  if (item) await ctx.startItem(item as ThreadItem); // a store failure propagates
  const finish = async (r: ToolResult): Promise<ToolOutcome> => {
    if (item) await ctx.completeItem({ ...item, ...r.patch, completedAtMs: Date.now() } as ThreadItem); // propagates
    await r.afterCompleted?.();
    return r.outcome;
  };
  const ask = (reason: string) => {
    if (!action.approval) throw new Error(`${name} cannot ask for approval`);
    return ctx.requestApproval(action.approval(itemId, startedAtMs, reason), signal);
  };

  const veto = ctx.preToolUse ? await ctx.preToolUse(name, call, signal) : null; // a recording failure propagates
  if (veto !== null) {
    const text = hookBlockedText(veto);
    const r = action.notRun("refuse", `a preToolUse hook blocked it: ${veto}`, Date.now() - startedAtMs);
    // A command item shows the reason as its output; other items carry it in their own fields.
    const patch = item && "aggregatedOutput" in item ? { ...r.patch, aggregatedOutput: text } : r.patch;
    return finish({ patch, outcome: hookBlockedOutcome(veto) });
  }

  let gate = action.gate;
  if (gate.action === "ask") {
    const answer = await ask(gate.reason);
    if (answer === "acceptForSession") action.acceptedForSession?.();
    if (answer === "acceptWithExecpolicyAmendment") await action.acceptedWithRule?.();
    if (answer === "decline" || answer === "cancel") {
      const r = action.notRun(answer, gate.reason, Date.now() - startedAtMs);
      return finish(answer === "cancel" ? { ...r, outcome: { ...r.outcome, endTurn: true } } : r);
    }
    gate = { action: "run" };
  }
  if (gate.action === "refuse") return finish(action.notRun("refuse", gate.reason, Date.now() - startedAtMs));

  let result: ToolResult;
  try {
    result = await action.execute({ itemId, startedAtMs, item: item ?? {}, ask }, signal);
  } catch (err) {
    if (err instanceof ToolHostError) throw err;
    result = { patch: { status: "failed" }, outcome: textOutcome(`${name} failed: ${errorText(err)}`, true) };
  }
  return finish(result);
}
