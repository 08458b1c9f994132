/**
 * The path every kind of turn shares (agent-turn.ts, review-turn.ts, user-shell-turn.ts,
 * compaction-turn.ts): a server-wide turn slot, the start — claim the thread, record and announce
 * the turn with what opens it — the background run of the kind's body, and the settle — wait
 * for user shell commands run inside the turn, observe the stop hooks, record the one ending
 * (turn-end.ts). One active turn per thread.
 */
import { promises as fs } from "node:fs";
import type { Transaction } from "../store/transaction.js";
import type { LoopResult } from "../agent/loop.js";
import type { Message, UserMessage } from "../agent/messages.js";
import { environmentContext } from "../agent/prompt.js";
import { uuidv7 } from "../ids.js";
import type { ThreadStatus } from "../protocol/common.js";
import type { ThreadItem } from "../protocol/items.js";
import type { Turn } from "../protocol/thread.js";
import type { TurnRecord } from "../store/records.js";
import { itemRef } from "../store/event-refs.js";
import { ActiveTurn } from "./active-turn.js";
import type { Compactor } from "./compaction.js";
import type { HistoryEntry } from "./history.js";
import type { ItemRecorder } from "./item-recorder.js";
import type { LoadedThread } from "./loaded-thread.js";
import { environmentOf } from "./settings.js";
import type { Subscriber, ThreadEvent } from "./thread-types.js";
import type { TurnDeps } from "./turn-deps.js";
import { finishTurn } from "./turn-end.js";
import { firstFailure, OverloadedError, TurnRequestError, turnFailed } from "./turn-errors.js";
import { stopHooks } from "./turn-hooks.js";
import type { TurnStream } from "./turn-stream.js";
import { statusFor, turnView } from "./turn-view.js";

/** What the kinds of turn share, built once per server (turns.ts). */
export interface TurnParts {
  readonly deps: TurnDeps;
  readonly recorder: ItemRecorder;
  readonly stream: TurnStream;
  readonly compactor: Compactor;
  readonly lifecycle: TurnLifecycle;
}

/** What a kind of turn runs once the turn is recorded; what it throws fails the turn. */
export type TurnBody = (thread: LoadedThread, turn: ActiveTurn) => Promise<LoopResult>;

/** What a turn starts with besides turn/started, recorded in the same transaction. */
export interface TurnOpening {
  /** Events after thread/status/changed and turn/started (its first items). */
  events: ThreadEvent[];
  /** Every write of the start, the turn's row among them (`record`). */
  write: (tx: Transaction) => Promise<void>;
  /** Runs once the start is recorded, before the turn runs. */
  recorded?: () => void;
}

/**
 * Refuses a turn whose working directory this process cannot see (-32600, nothing recorded, no
 * lease taken): deleted, or on another machine's storage. A turn runs where its thread's lease is,
 * so a process without the workspace must not take it (DESIGN.md §7, docs/cluster.md).
 */
export async function assertCwdExists(cwd: string): Promise<void> {
  const st = await fs.stat(cwd).catch(() => null);
  if (!st?.isDirectory())
    throw new TurnRequestError(
      `the thread's working directory ${cwd} is not an existing directory on this server (in a cluster, every process needs the workspaces at the same path)`,
    );
}

/** item/started of the turn's user message: its row is written complete, so the event refers to it (event-refs.ts). */
export function userItemStarted(thread: LoadedThread, turn: ActiveTurn, userItem: ThreadItem, now: number): ThreadEvent {
  const params = { item: { ...userItem, completedAtMs: null }, threadId: thread.id, turnId: turn.id, startedAtMs: now };
  return { method: "item/started", params, stored: { params: { ...params, item: itemRef(userItem, { completedAtMs: null }) }, itemIds: [userItem.id] } };
}

/** A turn's history entries for `message`: the environment context first while the log is empty. */
export function openingEntries(deps: TurnDeps, thread: LoadedThread, turnOrdinal: number, message: Message): HistoryEntry[] {
  const entries: HistoryEntry[] = [];
  if (thread.entries!.length === 0) entries.push({ kind: "message", turnOrdinal: null, message: environmentContext(environmentOf(thread.record, deps.settings.shell)) });
  entries.push({ kind: "message", turnOrdinal, message });
  return entries;
}

export class TurnLifecycle {
  /** Turns running in this process (start, compact and restored ones). */
  private running = 0;

  constructor(
    private readonly deps: TurnDeps,
    private readonly recorder: ItemRecorder,
    private readonly stream: TurnStream,
  ) {}

