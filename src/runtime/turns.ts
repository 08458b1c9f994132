/**
 * Turns: the lifecycle of a thread's turn — start (recorded with its user message), the agent
 * loop's run, restore after a restart, compact-only turns, interrupt and steer — and the
 * server-wide turn slots. One active turn per thread. The other jobs live beside it:
 *
 *   turn-stream.ts   loop events → items and notifications; the loop's history made durable
 *   item-recorder.ts item persistence (record before publish)
 *   tool-host.ts     the tools a turn offers and the context they record through (+ approvals.ts)
 *   compaction.ts    summaries that fit the window
 *   turn-end.ts      the single terminal event and how each stop reads to a Codex client
 *
 * Wire order for a turn (Codex v2): thread/status/changed (active) → turn/started →
 * item/started + item/completed (userMessage) → per model output item/started → deltas →
 * item/completed → thread/tokenUsage/updated → … → thread/status/changed (idle) → turn/completed.
 */
import { promises as fs } from "node:fs";
import path from "node:path";
import type { TransactionSql } from "postgres";
import { runAgentLoop, type LoopResult } from "../agent/loop.js";
import { emptyUsage, type AssistantMessage, type Message, type ToolCallBlock, type UserMessage } from "../agent/messages.js";
import { environmentContext, systemPrompt, toolList } from "../agent/prompt.js";
import { reviewMessage, reviewRequest } from "../agent/review.js";
import { uuidv7 } from "../ids.js";
import type { TurnObserver } from "../metrics.js";
import type { ThreadStatus, UserInput } from "../protocol/common.js";
import type { ThreadItem } from "../protocol/items.js";
import type { Turn } from "../protocol/thread.js";
import type { TurnStartParams } from "../protocol/turn.js";
import type { ReviewTarget } from "../protocol/review.js";
import { withIdleTimeout } from "../providers/idle-timeout.js";
import type { ModelProvider, ModelRequest } from "../providers/types.js";
import { CommandRunner } from "../sandbox/runner.js";
import type { ThreadRecord, TurnRecord } from "../store/records.js";
import type { TurnStore } from "../store/turn-store.js";
import { ExecPolicyStore } from "../store/execpolicy-store.js";
import type { HookRunner } from "../hooks/runner.js";
import { ActiveTurn } from "./active-turn.js";
import { CompactionError, Compactor } from "./compaction.js";
import { latestPlan } from "../agent/plan-guard.js";
import { stopHooks } from "./turn-hooks.js";
import { threadMessages, type HistoryEntry } from "./history.js";
import type { HistoryLog } from "./history-log.js";
import { completedEvent, ItemRecorder } from "./item-recorder.js";
import { itemRef } from "../store/event-refs.js";
import type { ProviderPool } from "./provider-pool.js";
import type { RestorableTurn } from "./recovery.js";
import { applyOverrides, environmentOf, settingsMessage } from "./settings.js";
import type { LoadedThread } from "./loaded-thread.js";
import { inIssueOrder, type RuntimeLogger, type Subscriber, type ThreadEvent } from "./thread-types.js";
import type { ThreadRuntime } from "./threads.js";
import { DEFAULT_SOURCES, toolsFor, userShellTool, type ToolSource } from "./tool-host.js";
import { NO_OBSERVER, type TurnDeps, type TurnSettings } from "./turn-deps.js";
import { finishTurn } from "./turn-end.js";
import { OverloadedError, TurnRequestError } from "./turn-errors.js";
import { TurnStream } from "./turn-stream.js";
import { statusFor, turnView } from "./turn-view.js";
import { previewOf, toUserMessage } from "./user-input.js";
import { SeqCounter } from "./seq.js";
import { UnrecordedEnds } from "./unrecorded.js";

export { OverloadedError, TurnRequestError } from "./turn-errors.js";
export { turnView } from "./turn-view.js";
export { COMPACTION_PROMPT } from "../agent/compaction.js";
export type { TurnSettings } from "./turn-deps.js";

/** Default for APP_SERVER_STREAM_IDLE_TIMEOUT_MS (DESIGN.md §10). */
export const DEFAULT_STREAM_IDLE_TIMEOUT_MS = 300_000;

/**
 * Refuses a turn whose working directory this process cannot see (-32600, nothing recorded, no
 * lease taken): deleted, or on another machine's storage. A turn runs where its thread's lease is,
 * so a process without the workspace must not take it (DESIGN.md §7, docs/cluster.md).
 */
