/**
 * Recovery by lease (issue 12): every process sweeps, at start and then every interval, for turns
 * in progress on threads whose owner's lease expired (the owner stopped heartbeating: killed,
 * partitioned, hung) — or that have no owner (data from before leases). For each, one transaction
 * locks the thread row `for update skip locked` and takes the lease, so exactly one process wins;
 * it closes the turns as interrupted (recovery.ts) or restores a turn that waited on an approval
 * (the transaction's SQL: store/recovery-store.ts).
 * A thread whose row stays locked while its owner reads dead is held by the owner's own stuck
 * transaction: the sweeper ends the owner's database sessions (LeaseStore.endSessionsOfDead).
 * A live process's turns are never touched, so starting a process is always safe.
 */
import type { RecoveryStore } from "../store/recovery-store.js";
import type { LeaseManager } from "./leases.js";
import { recoverThread, type RestorableTurn } from "./recovery.js";
import type { RuntimeLogger } from "./thread-types.js";
import type { ThreadRuntime } from "./threads.js";

/** The sweeper stopped judging others' leases mid-pass (leases.ts judgesOthers). */
class SweepDeferred extends Error {}

export class Sweeper {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;

  constructor(
    private readonly runtime: ThreadRuntime,
    private readonly leases: LeaseManager,
    private readonly recovery: RecoveryStore,
    private readonly restore: (r: RestorableTurn, epoch: number) => Promise<void>,
    private readonly log: RuntimeLogger,
  ) {}

  start(intervalMs: number): void {
    this.timer = setInterval(() => void this.sweep().catch((err) => this.log.warn({ err }, "sweep failed")), intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** One pass (sweeps never overlap within a process). */
  sweep(): Promise<void> {
    return (this.running ??= this.pass().finally(() => (this.running = null)));
  }

  private async pass(): Promise<void> {
    try {
      await this.passOnce();
    } catch (err) {
      if (!(err instanceof SweepDeferred)) throw err;
    }
  }

  private async passOnce(): Promise<void> {
    if (!this.leases.judgesOthers()) return; // just back from a database outage (leases.ts)
    let orphaned: Array<{ id: string; ownerId: string | null }>;
    try {
      orphaned = await this.leases.store.orphanedThreads();
    } catch (err) {
      this.leases.noteOutage();
      throw err;
    }
    const endedSessionsOf = new Set<string>();
    for (const { id: threadId, ownerId } of orphaned) {
      if (!this.leases.judgesOthers()) return; // the list may predate an outage it hung across
      const done = await this.recovery.claimAndRecover(threadId, this.leases.processId, async (thread) => {
        if (!this.leases.judgesOthers()) throw new SweepDeferred(); // rolled back: not now
        const r = await recoverThread(thread, this.log);
        // Closed turns leave the thread free; a restored one keeps running here, under this lease.
        if (!r.restorable) await thread.release();
        return { restorable: r.restorable, lastSeq: r.lastSeq, epoch: thread.epoch };
      });
      // Not claimed (a claim either recovers the thread or leaves this pass by throwing).
      if (!done && ownerId && !endedSessionsOf.has(ownerId)) {
        // The row may be locked by the dead owner's own transaction, stuck where its process froze
        // or its network path hangs: end its sessions (if it still reads dead); the next pass claims.
        endedSessionsOf.add(ownerId);
        const ended = await this.leases.store.endSessionsOfDead(ownerId).catch((err: unknown) => {
          this.log.warn({ err, threadId, owner: ownerId }, "could not end the database sessions of a process taken for dead");
          return 0;
        });
        if (ended > 0) this.log.warn({ threadId, owner: ownerId, sessions: ended }, "ended the database sessions of a process taken for dead: they held a thread it had a turn on");
      }
      if (!done) continue;
      // Clients of the dead owner, now on other processes, learn how the turn ended.
      this.runtime.cluster?.fanout?.committed(threadId, done.lastSeq);
      const loaded = this.runtime.loaded.get(threadId);
      if (loaded && !loaded.lease) await loaded.enqueue(() => this.runtime.cluster!.catchUp(loaded));
      if (done.restorable) {
        await this.restore(done.restorable, done.epoch).catch((err) =>
          this.log.error({ err, threadId, turnId: done.restorable!.turnId }, "could not restore a waiting turn"),
        );
      }
    }
  }
}
