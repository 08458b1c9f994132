/**
 * Turns: starts the agent loop for a thread, turns its events into items and notifications
 * (recorded before published), and handles interrupt and steer. One active turn per thread.
 *
 * Wire order for a turn (Codex v2): thread/status/changed (active) → turn/started →
 * item/started + item/completed (userMessage) → per model output item/started → deltas →
 * item/completed → thread/tokenUsage/updated → … → thread/status/changed (idle) → turn/completed.
 */
import type { TransactionSql } from "postgres";
import { z } from "zod";
import { runAgentLoop, type LoopEvent, type LoopResult } from "../agent/loop.js";
import { addUsage, emptyUsage, type AssistantMessage, type Message, type ToolCallBlock, type Usage, type UserMessage } from "../agent/messages.js";
import { environmentContext, systemPrompt, toolList } from "../agent/prompt.js";
import { repairToolPairs } from "../agent/repair.js";
import type { RetryPolicy } from "../agent/retry.js";
import type { LoopTool } from "../agent/tools.js";
import { uuidv7 } from "../ids.js";
import type { TurnObserver } from "../metrics.js";
import type { ThreadStatus, UserInput } from "../protocol/common.js";
import type { ThreadItem } from "../protocol/items.js";
import type { Turn, TurnStopReason } from "../protocol/thread.js";
import { CommandExecutionApprovalDecision, type ApprovalDecision } from "../protocol/tools.js";
import type { TurnStartParams } from "../protocol/turn.js";
import type { ModelProvider, ModelRequest, ProviderStreamEvent } from "../providers/types.js";
import type { ItemRecord, ThreadRecord, TurnRecord } from "../store/records.js";
import type { TurnStore } from "../store/turn-store.js";
import { builtinTools } from "../tools/builtin.js";
import type { ApprovalRequest, ToolContext } from "../tools/context.js";
import { dynamicTool } from "../tools/dynamic.js";
import { ActiveTurn, currentCall, type StreamingItem } from "./active-turn.js";
import type { HistoryEntry } from "./history.js";
import type { HistoryLog } from "./history-log.js";
import type { ProviderPool } from "./provider-pool.js";
import type { RestorableTurn } from "./recovery.js";
import { applyOverrides, environmentOf, settingsMessage } from "./settings.js";
import type { LoadedThread, RuntimeLogger, Subscriber, ThreadEvent, ThreadRuntime } from "./threads.js";
import { OverloadedError, TurnRequestError, turnError } from "./turn-errors.js";

export { OverloadedError, TurnRequestError } from "./turn-errors.js";
import { statusFor, turnView } from "./turn-view.js";
import { previewOf, toUserMessage } from "./user-input.js";
import { policyOfMode } from "../sandbox/policy.js";
import { CommandRunner } from "../sandbox/runner.js";

export { turnView } from "./turn-view.js";

export interface TurnSettings {
  maxModelCalls: number;
  retry: RetryPolicy;
  maxParallelTools: number;
  maxOutputTokens?: number;
  /** Shell named in the environment context. */
  shell: string;
  /** Unanswered approvals are declined after this long (off when unset). */
  approvalTimeoutMs?: number;
  /** The model's context window in tokens, when known (reported, and used for auto-compaction). */
  contextWindow?: number;
  /** Compact before a turn when the last call's input passed this share of the window (default 0.8). */
  autoCompactShare?: number;
  /** Turns running at once in this process; more are refused (OverloadedError). */
  maxConcurrentTurns?: number;
}


const NO_OBSERVER: TurnObserver = {
  turnStarted() {},
  turnEnded() {},
  modelCall() {},
  tokens() {},
  approvalsPending() {},
  commitSeconds() {},
};

export const COMPACTION_PROMPT = `Summarize the conversation so far so that the work can continue from the summary alone.
Keep: the user's goals and constraints, decisions made, files and commands involved, what is done, what failed, and what remains.
Answer with the summary only.`;

const ApprovalReply = z.object({ decision: CommandExecutionApprovalDecision });



export class TurnRunner {
  constructor(
    private readonly runtime: ThreadRuntime,
    private readonly turns: TurnStore,
    private readonly providers: ProviderPool,
    private readonly settings: TurnSettings,
    private readonly log: RuntimeLogger,
    private readonly historyLog: HistoryLog,
    private readonly observer: TurnObserver = NO_OBSERVER,
    /** Where tools start processes: the OS sandbox seam. */
    private readonly commands: CommandRunner = new CommandRunner(),
  ) {}

  /** Turns running in this process (start, compact and restored ones). */
  private running = 0;

  /**
   * Takes a turn slot, or refuses new work past the server-wide limit (answered -32001 by the
   * handlers). Synchronous, and called before the caller's first await: a burst of turn/start
   * cannot all pass the check before any of them counts. The release is idempotent; the caller
   * releases on every path where the turn does not launch, launch() when the run ends.
   */
  private reserveSlot(enforceLimit = true): () => void {
    const limit = this.settings.maxConcurrentTurns;
    if (enforceLimit && limit !== undefined && this.running >= limit) throw new OverloadedError(`too many turns running (limit ${limit}); retry later`);
    this.running++;
    let held = true;
    return () => {
      if (held) {
        held = false;
        this.running--;
      }
    };
  }