  /**
   * Takes a turn slot, or refuses new work past the server-wide limit (answered -32001 by the
   * handlers). Synchronous, and called before the caller's first await: a burst of turn/start
   * cannot all pass the check before any of them counts. The release is idempotent; the caller
   * releases on every path where the turn does not launch, launch() when the run ends.
   */
  reserveSlot(enforceLimit = true): () => void {
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

  /** Runs `body` in the background and then ends the turn (its slot is released when the run ends). */
  launch(thread: LoadedThread, turn: ActiveTurn, body: TurnBody, release: () => void): void {
    this.deps.observer.turnStarted();
    turn.finished = this.run(thread, turn, body).finally(release);
  }

  /**
   * Starts a turn: reserves a slot, claims the thread, records and announces the turn, then
   * launches `body`. `check` runs once the requester is subscribed, before the lease; what it
   * throws refuses the request. `opening` gives what the turn starts with, recorded with it (the
   * message the model is sent and the item clients see first; without it, just the turn's row);
   * it runs with the thread's history loaded and may stage entries into it. `after`: the turn's
   * events wait for it (the response).
   */
  async begin(
    thread: LoadedThread,
    requester: Subscriber,
    body: TurnBody,
    opts: {
      clientUserMessageId?: string | null;
      check?: () => Promise<void>;
      opening?: (turn: ActiveTurn, record: TurnRecord, now: number) => Promise<TurnOpening>;
      after?: Promise<void>;
    } = {},
  ): Promise<Turn> {
    const { runtime, turns, historyLog } = this.deps;
    if (thread.activeTurn) throw new TurnRequestError(`a turn is already running on thread ${thread.id} (turn ${thread.activeTurn.id})`);
    const release = this.reserveSlot(); // before any await (bursts); released below if the turn does not launch
    const now = Date.now();
    const turn = new ActiveTurn(uuidv7(now), now, opts.clientUserMessageId ?? null);
    thread.activeTurn = turn; // claimed synchronously: a concurrent turn/start sees it
    try {
      runtime.subscribe(thread, requester);
      await opts.check?.(); // before the lease: a process that cannot run the turn does not take the thread
      // The lease first (LeaseHeldError: a turn runs on another process): it refreshes the record
      // and, if another process wrote the thread since, the history caches loaded next.
      await runtime.claim(thread);
      await historyLog.ensure(thread);
      turn.ordinal = thread.turnCount;
      const record: TurnRecord = {
        id: turn.id,
        threadId: thread.id,
        ordinal: turn.ordinal,
        status: "inProgress",
        stopReason: null,
        error: null,
        clientUserMessageId: turn.clientUserMessageId,
        startedAtMs: now,
        completedAtMs: null,
      };
      const view = turnView(record, null);
      const active: ThreadStatus = { type: "active", activeFlags: [] };
      const opening = opts.opening ? await opts.opening(turn, record, now) : { events: [], write: (tx: Transaction) => turns.insertTurn(tx, record) };
      await runtime.commit(
        thread,
        [
          { method: "thread/status/changed", params: { threadId: thread.id, status: active } },
          { method: "turn/started", params: { threadId: thread.id, turn: view } },
          ...opening.events,
        ],
        opening.write,
        { after: opts.after },
      );
      opening.recorded?.();
      thread.status = active;
      thread.turnCount++;
      this.launch(thread, turn, body, release);
      turn.recordedAs(view);
      return view;
    } catch (err) {
      release();
      thread.activeTurn = null;
      if (opts.opening) {
        thread.history = null;
        thread.entries = null; // staged entries may not have been stored: reload on next use
      }
      turn.notRecorded(err);
      runtime.releaseIfIdle(thread);
      throw err;
    }
  }

  /** The turn's run: its body (a throw fails the turn), then its end. */
  private async run(thread: LoadedThread, turn: ActiveTurn, body: TurnBody): Promise<void> {
    let result: LoopResult;
    try {
      result = await body(thread, turn);
    } catch (err) {
      result = turnFailed(err);
    }
    await this.end(thread, turn, result);
  }

  /**
   * Ends a turn: first waits for user shell commands run inside it (thread/shellCommand while the
   * turn ran), whose results join the history after the turn's own messages, then finishes it.
   */
  private async end(thread: LoadedThread, turn: ActiveTurn, result: LoopResult): Promise<void> {
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
        result = firstFailure(result, err);
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
}
