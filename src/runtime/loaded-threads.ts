/**
 * Which threads this process has loaded: loading one from the store on first use, the record of
 * a thread loaded or not, and unloading a thread nobody watches and nothing runs on (giving its
 * lease back, and deleting it when it is an ephemeral thread this process created).
 */
import type { ThreadStatus } from "../protocol/common.js";
import type { ThreadRecord } from "../store/records.js";
import { LoadedThread } from "./loaded-thread.js";
import { BIG_HISTORY_CHARS, releaseAfterWork, releaseWhenIdle, textChars } from "./memory-release.js";
import { SeqCounter } from "./seq.js";
import { ServerRequestBroker } from "./server-requests.js";
import type { ThreadContext } from "./thread-context.js";
import type { ThreadLeases } from "./thread-leases.js";
import { ThreadNotFoundError, type Subscriber } from "./thread-types.js";

export class LoadedThreads {
  constructor(
    private readonly ctx: ThreadContext,
    private readonly leases: ThreadLeases,
  ) {}

  /** The loaded thread, loading it from the store if needed. */
  async load(threadId: string): Promise<LoadedThread> {
    const { loaded, store } = this.ctx;
    const existing = loaded.get(threadId);
    if (existing) return existing;
    const record = await store.getThread(threadId);
    if (!record) throw new ThreadNotFoundError(threadId);
    const again = loaded.get(threadId); // a concurrent load won the race
    if (again) return again;
    const thread = this.open(record, new SeqCounter(record.seqReserved));
    loaded.set(threadId, thread);
    return thread;
  }

  async getRecord(threadId: string): Promise<ThreadRecord> {
    const loaded = this.ctx.loaded.get(threadId);
    if (loaded) return loaded.record;
    const record = await this.ctx.store.getThread(threadId);
    if (!record) throw new ThreadNotFoundError(threadId);
    return record;
  }

  /**
   * A LoadedThread for `record` (not yet in `loaded`), its server-request broker wired to
   * announce `serverRequest/resolved` per connection.
   */
  open(record: ThreadRecord, seq: SeqCounter): LoadedThread {
    const thread = new LoadedThread(record, seq);
    thread.broker = new ServerRequestBroker((to, requestId) => {
      // Not a stored event, so it takes no number of its own elsewhere than on the process running
      // the thread: another process's seq block is the owner's, and a number from it would run
      // ahead of the events still to come (a client resuming after it would miss them). There it
      // repeats the last seq this process delivered.
      const seq = this.ctx.cluster && !thread.lease && thread.deliveredSeq >= 0 ? thread.deliveredSeq : thread.seq.next();
      (to as Subscriber).notify("serverRequest/resolved", { threadId: thread.id, requestId, seq });
    });
    return thread;
  }

  statusOf(threadId: string): ThreadStatus {
    return this.ctx.loaded.get(threadId)?.status ?? { type: "notLoaded" };
  }

  loadedIds(): string[] {
    return [...this.ctx.loaded.keys()].sort();
  }

  /** Whether a turn runs on any loaded thread (memory is given back only when none does). */
  private readonly busy = (): boolean => {
    for (const t of this.ctx.loaded.values()) if (t.activeTurn !== null) return true;
    return false;
  };

  /** Unloads a thread nobody watches and nothing runs on (called again when its turn ends). */
  maybeUnload(thread: LoadedThread): void {
    const { loaded, cluster, unrecorded, store, log } = this.ctx;
    // A turn ended or a client left: what that work left behind is given back once idle.
    if (thread.activeTurn === null) releaseAfterWork(this.busy);
    if (thread.subscribers.size > 0 || thread.attaching.size > 0 || thread.activeTurn !== null || loaded.get(thread.id) !== thread) return;
    if (unrecorded?.has(thread.id)) return; // its seq counter is the only exact one until then
    loaded.delete(thread.id);
    this.ctx.historyBudget?.forget(thread);
    cluster?.unfollow(thread);
    this.leases.releaseIfIdle(thread, { evenWhenAlone: true });
    // Its history is garbage now; if it was big, have V8 give the memory back once idle.
    if (thread.entries && textChars(thread.entries) >= BIG_HISTORY_CHARS) {
      releaseWhenIdle(this.busy);
    }
    if (thread.record.ephemeral && thread.createdHere) {
      // Through the thread's own pipeline: its insert may still be committing on another connection.
      void thread
        .enqueue(() => store.deleteThreads([thread.id], cluster?.leases.processId))
        .catch((err) => log.warn({ err, threadId: thread.id }, "could not delete ephemeral thread"));
    }
  }

  /**
   * On shutdown: ephemeral threads do not outlive the process, and the leases kept between turns
   * (thread-leases.ts) are given back, so another process takes those threads without waiting for
   * this one's registration to expire. A thread whose ending is unrecorded keeps its lease: its
   * stored turn still reads inProgress, and the sweeper of the next process closes it.
   */
  async shutdown(): Promise<void> {
    const { loaded, cluster, store, log, unrecorded } = this.ctx;
    const ephemeral = [...loaded.values()].filter((t) => t.record.ephemeral && t.createdHere).map((t) => t.id);
    const leased = [...loaded.values()].filter((t) => t.lease && t.activeTurn === null && !unrecorded?.has(t.id)).map((t) => t.id);
    loaded.clear();
    await cluster?.leases.releaseMany(leased).catch((err) => log.warn({ err }, "could not give back thread leases"));
    this.ctx.historyBudget?.clear();
    await store.deleteThreads(ephemeral, cluster?.leases.processId).catch((err) => log.warn({ err }, "could not delete ephemeral threads"));
  }
}