  /** Bookkeeping around a turn's background run (its slot is released when the run ends). */
  private launch(thread: LoadedThread, turn: ActiveTurn, run: () => Promise<void>, release: () => void): void {
    this.observer.turnStarted();
    turn.finished = run().finally(release);
  }

  private get threads() {
    return this.runtime.store;
  }

  // ---- turn/start --------------------------------------------------------------------------

  async start(p: TurnStartParams, requester: Subscriber, responded: Promise<void>): Promise<{ turn: Turn }> {
    const thread = await this.runtime.load(p.threadId);
    if (p.clientUserMessageId) {
      const same = await this.turns.findTurnByClientMessageId(thread.id, p.clientUserMessageId);
      if (same) {
        this.runtime.subscribe(thread, requester);
        return { turn: turnView(same, null) };
      }
    }
    const running = thread.activeTurn;
    if (running instanceof ActiveTurn && p.clientUserMessageId && running.clientUserMessageId === p.clientUserMessageId) {
      // The same message again while the first turn/start is still recording it (a client
      // retrying over a flaky link): the lookup above could not see it yet. Answer with that
      // turn once it is recorded (or with the first call's error), not with "a turn is running".
      const view = await running.recorded;
      this.runtime.subscribe(thread, requester);
      return { turn: view };
    }
    if (running) throw new TurnRequestError(`a turn is already running on thread ${thread.id} (turn ${running.id})`);
    const release = this.reserveSlot(); // before any await (bursts); released below if the turn does not launch
    const now = Date.now();
    const turn = new ActiveTurn(uuidv7(now), now, p.clientUserMessageId ?? null);
    thread.activeTurn = turn; // claimed synchronously: a concurrent turn/start sees it
    try {
      this.runtime.subscribe(thread, requester);
      await this.historyLog.ensure(thread);
      const before = thread.record;
      const after = applyOverrides(before, p);
      const userMessage = await toUserMessage(p.input, after.cwd);

      const newEntries: HistoryEntry[] = [];
      if (thread.entries!.length === 0) newEntries.push({ kind: "message", turnOrdinal: null, message: environmentContext(environmentOf(after, this.settings.shell)) });
      else {
        const changed = settingsMessage(before, after, this.settings.shell);
        if (changed) newEntries.push({ kind: "message", turnOrdinal: null, message: changed });
      }
      newEntries.push({ kind: "message", turnOrdinal: thread.turnCount, message: userMessage });

      const userItem: ThreadItem = { type: "userMessage", id: uuidv7(), clientId: p.clientUserMessageId ?? null, content: p.input, startedAtMs: now, completedAtMs: now };
      const turnRecord: TurnRecord = {
        id: turn.id,
        threadId: thread.id,
        ordinal: thread.turnCount,
        status: "inProgress",
        stopReason: null,
        error: null,
        clientUserMessageId: turn.clientUserMessageId,
        startedAtMs: now,
        completedAtMs: null,
      };
      const view = turnView(turnRecord, null);
      const active: ThreadStatus = { type: "active", activeFlags: [] };
      const preview = before.preview || previewOf(p.input);
      turn.ordinal = turnRecord.ordinal;
      const writeHistory = this.historyLog.stage(thread, turn.id, newEntries);
      const updated: ThreadRecord = { ...after, preview, systemError: false, updatedAtMs: now };

      await this.runtime.commit(
        thread,
        [
          { method: "thread/status/changed", params: { threadId: thread.id, status: active } },
          { method: "turn/started", params: { threadId: thread.id, turn: view } },
          { method: "item/started", params: { item: { ...userItem, completedAtMs: null }, threadId: thread.id, turnId: turn.id, startedAtMs: now } },
          { method: "item/completed", params: { item: userItem, threadId: thread.id, turnId: turn.id, completedAtMs: now } },
        ],
        async (tx) => {
          await this.threads.updateThread(tx, thread.id, {
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
          });
          await this.turns.insertTurn(tx, turnRecord);
          await this.insertItem(tx, thread, turn, userItem, "completed", now);
          await writeHistory(tx);
        },
        { after: responded },
      );
      thread.record = updated;
      thread.status = active;
      thread.turnCount++;
      this.launch(thread, turn, () => this.run(thread, turn), release);
      turn.recordedAs(view);
      return { turn: view };
    } catch (err) {
      release();
      thread.activeTurn = null;
      thread.history = null; // staged entries may not have been stored: reload on next use
      turn.notRecorded(err);
      throw err;
    }
  }

  // ---- running -----------------------------------------------------------------------------

