/**
 * A loaded thread's history log in memory: loaded once (with its fork ancestry) and appended as the
 * thread runs. Entries are staged — applied in memory at once, ordinals claimed synchronously — and
 * the write that stores them goes into the caller's transaction. What is in memory is bounded by a
 * HistoryBudget: an idle thread's log may be dropped and is then loaded again on next use.
 */
import type { Transaction } from "../store/transaction.js";
import type { Message } from "../agent/messages.js";
import type { HistoryEntry } from "../store/history-entry.js";
import type { ThreadStore } from "../store/thread-store.js";
import type { TurnStore } from "../store/turn-store.js";
import type { HistoryBudget } from "./history-budget.js";
import { modelContext } from "./history.js";
import type { LoadedThread } from "./loaded-thread.js";

export class HistoryLog {
  /** Loads in flight: two callers of `ensure` share one (a second load finishing later would overwrite what the first caller staged). */
  private readonly loading = new WeakMap<LoadedThread, Promise<void>>();

  constructor(
    private readonly turns: TurnStore,
    private readonly threads: ThreadStore,
    private readonly budget: HistoryBudget | null = null,
  ) {}

  /** Loads the thread's log, context and counters unless they are loaded; the thread counts as just used. */
  async ensure(thread: LoadedThread): Promise<void> {
    while (!thread.entries) {
      let load = this.loading.get(thread);
      if (!load) {
        load = this.load(thread).finally(() => this.loading.delete(thread));
        this.loading.set(thread, load);
      }
      await load;
    }
    this.budget?.touch(thread);
    thread.history ??= modelContext(thread.entries);
  }

  private async load(thread: LoadedThread): Promise<void> {
    const [entries, messageCount, ownTurns, lastInputTokens, started] = await Promise.all([
      this.turns.historyEntries(thread.id),
      this.turns.countModelMessages(thread.id),
      this.turns.countTurns(thread.id),
      this.threads.lastInputTokens(thread.id),
      this.turns.threadStartedCallIds(thread.id),
    ]);
    for (const id of started) thread.startedCalls.add(id);
    thread.entries = entries;
    thread.history = modelContext(entries);
    thread.messageCount = messageCount;
    // From the log, not memory: a thread unloaded (or a process restarted) between turns must
    // still compact before the next one, as it would have had it stayed loaded.
    thread.lastInputTokens = lastInputTokens;
    // A fork's own turns are numbered after the parent turns it inherited.
    thread.turnCount = (thread.record.forkTurnCount ?? 0) + ownTurns;
    this.budget?.loaded(thread);
  }

  /**
   * The model context the log replays to (cached until the log grows). During a turn the agent
   * loop owns the working history; this is what the next turn starts from.
   */
  context(thread: LoadedThread): Message[] {
    return (thread.history ??= modelContext(thread.entries!));
  }

  /**
   * Appends entries to the thread's in-memory log now (ordinals are claimed synchronously) and
   * returns the write that stores them, for the caller's transaction.
   */
  stage(thread: LoadedThread, turnId: string | null, entries: HistoryEntry[]): (tx: Transaction) => Promise<void> {
    const first = thread.messageCount;
    thread.messageCount += entries.length;
    thread.entries!.push(...entries);
    thread.history = null; // replayed from the log when next needed: the log is the one copy
    this.budget?.grew(thread, entries);
    return (tx) => this.turns.appendHistory(tx, thread.id, entries.map((entry, i) => ({ ordinal: first + i, turnId, entry })));
  }
}
