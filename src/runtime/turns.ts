/**
 * Turns: the server's TurnRunner, one object over the kinds of turn and what is done to them.
 * One active turn per thread. Each kind is a small runner over one shared start/settle path:
 *
 *   turn-lifecycle.ts    turn slots; start (claim, record, announce), run, settle (the one ending)
 *   agent-turn.ts        turn/start, the agent loop's run, restore after a restart
 *   review-turn.ts       review/start: the agent loop between entered/exitedReviewMode
 *   user-shell-turn.ts   thread/shellCommand: a command as a turn, or as an item of the running one
 *   compaction-turn.ts   thread/compact/start: a turn whose only item is the compaction
 *   turn-control.ts      interrupt, steer, settle; requests forwarded to the thread's owner
 *
 * And the jobs inside a running turn:
 *
 *   turn-model.ts    the provider, request and tools a model-calling turn sends
 *   turn-stream.ts   loop events → items and notifications; the loop's history made durable
 *   item-recorder.ts item persistence (record before publish)
 *   tool-host.ts     the tools a turn offers and the context they record through (+ approvals.ts)
 *   compaction.ts    summaries that fit the window
 *   turn-end.ts      the single terminal event and how each stop reads to a Codex client
 */
import type { TurnObserver } from "../metrics.js";
import type { UserInput } from "../protocol/common.js";
import type { ReviewTarget } from "../protocol/review.js";
import type { Turn } from "../protocol/thread.js";
import type { TurnStartParams } from "../protocol/turn.js";
import { CommandRunner } from "../sandbox/runner.js";
import { ExecPolicyStore } from "../store/execpolicy-store.js";
import type { TurnStore } from "../store/turn-store.js";
import type { HookRunner } from "../hooks/runner.js";
import { AgentTurns } from "./agent-turn.js";
import { Compactor } from "./compaction.js";
import { CompactionTurns } from "./compaction-turn.js";
import type { HistoryLog } from "./history-log.js";
import { ItemRecorder } from "./item-recorder.js";
import type { ProviderPool } from "./provider-pool.js";
import type { RestorableTurn } from "./recovery.js";
import { ReviewTurns } from "./review-turn.js";
import type { RuntimeLogger, Subscriber } from "./thread-types.js";
import type { ThreadRuntime } from "./threads.js";
import { DEFAULT_SOURCES, type ToolSource } from "./tool-host.js";
import { toOwnerIfElsewhere, TurnControl } from "./turn-control.js";
import { NO_OBSERVER, type TurnDeps, type TurnSettings } from "./turn-deps.js";
import { TurnLifecycle, type TurnParts } from "./turn-lifecycle.js";
import { TurnStream } from "./turn-stream.js";
import { UnrecordedEnds } from "./unrecorded.js";
import { UserShellTurns } from "./user-shell-turn.js";

export { OverloadedError, TurnRequestError } from "./turn-errors.js";
export { turnView } from "./turn-view.js";
export { COMPACTION_PROMPT } from "../agent/compaction.js";
export { DEFAULT_STREAM_IDLE_TIMEOUT_MS } from "./turn-model.js";
export type { TurnSettings } from "./turn-deps.js";

export class TurnRunner {
  private readonly deps: TurnDeps;
  private readonly agent: AgentTurns;
  private readonly reviews: ReviewTurns;
  private readonly userShell: UserShellTurns;
  private readonly compaction: CompactionTurns;
  private readonly control: TurnControl;

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
    const deps: TurnDeps = { runtime, turns, providers, settings, log, historyLog, observer, commands, hooks, toolSources: [...DEFAULT_SOURCES, ...extraToolSources], execPolicy };
    const recorder = new ItemRecorder(deps);
    const stream = new TurnStream(deps, recorder);
    const parts: TurnParts = { deps, recorder, stream, compactor: new Compactor(deps, recorder), lifecycle: new TurnLifecycle(deps, recorder, stream) };
    this.deps = deps;
    this.agent = new AgentTurns(parts);
    this.reviews = new ReviewTurns(parts, this.agent);
    this.userShell = new UserShellTurns(parts);
    this.compaction = new CompactionTurns(parts);
    this.control = new TurnControl(deps);
    runtime.unrecorded ??= new UnrecordedEnds(runtime, turns, log);
  }

  /** The user's configured hooks (listed by hooks/list), or null when none are configured. */
  get hooks(): HookRunner | null {
    return this.deps.hooks;
  }

  /** turn/start: a turn opened by the user's message (agent-turn.ts). */
  start(p: TurnStartParams, requester: Subscriber, responded: Promise<void>): Promise<{ turn: Turn }> {
    return this.agent.start(p, requester, responded);
  }

  /** A turn that was waiting on an approval when the previous process died (agent-turn.ts). */
  restore(r: RestorableTurn, epoch?: number): Promise<void> {
    return this.agent.restore(r, epoch);
  }

  /** review/start (review-turn.ts). */
  review(threadId: string, target: ReviewTarget, requester: Subscriber, responded: Promise<void>): Promise<{ turn: Turn }> {
    return this.reviews.review(threadId, target, requester, responded);
  }

  /** thread/compact/start (compaction-turn.ts). */
  compactThread(threadId: string, requester: Subscriber): Promise<void> {
    return this.compaction.compactThread(threadId, requester);
  }

  /**
   * thread/shellCommand (user-shell-turn.ts). A thread that another process is running (its
   * turn, or its lease): the command goes to that owner, which runs it in its turn or a turn of
   * its own; the requester here follows the thread.
   */
  async shellCommand(threadId: string, command: string, timeoutMs: number, requester: Subscriber): Promise<void> {
    const { runtime } = this.deps;
    const forwarded = await toOwnerIfElsewhere(runtime, { kind: "shellCommand", threadId, command, timeoutMs }, async () => {
      const thread = await runtime.load(threadId);
      // Following the thread first (as thread/resume does): the owner's events come back relayed.
      if (!thread.subscribers.has(requester)) await runtime.attach(thread, requester, null);
    });
    if (forwarded) return;
    return this.shellCommandLocal(threadId, command, timeoutMs, requester);
  }

  /** thread/shellCommand on the process that runs (or will run) the thread's turns. */
  shellCommandLocal(threadId: string, command: string, timeoutMs: number, requester: Subscriber): Promise<void> {
    return this.userShell.shellCommandLocal(threadId, command, timeoutMs, requester);
  }

  // ---- what is done to running turns (turn-control.ts) ---------------------------------------

  interrupt(threadId: string, turnId: string): Promise<Record<string, never>> {
    return this.control.interrupt(threadId, turnId);
  }

  interruptLocal(threadId: string, turnId: string): Promise<Record<string, never>> {
    return this.control.interruptLocal(threadId, turnId);
  }

  steer(threadId: string, expectedTurnId: string, input: UserInput[], clientId: string | null): Promise<{ turnId: string }> {
    return this.control.steer(threadId, expectedTurnId, input, clientId);
  }

  steerLocal(threadId: string, expectedTurnId: string, input: UserInput[], clientId: string | null): Promise<{ turnId: string }> {
    return this.control.steerLocal(threadId, expectedTurnId, input, clientId);
  }

  /** Waits for a running turn to end (shutdown, tests). */
  settle(threadId: string): Promise<void> {
    return this.control.settle(threadId);
  }

  /** Interrupts every running turn and waits for them to end (shutdown), except those waiting on approval. */
  interruptAll(): Promise<void> {
    return this.control.interruptAll();
  }
}