  private async run(
    thread: LoadedThread,
    turn: ActiveTurn,
    mode: "agent" | "compact" = "agent",
    resumeToolCalls?: { calls: ToolCallBlock[]; notRerun: ReadonlySet<string> },
  ): Promise<void> {
    let result: LoopResult;
    const signal = turn.abort.signal;
    try {
      const record = thread.record;
      const provider = await this.providers.get(record.modelProvider);
      const tools = this.toolsFor(thread, turn);
      const request: Omit<ModelRequest, "messages"> = {
        model: record.model,
        system: systemPrompt(record.baseInstructions, record.developerInstructions),
        tools: toolList([...tools.values()].map((t) => t.spec)),
        // Shared by a thread and its forks (they share the prefix up to the fork point).
        cacheKey: record.sessionId,
        reasoningEffort: (record.reasoningEffort as ModelRequest["reasoningEffort"]) ?? null,
        ...(this.settings.maxOutputTokens ? { maxOutputTokens: this.settings.maxOutputTokens } : {}),
      };
      const compact = (s: AbortSignal) => this.compactHistory(thread, turn, provider, request, s);
      if (mode === "compact") {
        const compacted = await compact(signal);
        result = {
          stopReason: compacted ? "finalAnswer" : signal.aborted ? "interrupted" : "error",
          error: compacted || signal.aborted ? null : new Error("compaction failed: the model returned no summary"),
          note: null,
          modelCalls: 1,
          usage: emptyUsage(),
        };
      } else {
        if (!resumeToolCalls && this.needsAutoCompaction(thread)) await compact(signal);
        result = await runAgentLoop(
          {
            provider,
            request,
            history: thread.history!,
            tools,
            maxModelCalls: this.settings.maxModelCalls,
            retry: this.settings.retry,
            maxParallelTools: this.settings.maxParallelTools,
            signal,
            ...(resumeToolCalls ? { resumeToolCalls } : {}),
          },
          {
            emit: (e) => this.onLoopEvent(thread, turn, e),
            takeSteering: () => this.takeSteering(turn),
            hasSteering: () => turn.steering.length > 0,
            compact: (_history, s) => compact(s),
          },
        );
      }
    } catch (err) {
      result = { stopReason: "error", error: err instanceof Error ? err : new Error(String(err)), note: null, modelCalls: 0, usage: emptyUsage() };
    }
    await this.finish(thread, turn, result);
  }

  /** Usage of the last model call passed the configured share of the context window. */
  private needsAutoCompaction(thread: LoadedThread): boolean {
    const window = this.settings.contextWindow;
    return Boolean(window && thread.lastInputTokens >= window * (this.settings.autoCompactShare ?? 0.8) && thread.history!.length > 2);
  }

  /**
   * Compaction: the model writes a summary of the context; a marker then replaces everything
   * before the current turn by environment + summary (the full history stays stored and
   * readable). Returns the new context, or null when no summary came back.
   */
  private async compactHistory(
    thread: LoadedThread,
    turn: ActiveTurn,
    provider: ModelProvider,
    request: Omit<ModelRequest, "messages">,
    signal: AbortSignal,
  ): Promise<Message[] | null> {
    const item = { type: "contextCompaction" as const, id: uuidv7(), startedAtMs: Date.now() };
    await this.recordItemStarted(thread, turn, { ...item, completedAtMs: null });
    let summary = "";
    try {
      const messages: Message[] = [...repairToolPairs(thread.history!), { role: "user", content: [{ type: "text", text: COMPACTION_PROMPT }] }];
      for await (const ev of provider.stream({ ...request, messages }, signal)) {
        if (ev.type === "done") summary = ev.message.content.flatMap((b) => (b.type === "text" ? [b.text] : [])).join("").trim();
      }
    } catch (err) {
      this.log.warn({ err, threadId: thread.id }, "compaction call failed");
    }
    const now = Date.now();
    if (!summary) {
      await this.recordItemCompleted(thread, turn, [{ ...item, completedAtMs: now }]);
      return null;
    }
    const marker: HistoryEntry = {
      kind: "compaction",
      keepFromTurnOrdinal: turn.ordinal,
      messages: [
        environmentContext(environmentOf(thread.record, this.settings.shell)),
        { role: "user", content: [{ type: "text", text: `<conversation_summary>\n${summary}\n</conversation_summary>` }] },
      ],
    };
    const write = this.historyLog.stage(thread, turn.id, [marker]);
    const done = { ...item, completedAtMs: now };
    await this.runtime.commit(thread, [{ method: "item/completed", params: { item: done, threadId: thread.id, turnId: turn.id, completedAtMs: now } }], async (tx) => {
      await write(tx);
      await this.turns.completeItem(tx, item.id, done, "completed", now);
    });
    thread.lastInputTokens = 0;
    return [...thread.history!];
  }

