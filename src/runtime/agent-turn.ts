/**
 * The agent turn: turn/start (recorded with its user message and any settings change), the agent
 * loop's run (after an automatic compaction when the context nears the window), and the restore
 * of a turn that was waiting on an approval when the previous process died (recovery.ts).
 *
 * Wire order for a turn (Codex v2): thread/status/changed (active) → turn/started →
 * item/started + item/completed (userMessage) → per model output item/started → deltas →
 * item/completed → thread/tokenUsage/updated → … → thread/status/changed (idle) → turn/completed.
 */
import path from "node:path";
import { runAgentLoop, type LoopResult } from "../agent/loop.js";
import type { AssistantMessage, Message, ToolCallBlock } from "../agent/messages.js";
import { latestPlan } from "../agent/plan-guard.js";
import { environmentContext } from "../agent/prompt.js";
import { uuidv7 } from "../ids.js";
import type { ThreadItem } from "../protocol/items.js";
import type { Turn } from "../protocol/thread.js";
import type { TurnStartParams } from "../protocol/turn.js";
import type { ThreadRecord, TurnRecord } from "../store/records.js";
import { ActiveTurn } from "./active-turn.js";
import { CompactionError } from "./compaction.js";
import { threadMessages, type HistoryEntry } from "./history.js";
import { completedEvent } from "./item-recorder.js";
import type { LoadedThread } from "./loaded-thread.js";
import type { RestorableTurn } from "./recovery.js";
import { SeqCounter } from "./seq.js";
import { applyOverrides, environmentOf, settingsMessage } from "./settings.js";
import { inIssueOrder } from "../store/transaction.js";
import type { Subscriber } from "./thread-types.js";
import { TurnRequestError } from "./turn-errors.js";
import { stopHooks } from "./turn-hooks.js";
import { assertCwdExists, userItemStarted, type TurnOpening, type TurnParts } from "./turn-lifecycle.js";
import { turnModel, type TurnModel } from "./turn-model.js";
import { turnView } from "./turn-view.js";
import { previewOf, toUserMessage } from "./user-input.js";

/** The calls of a restored turn's last model message that run again (see `restore`). */
type ResumeToolCalls = { calls: ToolCallBlock[]; notRerun: ReadonlySet<string> };

export class AgentTurns {
  constructor(private readonly parts: TurnParts) {}

  async start(p: TurnStartParams, requester: Subscriber, responded: Promise<void>): Promise<{ turn: Turn }> {
    const { runtime, turns } = this.parts.deps;
    const thread = await runtime.load(p.threadId);
    runtime.unrecorded?.assertRecorded(thread.id); // the last ending must be recorded (and told) first
    if (p.clientUserMessageId) {
      const same = await turns.findTurnByClientMessageId(thread.id, p.clientUserMessageId);
      if (same) {
        runtime.subscribe(thread, requester);
        return { turn: turnView(same, null) };
      }
    }
    const running = thread.activeTurn;
    if (running instanceof ActiveTurn && p.clientUserMessageId && running.clientUserMessageId === p.clientUserMessageId) {
      // The same message again while the first turn/start is still recording it (a client
      // retrying over a flaky link): the lookup above could not see it yet. Answer with that
      // turn once it is recorded (or with the first call's error), not with "a turn is running".
      const view = await running.recorded;
      runtime.subscribe(thread, requester);
      return { turn: view };
    }
    if (running) throw new TurnRequestError(`a turn is already running on thread ${thread.id} (turn ${running.id})`);
    const turn = await this.parts.lifecycle.begin(thread, requester, (t, a) => this.run(t, a), {
      clientUserMessageId: p.clientUserMessageId ?? null,
      check: () => assertCwdExists(p.cwd ? path.resolve(thread.record.cwd, p.cwd) : thread.record.cwd),
      opening: (active, record, now) => this.opening(thread, active, record, now, p),
      after: responded,
    });
    return { turn };
  }

  /** What turn/start records with the turn: the settings it changes, its user message and item. */
  private async opening(thread: LoadedThread, turn: ActiveTurn, turnRecord: TurnRecord, now: number, p: TurnStartParams): Promise<TurnOpening> {
    const { runtime, turns, historyLog, settings } = this.parts.deps;
    const before = thread.record;
    const after = applyOverrides(before, p);
    const userMessage = await toUserMessage(p.input, after.cwd);

    const newEntries: HistoryEntry[] = [];
    if (thread.entries!.length === 0) newEntries.push({ kind: "message", turnOrdinal: null, message: environmentContext(environmentOf(after, settings.shell)) });
    else {
      const changed = settingsMessage(before, after, settings.shell);
      if (changed) newEntries.push({ kind: "message", turnOrdinal: null, message: changed });
    }
    newEntries.push({ kind: "message", turnOrdinal: turn.ordinal, message: userMessage });

    const userItem: ThreadItem = { type: "userMessage", id: uuidv7(), clientId: p.clientUserMessageId ?? null, content: p.input, startedAtMs: now, completedAtMs: now };
    const preview = before.preview || previewOf(p.input);
    const writeHistory = historyLog.stage(thread, turn.id, newEntries);
    const updated: ThreadRecord = { ...after, preview, systemError: false, updatedAtMs: now };
    return {
      events: [userItemStarted(thread, turn, userItem, now), completedEvent(thread, turn, userItem, now)],
      // Pipelined (one round trip for the statements, see EventLog.record).
      write: (tx) =>
        inIssueOrder([
          runtime.store.updateThread(tx, thread.id, {
            model: updated.model,
            modelProvider: updated.modelProvider,
            reasoningEffort: updated.reasoningEffort,
            cwd: updated.cwd,
            approvalPolicy: updated.approvalPolicy,
            sandbox: updated.sandbox,
            sandboxPolicy: updated.sandboxPolicy,
            preview,
            systemError: false,
            updatedAtMs: now,
          }),
          turns.insertTurn(tx, turnRecord),
          this.parts.recorder.insert(tx, thread, turn, userItem, "completed", now),
          writeHistory(tx),
        ]),
      recorded: () => {
        thread.record = updated;
      },
    };
  }

