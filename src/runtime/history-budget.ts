/**
 * The budget of the loaded threads' heavy state (issue 33 item 4). A loaded thread keeps its
 * history log and the model context replayed from it (`entries`, `history`) in memory between
 * turns; with no bound, 20 000 threads held by open connections cost ~0.5 GiB. Here the threads
 * whose history is in memory are kept least recently used first with an estimate of its size, and
 * when the total goes over `maxBytes` the least recently used idle ones drop it — also threads a
 * connection is still subscribed to: the LoadedThread stays (its subscribers, queues, seq), so
 * events still reach them, and the next turn, read or resume reloads the log from the store
 * (HistoryLog.ensure), as after a restart.
 *
 * Never dropped: a thread with a running turn, a pending server request (approval), a lease being
 * claimed, anything queued on its commit or publication chains (an entry staged in memory may not
 * be stored yet), or an ending still unrecorded (`held`). A lease kept between turns
 * (thread-leases.ts) does not keep it: with nothing running or queued, the store has every entry. A thread is used (and so most
 * recent) just before its history is read; it can only be dropped once histories totalling the
 * budget were used after it.
 */
import type { HistoryEntry } from "../store/history-entry.js";
import type { LoadedThread } from "./loaded-thread.js";
import { textChars } from "./memory-release.js";

/** What an entry costs besides its text (objects, arrays, the replayed context's slot), roughly. */
const ENTRY_OVERHEAD = 160;

function sizeOf(entries: readonly HistoryEntry[]): number {
  return textChars(entries, Infinity) + entries.length * ENTRY_OVERHEAD;
}

export class HistoryBudget {
  /** Threads whose history is in memory → its estimated size; Map order is use order (oldest first). */
  private readonly inMemory = new Map<LoadedThread, number>();
  /** Estimated bytes of the histories in memory. */
  bytes = 0;
  /** Histories dropped to stay within the budget, since start. */
  evictions = 0;

  constructor(
    /** APP_SERVER_LOADED_HISTORY_MAX_BYTES (config.ts has the default and why). */
    readonly maxBytes: number,
    /** A thread that must keep its history for a reason only the caller knows (an unrecorded ending). */
    private readonly held: (thread: LoadedThread) => boolean = () => false,
  ) {}

  /** Threads whose history is in memory. */
  get threads(): number {
    return this.inMemory.size;
  }

  /** `thread`'s history was (re)loaded: counted anew, most recent, and older ones dropped if over budget. */
  loaded(thread: LoadedThread): void {
    this.forget(thread);
    this.add(thread, sizeOf(thread.entries ?? []));
    this.trim(thread);
  }

  /** `thread`'s history grew by `added` (already appended). */
  grew(thread: LoadedThread, added: readonly HistoryEntry[]): void {
    const before = this.inMemory.get(thread);
    this.forget(thread);
    // Not counted yet (a new thread starts with an empty log without a load): all of it.
    this.add(thread, before === undefined ? sizeOf(thread.entries ?? []) : before + sizeOf(added));
    this.trim(thread);
  }

  /** `thread` is being used: it becomes the most recent. */
  touch(thread: LoadedThread): void {
    const size = this.inMemory.get(thread);
    if (size === undefined) return this.loaded(thread);
    this.inMemory.delete(thread);
    this.inMemory.set(thread, size);
  }

  /** `thread` was unloaded (or its history dropped elsewhere): no longer counted. */
  forget(thread: LoadedThread): void {
    const size = this.inMemory.get(thread);
    if (size === undefined) return;
    this.inMemory.delete(thread);
    this.bytes -= size;
  }

  /** Every thread unloaded at once (shutdown). */
  clear(): void {
    this.inMemory.clear();
    this.bytes = 0;
  }

  private add(thread: LoadedThread, size: number): void {
    this.inMemory.set(thread, size);
    this.bytes += size;
  }

  /** Drops the least recently used histories that may be dropped until the total fits (never `using`'s). */
  private trim(using: LoadedThread): void {
    if (this.bytes <= this.maxBytes) return;
    for (const thread of this.inMemory.keys()) {
      if (this.bytes <= this.maxBytes) return;
      if (thread === using) continue;
      // Dropped elsewhere (a lease taken over, an unload): only the count was left.
      if (thread.entries === null) {
        this.forget(thread);
        continue;
      }
      if (!this.droppable(thread)) continue;
      this.forget(thread);
      thread.entries = null;
      thread.history = null;
      this.evictions++;
    }
  }

  private droppable(t: LoadedThread): boolean {
    return t.activeTurn === null && t.broker.size === 0 && t.claiming === null && t.queued === 0 && !this.held(t);
  }
}