  /**
   * Restores a turn that was waiting on an approval when the previous process died (see
   * recovery.ts): the calls of its last model message that have no result run again — the one
   * that waited asks again under its recorded item id, calls that had started are not re-run —
   * and then the loop goes on as usual. The request reaches clients when they resume the thread.
   */
  async restore(r: RestorableTurn): Promise<void> {
    const thread = await this.runtime.load(r.threadId);
    const record = await this.turns.getTurn(r.turnId);
    if (!record || thread.activeTurn) return;
    await this.historyLog.ensure(thread);
    const turn = new ActiveTurn(record.id, record.startedAtMs, record.clientUserMessageId);
    turn.ordinal = record.ordinal;
    turn.nextItemOrdinal = await this.turns.countItems(record.id);
    turn.restoredItems.set(r.callId, r.itemId);
    thread.activeTurn = turn;
    const history = thread.history!;
    let last = history.length - 1;
    while (last >= 0 && history[last]!.role !== "assistant") last--;
    const assistant = history[last] as AssistantMessage | undefined;
    const answered = new Set(history.slice(last + 1).flatMap((m) => (m.role === "toolResult" ? [m.toolCallId] : [])));
    const calls = (assistant?.content ?? []).filter((b): b is ToolCallBlock => b.type === "toolCall" && !answered.has(b.id));
    const started = await this.turns.startedCallIds(record.id);
    started.delete(r.callId);
    await this.runtime.setStatus(thread, { type: "active", activeFlags: [] });
    this.launch(thread, turn, () => this.run(thread, turn, "agent", { calls, notRerun: started }), this.reserveSlot(false));
  }

  /** thread/compact/start: a turn of its own whose only item is the contextCompaction. */
  async compactThread(threadId: string, requester: Subscriber): Promise<void> {
    const thread = await this.runtime.load(threadId);
    if (thread.activeTurn) throw new TurnRequestError(`a turn is already running on thread ${thread.id} (turn ${thread.activeTurn.id})`);
    const release = this.reserveSlot(); // before any await (bursts)
    const now = Date.now();
    const turn = new ActiveTurn(uuidv7(now), now, null);
    thread.activeTurn = turn;
    try {
      this.runtime.subscribe(thread, requester);
      await this.historyLog.ensure(thread);
      if (thread.history!.length === 0) throw new TurnRequestError(`thread ${thread.id} has no history to compact`);
      turn.ordinal = thread.turnCount;
      const record: TurnRecord = { id: turn.id, threadId: thread.id, ordinal: turn.ordinal, status: "inProgress", stopReason: null, error: null, clientUserMessageId: null, startedAtMs: now, completedAtMs: null };
      const active: ThreadStatus = { type: "active", activeFlags: [] };
      await this.runtime.commit(
        thread,
        [
          { method: "thread/status/changed", params: { threadId: thread.id, status: active } },
          { method: "turn/started", params: { threadId: thread.id, turn: turnView(record, null) } },
        ],
        (tx) => this.turns.insertTurn(tx, record),
      );
      thread.status = active;
      thread.turnCount++;
      this.launch(thread, turn, () => this.run(thread, turn, "compact"), release);
    } catch (err) {
      release();
      thread.activeTurn = null;
      throw err;
    }
  }

  private toolsFor(thread: LoadedThread, turn: ActiveTurn): Map<string, LoopTool> {
    const ctx = this.toolContext(thread, turn);
    const tools = new Map<string, LoopTool>();
    for (const tool of builtinTools(ctx)) tools.set(tool.spec.name, tool);
    // thread/start rejects dynamic tools named like built-ins, so nothing is replaced here.
    for (const spec of thread.record.dynamicTools) tools.set(spec.name, dynamicTool(spec, ctx));
    // Each execution runs in the scope of its call id, so items are recorded with the call they
    // belong to (how a restarted process matches items to the model's calls).
    for (const [name, tool] of tools) tools.set(name, { ...tool, execute: (call, signal) => currentCall.run(call.id, () => tool.execute(call, signal)) });
    return tools;
  }

  private toolContext(thread: LoadedThread, turn: ActiveTurn): ToolContext {
    const base = { threadId: thread.id, turnId: turn.id };
    return {
      ...base,
      cwd: thread.record.cwd,
      sandbox: thread.record.sandbox,
      sandboxPolicy: thread.record.sandboxPolicy ?? policyOfMode(thread.record.sandbox),
      commands: this.commands,
      approvalPolicy: thread.record.approvalPolicy,
      sessionApprovals: thread.sessionApprovals,
      newItemId: () => {
        // A restored turn re-runs the call that waited on approval under its recorded item id.
        const call = currentCall.getStore();
        const restored = call === undefined ? undefined : turn.restoredItems.get(call);
        if (restored === undefined) return uuidv7();
        turn.restoredItems.delete(call!);
        turn.alreadyRecorded.add(restored);
        return restored;
      },
      startItem: (item) => (turn.alreadyRecorded.delete(item.id) ? Promise.resolve() : this.recordItemStarted(thread, turn, item)),
      completeItem: (item) => this.recordItemCompleted(thread, turn, [item]),
      outputDelta: (itemId, delta) => this.runtime.publishLive(thread, "item/commandExecution/outputDelta", { ...base, itemId, delta }),
      diffUpdated: async (diff) => {
        await this.runtime.commit(thread, [{ method: "turn/diff/updated", params: { ...base, diff } }]);
      },
      planUpdated: async (explanation, plan) => {
        await this.runtime.commit(thread, [{ method: "turn/plan/updated", params: { ...base, explanation, plan } }]);
      },
      requestApproval: (request, signal) => this.requestApproval(thread, turn, request, signal),
      askClients: (method, params, signal) => thread.broker.ask(method, params, thread.subscribers, signal),
    };
  }