  /**
   * Restores a turn that was waiting on an approval when the previous process died (see
   * recovery.ts): the calls of its last model message that have no result run again — the one
   * that waited asks again under its recorded item id, calls that had started are not re-run —
   * and then the loop goes on as usual. The request reaches clients when they resume the thread.
   */
  async restore(r: RestorableTurn, epoch?: number): Promise<void> {
    const { runtime, turns, historyLog } = this.parts.deps;
    const thread = await runtime.load(r.threadId);
    const record = await turns.getTurn(r.turnId);
    if (!record || thread.activeTurn) return;
    if (epoch !== undefined) {
      // The sweeper took the lease for this restore: adopt it, with the thread as stored now.
      const row = await runtime.store.getThread(r.threadId);
      if (!row) return;
      thread.lease = { epoch };
      thread.heldEpoch = epoch;
      thread.record = row;
      thread.seq = new SeqCounter(row.seqReserved);
      thread.entries = null;
      thread.history = null;
    }
    await historyLog.ensure(thread);
    const turn = new ActiveTurn(record.id, record.startedAtMs, record.clientUserMessageId);
    turn.ordinal = record.ordinal;
    turn.nextItemOrdinal = await turns.countItems(record.id);
    turn.restoredItems.set(r.callId, r.itemId);
    turn.messages = null; // its earlier items were recorded by the previous process: summarised from the store
    thread.activeTurn = turn;
    const history = historyLog.context(thread);
    let last = history.length - 1;
    while (last >= 0 && history[last]!.role !== "assistant") last--;
    const assistant = history[last] as AssistantMessage | undefined;
    const answered = new Set(history.slice(last + 1).flatMap((m) => (m.role === "toolResult" ? [m.toolCallId] : [])));
    const calls = (assistant?.content ?? []).filter((b): b is ToolCallBlock => b.type === "toolCall" && !answered.has(b.id));
    const started = await turns.startedCallIds(record.id);
    started.delete(r.callId);
    await runtime.setStatus(thread, { type: "active", activeFlags: [] });
    const { lifecycle } = this.parts;
    lifecycle.launch(thread, turn, (t, a) => this.run(t, a, { calls, notRerun: started }), lifecycle.reserveSlot(false));
  }

  /** The agent loop over the thread's history, as the body of an agent (or review) turn. */
  async run(thread: LoadedThread, turn: ActiveTurn, resumeToolCalls?: ResumeToolCalls): Promise<LoopResult> {
    const { deps, stream, recorder, compactor } = this.parts;
    const { settings, historyLog } = deps;
    const signal = turn.abort.signal;
    const model = await turnModel(this.parts, thread, turn);
    const { provider, request, tools } = model;
    let history = historyLog.context(thread);
    if (!resumeToolCalls && compactor.needsAuto(thread)) history = (await this.autoCompact(thread, turn, model, history, signal)) ?? history;
    return runAgentLoop(
      {
        provider,
        request,
        history,
        tools,
        maxModelCalls: settings.maxModelCalls,
        retry: settings.retry,
        maxParallelTools: settings.maxParallelTools,
        signal,
        startedCalls: thread.startedCalls,
        planStopGuard: settings.planStopGuard !== false,
        plan: latestPlan(threadMessages(thread.entries!)),
        ...(resumeToolCalls ? { resumeToolCalls } : {}),
      },
      {
        emit: (e) => stream.onLoopEvent(thread, turn, e),
        takeSteering: () => turn.steering.take(),
        hasSteering: () => turn.steering.length > 0,
        compact: (h, s) => compactor.compact(thread, turn, provider, request, h, s),
        beforeStop: async (answer, mayContinue, s) => {
          if (!deps.hooks?.has("stop")) return null;
          await stream.flushDeferred(thread, turn); // the answer's record before the hooks'
          return stopHooks(deps, recorder, thread, turn, { status: "completed", stopReason: "finalAnswer", error: null, answer }, mayContinue, s);
        },
      },
    );
  }

  /**
   * Compaction before a turn near the window: when it fails, the turn still tries with the history
   * as it is (the request may fit; if not, the overflow compacts inside the loop and fails there).
   */
  private async autoCompact(thread: LoadedThread, turn: ActiveTurn, { provider, request }: TurnModel, history: Message[], signal: AbortSignal): Promise<Message[] | null> {
    try {
      return await this.parts.compactor.compact(thread, turn, provider, request, history, signal);
    } catch (err) {
      if (!(err instanceof CompactionError)) throw err;
      this.parts.deps.log.warn({ err, threadId: thread.id, turnId: turn.id }, "compaction before the turn failed; going on without it");
      return null;
    }
  }
}