async function assertCwdExists(cwd: string): Promise<void> {
  const st = await fs.stat(cwd).catch(() => null);
  if (!st?.isDirectory())
    throw new TurnRequestError(
      `the thread's working directory ${cwd} is not an existing directory on this server (in a cluster, every process needs the workspaces at the same path)`,
    );
}

/** A user shell command run as a turn of its own (thread/shellCommand). */
interface UserShellRun {
  command: string;
  timeoutMs: number;
}

export class TurnRunner {
  private readonly deps: TurnDeps;
  private readonly recorder: ItemRecorder;
  private readonly stream: TurnStream;
  private readonly compactor: Compactor;

  constructor(
    runtime: ThreadRuntime,
    turns: TurnStore,
    providers: ProviderPool,
    settings: TurnSettings,
    log: RuntimeLogger,
    historyLog: HistoryLog,
    observer: TurnObserver = NO_OBSERVER,
    /** Where tools start processes: the OS sandbox seam. */
    commands: CommandRunner = new CommandRunner(),
    hooks: HookRunner | null = null,
    /** Tool sources besides the built-in and dynamic ones (MCP servers). */
    extraToolSources: readonly ToolSource[] = [],
    execPolicy: ExecPolicyStore = new ExecPolicyStore(turns.sql),
  ) {
    this.deps = { runtime, turns, providers, settings, log, historyLog, observer, commands, hooks, toolSources: [...DEFAULT_SOURCES, ...extraToolSources], execPolicy };
    this.recorder = new ItemRecorder(this.deps);
    this.stream = new TurnStream(this.deps, this.recorder);
    this.compactor = new Compactor(this.deps, this.recorder);
    runtime.unrecorded ??= new UnrecordedEnds(runtime, turns, log);
  }

  /** The user's configured hooks (listed by hooks/list), or null when none are configured. */
  get hooks(): HookRunner | null {
    return this.deps.hooks;
  }

  /** Turns running in this process (start, compact and restored ones). */
  private running = 0;

  /**
   * Takes a turn slot, or refuses new work past the server-wide limit (answered -32001 by the
   * handlers). Synchronous, and called before the caller's first await: a burst of turn/start
   * cannot all pass the check before any of them counts. The release is idempotent; the caller
   * releases on every path where the turn does not launch, launch() when the run ends.
   */
  private reserveSlot(enforceLimit = true): () => void {
    const limit = this.deps.settings.maxConcurrentTurns;
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
  private launch(turn: ActiveTurn, run: () => Promise<void>, release: () => void): void {
    this.deps.observer.turnStarted();
    turn.finished = run().finally(release);
  }

  // ---- turn/start --------------------------------------------------------------------------

  async start(p: TurnStartParams, requester: Subscriber, responded: Promise<void>): Promise<{ turn: Turn }> {
    const { runtime, turns, historyLog, settings } = this.deps;
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
    const release = this.reserveSlot(); // before any await (bursts); released below if the turn does not launch
    const now = Date.now();
    const turn = new ActiveTurn(uuidv7(now), now, p.clientUserMessageId ?? null);
    thread.activeTurn = turn; // claimed synchronously: a concurrent turn/start sees it
    try {
      runtime.subscribe(thread, requester);
      await assertCwdExists(p.cwd ? path.resolve(thread.record.cwd, p.cwd) : thread.record.cwd);
      // The lease first (LeaseHeldError: a turn runs on another process): it refreshes the record
      // and, if another process wrote the thread since, the history caches loaded next.
      await runtime.claim(thread);
      await historyLog.ensure(thread);
      const before = thread.record;
      const after = applyOverrides(before, p);
      const userMessage = await toUserMessage(p.input, after.cwd);

      const newEntries: HistoryEntry[] = [];
      if (thread.entries!.length === 0) newEntries.push({ kind: "message", turnOrdinal: null, message: environmentContext(environmentOf(after, settings.shell)) });
      else {
        const changed = settingsMessage(before, after, settings.shell);
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
      const writeHistory = historyLog.stage(thread, turn.id, newEntries);
      const updated: ThreadRecord = { ...after, preview, systemError: false, updatedAtMs: now };

      await runtime.commit(
        thread,
        [
          { method: "thread/status/changed", params: { threadId: thread.id, status: active } },
          { method: "turn/started", params: { threadId: thread.id, turn: view } },
          userItemStarted(thread, turn, userItem, now),
          completedEvent(thread, turn, userItem, now),
        ],
        // Pipelined (one round trip for the statements, see ThreadRuntime.record).
        (tx) =>
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
            this.recorder.insert(tx, thread, turn, userItem, "completed", now),
            writeHistory(tx),
          ]),
        { after: responded },
      );
      thread.record = updated;
      thread.status = active;
      thread.turnCount++;
      this.launch(turn, () => this.run(thread, turn), release);
      turn.recordedAs(view);
      return { turn: view };
    } catch (err) {
      release();
      thread.activeTurn = null;
      thread.history = null;
      thread.entries = null; // staged entries may not have been stored: reload on next use
      turn.notRecorded(err);
      runtime.releaseIfIdle(thread);
      throw err;
    }
  }