  /**
   * One approval round trip: the thread shows `waitingOnApproval` while the request is out; the
   * first valid answer wins (broker); anything unusable counts as `decline`, an interrupt as `cancel`.
   */
  private async requestApproval(thread: LoadedThread, turn: ActiveTurn, request: ApprovalRequest, signal: AbortSignal): Promise<ApprovalDecision> {
    const method = request.kind === "command" ? "item/commandExecution/requestApproval" : "item/fileChange/requestApproval";
    const params = {
      threadId: thread.id,
      turnId: turn.id,
      ...request.params,
      ...(request.kind === "command" ? { availableDecisions: ["accept", "acceptForSession", "decline", "cancel"] } : {}),
    };
    turn.pendingApprovals++;
    this.observer.approvalsPending(1);
    // Recorded with the status change: a process restarted now restores the wait (recovery.ts).
    const markPending = (tx: TransactionSql) => this.turns.setPendingRequest(tx, request.params.itemId, { method, params });
    if (turn.pendingApprovals === 1) await this.runtime.setStatus(thread, { type: "active", activeFlags: ["waitingOnApproval"] }, markPending);
    else await this.runtime.commit(thread, [], markPending);
    const timeout = this.settings.approvalTimeoutMs;
    const waitSignal = timeout ? AbortSignal.any([signal, AbortSignal.timeout(timeout)]) : signal;
    let decision: ApprovalDecision;
    try {
      const reply = await thread.broker.ask(method, params, thread.subscribers, waitSignal, (r) => ApprovalReply.safeParse(r.result).success);
      if (reply === null) decision = signal.aborted ? "cancel" : "decline";
      else if (reply.error) {
        this.log.warn({ threadId: thread.id, itemId: request.params.itemId, error: reply.error.message }, "approval answered with an error; treating it as decline");
        decision = "decline";
      } else {
        const parsed = ApprovalReply.safeParse(reply.result);
        if (!parsed.success) this.log.warn({ threadId: thread.id, itemId: request.params.itemId }, "approval answered with an unknown decision; treating it as decline");
        decision = parsed.success ? parsed.data.decision : "decline";
      }
    } finally {
      turn.pendingApprovals--;
      this.observer.approvalsPending(-1);
    }
    const clearPending = (tx: TransactionSql) => this.turns.setPendingRequest(tx, request.params.itemId, null);
    if (turn.pendingApprovals === 0 && thread.activeTurn === turn && !signal.aborted) {
      await this.runtime.setStatus(thread, { type: "active", activeFlags: [] }, clearPending);
    } else await this.runtime.commit(thread, [], clearPending);
    return decision;
  }

  private takeSteering(turn: ActiveTurn): UserMessage[] {
    return turn.steering.map((s) => s.message);
  }

  private async onLoopEvent(thread: LoadedThread, turn: ActiveTurn, e: LoopEvent): Promise<void> {
    switch (e.type) {
      case "modelCallStart":
        turn.streaming.clear();
        turn.modelCallStartedAt = performance.now();
        return;
      case "stream":
        return this.onStream(thread, turn, e.event);
      case "modelCallFailed": {
        this.observer.modelCall(thread.record.modelProvider, (performance.now() - turn.modelCallStartedAt) / 1000, e.error.kind);
        await this.closeStreamingItems(thread, turn);
        if (e.error.kind === "aborted") return;
        if (!e.willRetry) turn.announcedFailure = true;
        const error = turnError(e.error, { exhaustedRetries: !e.willRetry && e.error.retryable });
        await this.runtime.commit(thread, [
          { method: "error", params: { error, willRetry: e.willRetry, threadId: thread.id, turnId: turn.id } },
        ]);
        if (e.willRetry) this.log.warn({ threadId: thread.id, turnId: turn.id, kind: e.error.kind, retryInMs: e.retryInMs }, "model call failed; retrying");
        return;
      }
      case "assistantMessage":
        return this.onAssistantMessage(thread, turn, e.message, e.usage);
      case "toolResult":
        return this.appendHistory(thread, turn, [e.result]);
      case "steered": {
        const steered = turn.steering.splice(0, e.messages.length);
        const now = Date.now();
        for (const s of steered) {
          const item: ThreadItem = { type: "userMessage", id: uuidv7(), clientId: s.clientId, content: s.input, startedAtMs: now, completedAtMs: now };
          await this.recordItemStarted(thread, turn, { ...item, completedAtMs: null });
          await this.recordItemCompleted(thread, turn, [item]);
        }
        return this.appendHistory(thread, turn, e.messages);
      }
      case "compacted":
        return;
    }
  }

