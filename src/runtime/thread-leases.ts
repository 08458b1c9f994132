/**
 * A loaded thread's lease (leases.ts has the protocol): taken before this process writes the
 * thread, given back once nothing runs on it, and dropped when a write is fenced off because
 * another process took the thread over. Without a cluster every method does nothing.
 *
 * A process alone in its cluster (PGlite always; Postgres while no other process is known to
 * live, fanout.ts `relaying`) keeps the lease of a loaded thread between turns: taking and giving
 * it back were two durable commits a turn (an UPDATE each, outside the turn's transactions) that
 * protected nobody. It gives them back when the thread is unloaded, when it stops, when another
 * process joins (`releaseIdle`, on its hello, before the welcome) or asks for one (a claim that
 * finds a live owner and no turn, for a hello missed during a link cut: cluster.ts "release"), and
 * after its own heartbeats had a gap (another process may have taken it for dead). A process that dies alone leaves those leases to expire with
 * its registration (the TTL), as it leaves a running turn's; a restart on the same home frees them
 * at once (its node id expires the predecessor).
 */
import type { ThreadRecord } from "../store/records.js";
import type { LoadedThread } from "./loaded-thread.js";
import { SeqCounter } from "./seq.js";
import type { ThreadContext } from "./thread-context.js";

export class ThreadLeases {
  constructor(private readonly ctx: ThreadContext) {}

  /**
   * Takes the thread's lease for this process. The thread row comes back with it (settings, name
   * — caches are refreshed), and when another
   * process held the lease since this one last did, seq continues above the stored reservation,
   * the history caches are dropped (reloaded on next use) and events it committed are delivered to
   * this process's subscribers first.
   * LeaseHeldError: another live process holds it (a turn runs there).
   */
  claim(thread: LoadedThread): Promise<void> {
    const cluster = this.ctx.cluster;
    if (!cluster || thread.lease) return Promise.resolve();
    return (thread.claiming ??= (async () => {
      try {
        const row = await cluster.leases.acquire(thread.id);
        const { leaseEpoch, ...record } = row;
        const foreign = leaseEpoch !== thread.heldEpoch + 1;
        thread.lease = { epoch: leaseEpoch };
        thread.heldEpoch = leaseEpoch;
        thread.record = record as ThreadRecord;
        // Seq from the database (above every number any holder reserved) unless this process
        // held the previous epoch: then nobody else handed out numbers and memory is exact.
        if (foreign) thread.seq = new SeqCounter(record.seqReserved);
        if (thread.activeTurn === null) thread.status = record.systemError ? { type: "systemError" } : { type: "idle" };
        if (foreign) {
          thread.entries = null;
          thread.history = null;
          // With nobody subscribed too: a connection attaching now replays up to what this
          // process delivered, and the events it commits next go out above that, so a
          // `deliveredSeq` left behind (relays missed during a link cut) would be a gap for good.
          await cluster.catchUp(thread);
        }
      } finally {
        thread.claiming = null;
      }
    })());
  }

  /**
   * Gives the lease back once nothing runs on the thread (after the pending steps); kept instead
   * while this process is alone, unless `evenWhenAlone` (the thread is unloaded: with it goes the
   * only record that this process holds its lease).
   */
  releaseIfIdle(thread: LoadedThread, opts: { evenWhenAlone?: boolean } = {}): void {
    const { cluster, unrecorded, log } = this.ctx;
    // Kept while the thread's last ending is unrecorded: its stored turn still reads inProgress.
    if (!cluster || !thread.lease || unrecorded?.has(thread.id)) return;
    if (!opts.evenWhenAlone && this.alone()) return;
    void thread
      .enqueue(async () => {
        const lease = thread.lease;
        // Only as the last step, with no turn: a later commit stamped under this lease still needs it.
        if (!lease || thread.activeTurn !== null || thread.queued > 1 || thread.claiming || this.ctx.unrecorded?.has(thread.id)) return;
        // Decided again here: another process may have joined since the step was queued.
        if (!opts.evenWhenAlone && this.alone()) return;
        thread.lease = null;
        await cluster.leases.release(thread.id, lease.epoch);
      })
      .catch((err) => log.warn({ err, threadId: thread.id }, "could not release a thread lease"));
  }

  /** Gives back the lease of every loaded thread nothing runs on (another process joined, or this one was cut off). */
  releaseIdle(): void {
    for (const thread of this.ctx.loaded.values()) if (thread.lease && thread.activeTurn === null) this.releaseIfIdle(thread, { evenWhenAlone: true });
  }

  /** No other process can want a thread: PGlite, or Postgres while none relays (fanout.ts). */
  private alone(): boolean {
    const cluster = this.ctx.cluster;
    return !!cluster && !cluster.fanout?.relaying && cluster.leases.heartbeatFresh();
  }

  /** A write was fenced off: another process owns the thread now; stop the turn running here. */
  leaseLost(thread: LoadedThread): void {
    const { cluster, log } = this.ctx;
    if (thread.lease) {
      log.warn({ threadId: thread.id, epoch: thread.lease.epoch }, "lost the thread's lease to another process; stopping its turn here");
      thread.lease = null;
      thread.entries = null;
      thread.history = null;
      (thread.activeTurn as { abort?: AbortController } | null)?.abort?.abort();
    }
    // This process's clients follow the thread from the log now: what the new owner stored (the
    // turn's ending among it) reaches them after whatever is queued here. A relay of it that came
    // while this process still took itself for the owner was not applied, and none may follow.
    if (cluster) {
      void thread
        .enqueue(() => cluster.catchUp(thread))
        .catch((err) => log.warn({ err, threadId: thread.id }, "could not deliver what the thread's new owner recorded; the next relay does"));
    }
  }
}