  // ---- running -----------------------------------------------------------------------------

  private async run(
    thread: LoadedThread,
    turn: ActiveTurn,
    mode: "agent" | "compact" | "review" | UserShellRun = "agent",
    resumeToolCalls?: { calls: ToolCallBlock[]; notRerun: ReadonlySet<string> },
  ): Promise<void> {
    const { settings, historyLog } = this.deps;
    let result: LoopResult;
    const signal = turn.abort.signal;
    if (typeof mode === "object") {
      try {
        await this.runUserShell(thread, turn, mode);
        result = { stopReason: signal.aborted ? "interrupted" : "finalAnswer", error: null, note: null, modelCalls: 0, usage: emptyUsage() };
      } catch (err) {
        result = { stopReason: "error", error: err instanceof Error ? err : new Error(String(err)), note: null, modelCalls: 0, usage: emptyUsage() };
      }
      await this.endTurn(thread, turn, result);
      return;
    }
    try {
      const record = thread.record;
      const provider = withIdleTimeout(await this.deps.providers.get(record.modelProvider), settings.streamIdleTimeoutMs ?? DEFAULT_STREAM_IDLE_TIMEOUT_MS);
      // The first turn after a start or a reload waits for MCP servers (each bounded by its startupTimeoutSec).
      await Promise.all(this.deps.toolSources.map((source) => source.ready?.(signal, thread)));
      const tools = toolsFor(this.deps, this.recorder, thread, turn, this.deps.toolSources);
      const request: Omit<ModelRequest, "messages"> = {
        model: record.model,
        system: systemPrompt(record.baseInstructions, record.developerInstructions),
        tools: toolList([...tools.values()].map((t) => t.spec)),
        // Shared by a thread and its forks (they share the prefix up to the fork point).
        cacheKey: record.sessionId,
        reasoningEffort: (record.reasoningEffort as ModelRequest["reasoningEffort"]) ?? null,
        ...(settings.maxOutputTokens ? { maxOutputTokens: settings.maxOutputTokens } : {}),
      };
      if (mode === "compact" && historyLog.context(thread).length === 0) {
        // Nothing to summarise yet (a new thread): the context is as small as it gets. The turn
        // still shows a compaction, without a model call.
        const started = Date.now();
        const item: ThreadItem = { type: "contextCompaction", id: uuidv7(), startedAtMs: started };
        await this.recorder.started(thread, turn, { ...item, completedAtMs: null });
        await this.recorder.completed(thread, turn, [{ ...item, completedAtMs: Date.now() }]);
        result = { stopReason: "finalAnswer", error: null, note: null, modelCalls: 0, usage: emptyUsage() };
      } else if (mode === "compact") {
        // A compaction that cannot produce a summary throws why (the turn fails with it); null: interrupted.
        const compacted = await this.compactor.compact(thread, turn, provider, request, historyLog.context(thread), signal, true);
        result = { stopReason: compacted ? "finalAnswer" : "interrupted", error: null, note: null, modelCalls: 1, usage: emptyUsage() };
      } else {
        let history = historyLog.context(thread);
        if (!resumeToolCalls && this.compactor.needsAuto(thread)) history = (await this.autoCompact(thread, turn, provider, request, history, signal)) ?? history;
        result = await runAgentLoop(
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
            emit: (e) => this.stream.onLoopEvent(thread, turn, e),
            takeSteering: () => turn.steering.take(),
            hasSteering: () => turn.steering.length > 0,
            compact: (h, s) => this.compactor.compact(thread, turn, provider, request, h, s),
            beforeStop: async (answer, mayContinue, s) => {
              if (!this.deps.hooks?.has("stop")) return null;
              await this.stream.flushDeferred(thread, turn); // the answer's record before the hooks'
              return stopHooks(this.deps, this.recorder, thread, turn, { status: "completed", stopReason: "finalAnswer", error: null, answer }, mayContinue, s);
            },
          },
        );
      }
    } catch (err) {
      result = { stopReason: "error", error: err instanceof Error ? err : new Error(String(err)), note: null, modelCalls: 0, usage: emptyUsage() };
    }
    if (mode === "review") {
      try {
        await this.exitReviewMode(thread, turn, result);
      } catch (err) {
        if (result.stopReason !== "error") result = { ...result, stopReason: "error", error: err instanceof Error ? err : new Error(String(err)) };
      }
    }
    await this.endTurn(thread, turn, result);
  }

  /**
   * Compaction before a turn near the window: when it fails, the turn still tries with the history
   * as it is (the request may fit; if not, the overflow compacts inside the loop and fails there).
   */
  private async autoCompact(thread: LoadedThread, turn: ActiveTurn, provider: ModelProvider, request: Omit<ModelRequest, "messages">, history: Message[], signal: AbortSignal): Promise<Message[] | null> {
    try {
      return await this.compactor.compact(thread, turn, provider, request, history, signal);
    } catch (err) {
      if (!(err instanceof CompactionError)) throw err;
      this.deps.log.warn({ err, threadId: thread.id, turnId: turn.id }, "compaction before the turn failed; going on without it");
      return null;
    }
  }

  /**
   * Restores a turn that was waiting on an approval when the previous process died (see
   * recovery.ts): the calls of its last model message that have no result run again — the one
   * that waited asks again under its recorded item id, calls that had started are not re-run —
   * and then the loop goes on as usual. The request reaches clients when they resume the thread.
   */
  async restore(r: RestorableTurn, epoch?: number): Promise<void> {
    const { runtime, turns, historyLog } = this.deps;
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
    this.launch(turn, () => this.run(thread, turn, "agent", { calls, notRerun: started }), this.reserveSlot(false));
  }

  /** thread/compact/start: a turn of its own whose only item is the contextCompaction. */
  async compactThread(threadId: string, requester: Subscriber): Promise<void> {
    const thread = await this.deps.runtime.load(threadId);
    this.deps.runtime.unrecorded?.assertRecorded(thread.id);
    await this.startOwnTurn(thread, requester, "compact");
  }

  /**
   * thread/shellCommand: the user's own command (`!ls` in the TUI) as a turn of its own whose only
   * item is a `commandExecution` with `source: "userShell"`, run like the `shell` tool — in the
   * thread's cwd and OS sandbox, never asking — and then handed to the model's history as a user
   * message with the command and its result, so the next turn knows what the user saw. While
   * a turn runs, the command runs inside that turn instead (its item appears there, and the turn
   * ends only once the command has).
   */
  async shellCommand(threadId: string, command: string, timeoutMs: number, requester: Subscriber): Promise<void> {
    const { runtime } = this.deps;
    // A thread that another process is running (its turn, or its lease): the command goes to that
    // owner, which runs it in its turn or a turn of its own; the requester here follows the thread.
    if (runtime.cluster && !runtime.loaded.get(threadId)?.activeTurn) {
      const thread = await runtime.load(threadId);
      // Following the thread first (as thread/resume does): the owner's events come back relayed.
      if (!thread.subscribers.has(requester)) await runtime.attach(thread, requester, null);
      if (await runtime.cluster.toOwner(threadId, { kind: "shellCommand", threadId, command, timeoutMs })) return;
    }
    return this.shellCommandLocal(threadId, command, timeoutMs, requester);
  }

  /** thread/shellCommand on the process that runs (or will run) the thread's turns. */
  async shellCommandLocal(threadId: string, command: string, timeoutMs: number, requester: Subscriber): Promise<void> {
    const { runtime } = this.deps;
    const thread = await runtime.load(threadId);
    runtime.unrecorded?.assertRecorded(thread.id);
    const running = thread.activeTurn;
    if (!running) {
      await this.startOwnTurn(thread, requester, { command, timeoutMs }, { check: () => assertCwdExists(thread.record.cwd) });
      return;
    }
    // As Codex does: a command typed while a turn runs becomes an item of that turn.
    if (!(running instanceof ActiveTurn) || !running.steerable) throw new TurnRequestError(`a turn is ending on thread ${thread.id} (turn ${running.id}); retry when it has`);
    await assertCwdExists(thread.record.cwd);
    runtime.subscribe(thread, requester);
    running.userShell.push(
      this.execUserShell(thread, running, { command, timeoutMs }).catch((err: unknown) => {
        this.deps.log.error({ err, threadId: thread.id, turnId: running.id }, "user shell command in a running turn failed");
        return null;
      }),
    );
  }

  /**
   * Starts a turn that no user message opens (a compaction, a user shell command, a review):
   * reserves a slot, claims the thread, records and announces the turn, then runs it in `mode`.
   * `check` runs once the thread is claimed, before anything is recorded; what it throws refuses
   * the request. `opening` gives what the turn starts with, recorded with it: the message the model
   * is sent and the item clients see first. `after`: the turn's events wait for it (the response).
   */
  private async startOwnTurn(
    thread: LoadedThread,
    requester: Subscriber,
    mode: "compact" | "review" | UserShellRun,
    opts: { check?: () => Promise<void>; opening?: (turn: ActiveTurn, now: number) => { message: Message; item: ThreadItem }; after?: Promise<void> } = {},
  ): Promise<Turn> {
    const { runtime, turns, historyLog } = this.deps;
    if (thread.activeTurn) throw new TurnRequestError(`a turn is already running on thread ${thread.id} (turn ${thread.activeTurn.id})`);
    const release = this.reserveSlot(); // before any await (bursts)
    const now = Date.now();
    const turn = new ActiveTurn(uuidv7(now), now, null);
    thread.activeTurn = turn;
    try {
      runtime.subscribe(thread, requester);
      await opts.check?.(); // before the lease: a process that cannot run the turn does not take the thread
      await runtime.claim(thread);
      await historyLog.ensure(thread);
      turn.ordinal = thread.turnCount;
      const record: TurnRecord = { id: turn.id, threadId: thread.id, ordinal: turn.ordinal, status: "inProgress", stopReason: null, error: null, clientUserMessageId: null, startedAtMs: now, completedAtMs: null };
      const view = turnView(record, null);
      const active: ThreadStatus = { type: "active", activeFlags: [] };
      const events: ThreadEvent[] = [
        { method: "thread/status/changed", params: { threadId: thread.id, status: active } },
        { method: "turn/started", params: { threadId: thread.id, turn: view } },
      ];
      const opening = opts.opening?.(turn, now);
      let writes = (tx: TransactionSql): Promise<void> => turns.insertTurn(tx, record);
      if (opening) {
        events.push(userItemStarted(thread, turn, opening.item, now), completedEvent(thread, turn, opening.item, now));
        const writeHistory = historyLog.stage(thread, turn.id, this.turnEntries(thread, turn.ordinal, opening.message));
        writes = (tx) => inIssueOrder([turns.insertTurn(tx, record), this.recorder.insert(tx, thread, turn, opening.item, "completed", now), writeHistory(tx)]);
      }
      await runtime.commit(thread, events, writes, { after: opts.after });
      thread.status = active;
      thread.turnCount++;
      this.launch(turn, () => this.run(thread, turn, mode), release);
      return view;
    } catch (err) {
      release();
      thread.activeTurn = null;
      if (opts.opening) {
        thread.history = null;
        thread.entries = null; // staged entries may not have been stored: reload on next use
      }
      runtime.releaseIfIdle(thread);
      throw err;
    }
  }

  /** A turn's history entries for `message`: the environment context first while the log is empty. */
  private turnEntries(thread: LoadedThread, turnOrdinal: number, message: Message): HistoryEntry[] {
    const entries: HistoryEntry[] = [];
    if (thread.entries!.length === 0) entries.push({ kind: "message", turnOrdinal: null, message: environmentContext(environmentOf(thread.record, this.deps.settings.shell)) });
    entries.push({ kind: "message", turnOrdinal, message });
    return entries;
  }

  private async runUserShell(thread: LoadedThread, turn: ActiveTurn, shell: UserShellRun): Promise<void> {
    const { runtime, historyLog } = this.deps;
    const message = await this.execUserShell(thread, turn, shell);
    await runtime.commit(thread, [], historyLog.stage(thread, turn.id, this.turnEntries(thread, turn.ordinal, message)));
  }

  /** Runs a user shell command as an item of `turn`; resolves with what the model is told of it. */
  private async execUserShell(thread: LoadedThread, turn: ActiveTurn, shell: UserShellRun): Promise<UserMessage> {
    const tool = userShellTool(this.deps, this.recorder, thread, turn, shell.timeoutMs);
    const call: ToolCallBlock = { type: "toolCall", id: `user_shell_${uuidv7()}`, name: "shell", arguments: JSON.stringify({ command: shell.command }) };
    const outcome = await tool.execute(call, turn.abort.signal);
    const result = outcome.content.map((b) => (b.type === "text" ? b.text : "")).join("\n");
    const text = `<user_shell_command>\n<command>\n${shell.command}\n</command>\n<result>\n${result}\n</result>\n</user_shell_command>`;
    return { role: "user", content: [{ type: "text", text }] };
  }

  /**
   * Ends a turn: first waits for user shell commands run inside it (thread/shellCommand while the
   * turn ran), whose results join the history after the turn's own messages, then finishes it.
   */
  private async endTurn(thread: LoadedThread, turn: ActiveTurn, result: LoopResult): Promise<void> {
    if (turn.userShell.length > 0) {
      const told: UserMessage[] = [];
      // Re-reads the length: a command attached while an earlier one finishes is waited for too.
      for (let i = 0; i < turn.userShell.length; i++) {
        const message = await turn.userShell[i]!;
        if (message) told.push(message);
      }
      turn.steerable = false; // no command attaches from here on (finishTurn would set it next)
      try {
        if (told.length > 0) {
          await this.stream.flushDeferred(thread, turn);
          await this.stream.appendHistory(thread, turn, told);
        }
      } catch (err) {
        if (result.stopReason !== "error") result = { ...result, stopReason: "error", error: err instanceof Error ? err : new Error(String(err)) };
      }
    }
    await this.observeStop(thread, turn, result);
    await finishTurn(this.deps, this.recorder, this.stream, thread, turn, result);
  }

  /**
   * Stop hooks for a turn the loop did not end with a final answer (truncated, refused, failed; a
   * compaction or shell turn): observing only, before the end is recorded. Not for an interrupt: the
   * user stopped the turn, and a shutdown must not wait for them.
   */
  private async observeStop(thread: LoadedThread, turn: ActiveTurn, result: LoopResult): Promise<void> {
    if (!this.deps.hooks?.has("stop") || turn.stopHooksRan || turn.abort.signal.aborted || result.stopReason === "interrupted") return;
    try {
      await this.stream.flushDeferred(thread, turn);
      const end = { status: statusFor[result.stopReason], stopReason: result.stopReason, error: result.error?.message ?? result.note, answer: null };
      await stopHooks(this.deps, this.recorder, thread, turn, end, false, turn.abort.signal);
    } catch (err) {
      this.deps.log.error({ err, threadId: thread.id }, "could not run or record the stop hooks");
    }
  }

  /**
   * review/start: a turn of the thread whose input is a review request (the target's
   * instructions and the review rubric, agent/review.ts) instead of a user message. It opens with
   * an `enteredReviewMode` item naming what is reviewed, the model works as in any turn (its
   * messages and commands are items as usual), and it closes with `exitedReviewMode` carrying the
   * review — the model's last answer.
   */
  async review(threadId: string, target: ReviewTarget, requester: Subscriber, responded: Promise<void>): Promise<{ turn: Turn }> {
    const thread = await this.deps.runtime.load(threadId);
    this.deps.runtime.unrecorded?.assertRecorded(thread.id);
    const request = reviewRequest(target);
    const turn = await this.startOwnTurn(thread, requester, "review", {
      check: () => assertCwdExists(thread.record.cwd),
      opening: (_turn, now) => ({
        message: { role: "user", content: [{ type: "text", text: reviewMessage(request) }] },
        item: { type: "enteredReviewMode", id: uuidv7(), review: request.hint, startedAtMs: now, completedAtMs: now },
      }),
      after: responded,
    });
    return { turn };
  }

  /** The review turn's closing item: the model's last answer, or why there is none. */
  private async exitReviewMode(thread: LoadedThread, turn: ActiveTurn, result: LoopResult): Promise<void> {
    let review = "";
    let last = -1;
    for (const { ordinal, item } of turn.messages?.values() ?? []) {
      if (item.type === "agentMessage" && ordinal > last && item.text.trim() !== "") {
        last = ordinal;
        review = item.text;
      }
    }
    // The last model message's record is held for the turn's end (turn-stream.ts): it goes first,
    // so its item/completed precedes exitedReviewMode.
    for (const item of turn.deferred?.items ?? []) if (item.type === "agentMessage" && item.text.trim() !== "") review = item.text;
    await this.stream.flushDeferred(thread, turn);
    if (turn.abort.signal.aborted) review ||= "The review was interrupted.";
    else if (result.stopReason === "error") review ||= `The review failed: ${result.error?.message ?? "unknown error"}`;
    const now = Date.now();
    const exited: ThreadItem = { type: "exitedReviewMode", id: uuidv7(), review, startedAtMs: now, completedAtMs: now };
    await this.deps.runtime.commit(thread, [userItemStarted(thread, turn, exited, now), completedEvent(thread, turn, exited, now)], (tx) =>
      this.recorder.insert(tx, thread, turn, exited, "completed", now),
    );
  }

  // ---- interrupt and steer -----------------------------------------------------------------

  async interrupt(threadId: string, turnId: string): Promise<Record<string, never>> {
    const active = this.deps.runtime.loaded.get(threadId)?.activeTurn as ActiveTurn | null | undefined;
    // A turn running on another process: the request goes to its owner.
    if (!active && this.deps.runtime.cluster && (await this.deps.runtime.cluster.toOwner(threadId, { kind: "interrupt", threadId, turnId }))) return {};
    return this.interruptLocal(threadId, turnId);
  }

  async interruptLocal(threadId: string, turnId: string): Promise<Record<string, never>> {
    const { runtime, turns } = this.deps;
    const thread = runtime.loaded.get(threadId);
    const active = thread?.activeTurn as ActiveTurn | null | undefined;
    if (active && active.id === turnId) {
      active.abort.abort();
      return {};
    }
    // Idempotent: interrupting a turn that already ended is not an error.
    const stored = await turns.getTurn(turnId);
    if (stored && stored.threadId === threadId) return {};
    await runtime.getRecord(threadId); // unknown thread → ThreadNotFoundError
    throw new TurnRequestError(`turn not found on thread ${threadId}: ${turnId}`);
  }

  async steer(threadId: string, expectedTurnId: string, input: UserInput[], clientId: string | null): Promise<{ turnId: string }> {
    const cluster = this.deps.runtime.cluster;
    if (cluster && !this.deps.runtime.loaded.get(threadId)?.activeTurn) {
      const forwarded = await cluster.toOwner(threadId, { kind: "steer", threadId, turnId: expectedTurnId, input, clientId });
      if (forwarded) return forwarded.result as { turnId: string };
    }
    return this.steerLocal(threadId, expectedTurnId, input, clientId);
  }

  async steerLocal(threadId: string, expectedTurnId: string, input: UserInput[], clientId: string | null): Promise<{ turnId: string }> {
    const { runtime } = this.deps;
    const thread = runtime.loaded.get(threadId);
    if (!thread) await runtime.getRecord(threadId);
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
    const active = this.deps.runtime.loaded.get(threadId)?.activeTurn as ActiveTurn | null | undefined;
    if (active) await active.finished;
  }

  /** Interrupts every running turn and waits for them to end (shutdown), except those waiting on approval. */
  async interruptAll(): Promise<void> {
    const running: Promise<void>[] = [];
    for (const thread of this.deps.runtime.loaded.values()) {
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

/** item/started of the turn's user message: its row is written complete, so the event refers to it (event-refs.ts). */
function userItemStarted(thread: LoadedThread, turn: ActiveTurn, userItem: ThreadItem, now: number): ThreadEvent {
  const params = { item: { ...userItem, completedAtMs: null }, threadId: thread.id, turnId: turn.id, startedAtMs: now };
  return { method: "item/started", params, stored: { params: { ...params, item: itemRef(userItem, { completedAtMs: null }) }, itemIds: [userItem.id] } };
}