  private async appendHistory(thread: LoadedThread, turn: ActiveTurn, messages: Message[]): Promise<void> {
    const write = this.historyLog.stage(thread, turn.id, messages.map((message) => ({ kind: "message" as const, turnOrdinal: turn.ordinal, message })));
    await this.runtime.commit(thread, [], write);
  }

  private async onStream(thread: LoadedThread, turn: ActiveTurn, ev: Exclude<ProviderStreamEvent, { type: "done" }>): Promise<void> {
    await this.completeEarlierBlocks(thread, turn, ev.index);
    if (ev.type === "toolCallStart" || ev.type === "toolCallDelta") return; // tool items appear when tools run
    const kind = ev.type === "textDelta" ? "agentMessage" : "reasoning";
    let item = turn.streaming.get(ev.index);
    if (!item) {
      item = { id: uuidv7(), kind, text: "", summary: [], startedAtMs: Date.now() };
      turn.streaming.set(ev.index, item);
      await this.recordItemStarted(thread, turn, this.streamingPayload(item));
    }
    const base = { threadId: thread.id, turnId: turn.id, itemId: item.id, delta: ev.delta };
    if (ev.type === "textDelta") {
      item.text += ev.delta;
      this.runtime.publishLive(thread, "item/agentMessage/delta", base);
    } else if (ev.type === "reasoningSummaryDelta") {
      while (item.summary.length <= ev.summaryIndex) item.summary.push("");
      item.summary[ev.summaryIndex] += ev.delta;
      this.runtime.publishLive(thread, "item/reasoning/summaryTextDelta", { ...base, summaryIndex: ev.summaryIndex });
    } else {
      item.text += ev.delta;
      this.runtime.publishLive(thread, "item/reasoning/textDelta", { ...base, contentIndex: 0 });
    }
  }

  private streamingPayload(item: StreamingItem, completedAtMs: number | null = null): ThreadItem {
    const times = { startedAtMs: item.startedAtMs, completedAtMs };
    return item.kind === "agentMessage"
      ? { type: "agentMessage", id: item.id, text: item.text, phase: null, moderation: null, memoryCitation: null, delivery: null, questions: null, ...times }
      : { type: "reasoning", id: item.id, summary: item.summary, content: item.text ? [item.text] : [], ...times };
  }

  /**
   * Blocks of one assistant message stream one after another in all three providers, so a delta
   * for block `index` means every earlier block is finished. Completing them now gives Codex's
   * wire order (reasoning started → deltas → reasoning completed → agentMessage started …)
   * instead of holding every item/completed until the whole message has streamed.
   */
  private async completeEarlierBlocks(thread: LoadedThread, turn: ActiveTurn, index: number): Promise<void> {
    const finished = [...turn.streaming].filter(([i, item]) => i < index && !item.done).map(([, item]) => item);
    if (finished.length === 0) return;
    const now = Date.now();
    for (const item of finished) item.done = true;
    await this.recordItemCompleted(thread, turn, finished.map((item) => this.streamingPayload(item, now)));
  }

  /** A failed or interrupted attempt: its items end with what had arrived. */
  private async closeStreamingItems(thread: LoadedThread, turn: ActiveTurn): Promise<void> {
    if (turn.streaming.size === 0) return;
    const now = Date.now();
    const items = [...turn.streaming.values()].filter((i) => !i.done).map((i) => this.streamingPayload(i, now));
    turn.streaming.clear();
    if (items.length > 0) await this.recordItemCompleted(thread, turn, items);
  }

  private async onAssistantMessage(thread: LoadedThread, turn: ActiveTurn, message: AssistantMessage, usage: Usage): Promise<void> {
    const now = Date.now();
    this.observer.modelCall(thread.record.modelProvider, (performance.now() - turn.modelCallStartedAt) / 1000, "ok");
    this.observer.tokens(thread.record.modelProvider, usage);
    const toStart: ThreadItem[] = [];
    const completed: ThreadItem[] = [];
    message.content.forEach((block, index) => {
      if (block.type === "toolCall") return;
      const streamed = turn.streaming.get(index);
      if (streamed?.done) return; // completed on the wire when the next block started
      const kind = block.type === "text" ? "agentMessage" : "reasoning";
      if (!streamed && block.type === "text" && block.text === "") return;
      if (!streamed && block.type === "reasoning" && !block.text && block.summary.every((s) => !s)) return;
      const item: StreamingItem = streamed ?? { id: uuidv7(), kind, text: "", summary: [], startedAtMs: now };
      if (block.type === "text") item.text = block.text;
      else {
        item.text = block.text;
        item.summary = [...block.summary];
      }
      if (!streamed) toStart.push(this.streamingPayload(item));
      completed.push(this.streamingPayload(item, now));
    });
    turn.streaming.clear();

    thread.lastInputTokens = usage.inputTokens;
    const total = addUsage(thread.record.tokenUsage ?? emptyUsage(), usage);
    thread.record = { ...thread.record, tokenUsage: total };
    const breakdown = (u: typeof usage) => ({
      totalTokens: u.totalTokens,
      inputTokens: u.inputTokens,
      cachedInputTokens: u.cachedInputTokens,
      cacheWriteInputTokens: u.cacheWriteInputTokens,
      outputTokens: u.outputTokens,
      reasoningOutputTokens: u.reasoningOutputTokens,
    });
    const writeHistory = this.historyLog.stage(thread, turn.id, [{ kind: "message", turnOrdinal: turn.ordinal, message }]);
    const cacheHit = usage.inputTokens > 0 ? usage.cachedInputTokens / usage.inputTokens : 0;
    this.log.info({ threadId: thread.id, turnId: turn.id, inputTokens: usage.inputTokens, cachedInputTokens: usage.cachedInputTokens, cacheHitRatio: Number(cacheHit.toFixed(3)) }, "model call completed");

    const records: Array<{ item: ThreadItem; ordinal: number }> = toStart.map((item) => ({ item, ordinal: turn.nextItemOrdinal++ }));
    const events: ThreadEvent[] = [
      ...toStart.map((item) => ({ method: "item/started" as const, params: { item, threadId: thread.id, turnId: turn.id, startedAtMs: now } })),
      ...completed.map((item) => ({ method: "item/completed" as const, params: { item, threadId: thread.id, turnId: turn.id, completedAtMs: now } })),
      {
        method: "thread/tokenUsage/updated",
        params: { threadId: thread.id, turnId: turn.id, tokenUsage: { total: breakdown(total), last: breakdown(usage), modelContextWindow: this.settings.contextWindow ?? null } },
      },
    ];
    await this.runtime.commit(thread, events, async (tx) => {
      for (const r of records) await this.writeItem(tx, thread, turn, r.item, r.ordinal, "inProgress", now);
      for (const item of completed) await this.turns.completeItem(tx, item.id, item, "completed", now);
      await writeHistory(tx);
      await this.threads.updateThread(tx, thread.id, { tokenUsage: total, updatedAtMs: now });
    });
  }

  private async recordItemStarted(thread: LoadedThread, turn: ActiveTurn, item: ThreadItem): Promise<void> {
    const now = Date.now();
    const ordinal = turn.nextItemOrdinal++;
    await this.runtime.commit(
      thread,
      [{ method: "item/started", params: { item, threadId: thread.id, turnId: turn.id, startedAtMs: item.startedAtMs ?? now } }],
      (tx) => this.writeItem(tx, thread, turn, item, ordinal, "inProgress", now),
    );
  }

  private async recordItemCompleted(thread: LoadedThread, turn: ActiveTurn, items: ThreadItem[]): Promise<void> {
    const now = Date.now();
    await this.runtime.commit(
      thread,
      items.map((item) => ({ method: "item/completed" as const, params: { item, threadId: thread.id, turnId: turn.id, completedAtMs: item.completedAtMs ?? now } })),
      async (tx) => {
        for (const item of items) await this.turns.completeItem(tx, item.id, item, "status" in item ? String(item.status) : "completed", item.completedAtMs ?? now);
      },
    );
  }

  private insertItem(tx: TransactionSql, thread: LoadedThread, turn: ActiveTurn, item: ThreadItem, status: string, now: number): Promise<void> {
    return this.writeItem(tx, thread, turn, item, turn.nextItemOrdinal++, status, now);
  }

  private writeItem(tx: TransactionSql, thread: LoadedThread, turn: ActiveTurn, item: ThreadItem, ordinal: number, status: string, now: number): Promise<void> {
    const record: ItemRecord = {
      id: item.id,
      threadId: thread.id,
      turnId: turn.id,
      ordinal,
      type: item.type,
      status,
      payload: item,
      startedAtMs: item.startedAtMs ?? now,
      // An item recorded already complete (the turn's user message) must say so, or start-up
      // recovery would take it for unfinished and "close" it again with a new item/completed.
      completedAtMs: status === "inProgress" ? null : (item.completedAtMs ?? now),
    };
    return this.turns.insertItem(tx, { ...record, callId: currentCall.getStore() ?? null });
  }

  // ---- the end of a turn -------------------------------------------------------------------

  private async finish(thread: LoadedThread, turn: ActiveTurn, result: LoopResult): Promise<void> {
    const now = Date.now();
    this.observer.turnEnded(turn.abort.signal.aborted && result.stopReason !== "error" ? "interrupted" : statusFor[result.stopReason]);
    turn.steerable = false;
    try {
      await this.closeStreamingItems(thread, turn);
    } catch (err) {
      this.log.error({ err, threadId: thread.id }, "could not close streaming items");
    }
    // Steering the loop never took (the turn stopped on truncation, an error or an interrupt
    // before its next model call) was already answered with {turnId}: record it as this turn's
    // user input, and it reaches the model with the next turn, instead of vanishing.
    if (turn.steering.length > 0) {
      try {
        await this.onLoopEvent(thread, turn, { type: "steered", messages: turn.steering.map((s) => s.message) });
      } catch (err) {
        this.log.error({ err, threadId: thread.id }, "could not record steering input");
      }
    }
    const stopReason: TurnStopReason = turn.abort.signal.aborted && result.stopReason !== "error" ? "interrupted" : result.stopReason;
    const status = statusFor[stopReason];
    const error =
      stopReason === "error" && result.error
        ? turnError(result.error, { exhaustedRetries: turn.announcedFailure && "retryable" in result.error && Boolean((result.error as { retryable?: boolean }).retryable) })
        : result.note
          ? { message: result.note, codexErrorInfo: null, additionalDetails: null, misalignment: null }
          : null;
    const record: TurnRecord = {
      id: turn.id,
      threadId: thread.id,
      ordinal: 0,
      status,
      stopReason,
      error,
      clientUserMessageId: turn.clientUserMessageId,
      startedAtMs: turn.startedAtMs,
      completedAtMs: now,
    };
    const threadStatus: ThreadStatus = status === "failed" ? { type: "systemError" } : { type: "idle" };
    const events: ThreadEvent[] = [];
    if (status === "failed" && !turn.announcedFailure && error) {
      events.push({ method: "error", params: { error, willRetry: false, threadId: thread.id, turnId: turn.id } });
    }
    events.push(
      { method: "thread/status/changed", params: { threadId: thread.id, status: threadStatus } },
      { method: "turn/completed", params: { threadId: thread.id, turn: turnView(record, null) } },
    );
    if (status === "failed") this.log.warn({ threadId: thread.id, turnId: turn.id, error: error?.message }, "turn failed");
    thread.activeTurn = null;
    thread.status = threadStatus;
    thread.record = { ...thread.record, systemError: status === "failed", updatedAtMs: now };
    try {
      await this.runtime.commit(thread, events, async (tx) => {
        await this.turns.finishTurn(tx, turn.id, record);
        await this.threads.updateThread(tx, thread.id, { systemError: status === "failed", updatedAtMs: now });
      });
    } catch (err) {
      // The record could not be written; clients must still learn the turn ended (DESIGN.md §3.9).
      this.log.error({ err, threadId: thread.id, turnId: turn.id }, "could not record the end of a turn");
      for (const e of events) this.runtime.publishLive(thread, e.method, e.params);
    }
    this.runtime.maybeUnload(thread);
  }

  // ---- interrupt and steer -----------------------------------------------------------------

  async interrupt(threadId: string, turnId: string): Promise<Record<string, never>> {
    const thread = this.runtime.loaded.get(threadId);
    const active = thread?.activeTurn as ActiveTurn | null | undefined;
    if (active && active.id === turnId) {
      active.abort.abort();
      return {};
    }
    // Idempotent: interrupting a turn that already ended is not an error.
    const stored = await this.turns.getTurn(turnId);
    if (stored && stored.threadId === threadId) return {};
    await this.runtime.getRecord(threadId); // unknown thread → ThreadNotFoundError
    throw new TurnRequestError(`turn not found on thread ${threadId}: ${turnId}`);
  }

  async steer(threadId: string, expectedTurnId: string, input: UserInput[], clientId: string | null): Promise<{ turnId: string }> {
    const thread = this.runtime.loaded.get(threadId);
    if (!thread) await this.runtime.getRecord(threadId);
    const active = thread?.activeTurn as ActiveTurn | null | undefined;
    if (!active) throw new TurnRequestError(`no active turn on thread ${threadId}`);
    if (active.id !== expectedTurnId) throw new TurnRequestError(`expected turn ${expectedTurnId} but the active turn is ${active.id}`);
    // Idempotent: the same clientUserMessageId again (a client retrying) adds nothing.
    if (clientId !== null && active.steerClientIds.has(clientId)) return { turnId: active.id };
    if (active.abort.signal.aborted) throw new TurnRequestError(`turn ${active.id} is being interrupted`);
    const message = await toUserMessage(input, thread!.record.cwd);
    // Checked again after the await: a turn that began ending meanwhile would never take the input.
    if (!active.steerable || active.abort.signal.aborted) throw new TurnRequestError(`no active turn on thread ${threadId}`);
    if (clientId !== null) {
      if (active.steerClientIds.has(clientId)) return { turnId: active.id };
      active.steerClientIds.add(clientId);
    }
    active.steering.push({ input, clientId, message });
    return { turnId: active.id };
  }

  /** Waits for a running turn to end (shutdown, tests). */
  async settle(threadId: string): Promise<void> {
    const active = this.runtime.loaded.get(threadId)?.activeTurn as ActiveTurn | null | undefined;
    if (active) await active.finished;
  }

  /** Interrupts every running turn and waits for them to end (shutdown), except those waiting on approval. */
  async interruptAll(): Promise<void> {
    const running: Promise<void>[] = [];
    for (const thread of this.runtime.loaded.values()) {
      const active = thread.activeTurn as ActiveTurn | null;
      // A turn waiting on an approval is left recorded as waiting: the next start restores it
      // and asks again, so a planned restart does not throw the user's pending decision away.
      if (active && active.pendingApprovals === 0) {
        active.abort.abort();
        running.push(active.finished);
      }
    }
    await Promise.allSettled(running);
  }

}
