/**
 * Record before publish (DESIGN.md §4): every thread-scoped notification except deltas is
 * numbered (`seq`), written to the event log in the same transaction as the fact it announces,
 * and published only after that commit, in `seq` order — to this process's subscribers and,
 * in a cluster, relayed to the other processes (fanout.ts). Deltas are numbered in the same
 * sequence but published without being stored (`publishLive`).
 */
import type { Ride } from "../store/side-writes.js";
import { inIssueOrder, type Transaction } from "../store/transaction.js";
import type { ThreadStatus } from "../protocol/common.js";
import type { ServerNotificationMethod } from "../protocol/methods.js";
import type { StoredEvent } from "../store/records.js";
import { TurnAlreadyEndedError } from "../store/turn-store.js";
import { LeaseLostError } from "./leases.js";
import type { LoadedThread } from "./loaded-thread.js";
import type { ThreadContext } from "./thread-context.js";
import type { ThreadLeases } from "./thread-leases.js";
import type { SharedNotification, Subscriber, ThreadEvent } from "./thread-types.js";

export interface CommitOptions {
  after?: Promise<void>;
  alsoTo?: Subscriber;
  creating?: boolean;
  underHeldLease?: boolean;
  attempts?: number;
  onError?: (err: unknown) => void;
}

export class EventLog {
  constructor(
    private readonly ctx: ThreadContext,
    private readonly leases: ThreadLeases,
  ) {}

  /**
   * Records `events` (with `write`, in one transaction) and then publishes them to the thread's
   * subscribers, plus `alsoTo` (e.g. the requester of an action on a thread it did not subscribe
   * to). Publication also waits for `after` (e.g. "the response to this request was written").
   * Resolves once the transaction committed; rejects (publishing nothing) if it failed.
   * `underHeldLease`: only under the lease held now (a turn's own writes): without one the thread
   * was lost, and taking it again would write about a turn another process has closed.
   * `attempts`: how often the transaction is tried (see `record`); `onError`: told of the final
   * failure before anything queued after this commit runs.
   */
  async commit(thread: LoadedThread, events: ThreadEvent[], write?: (tx: Transaction) => Promise<void>, opts: CommitOptions = {}): Promise<StoredEvent[]> {
    // Seq numbers and writes only under the thread's lease (taken here when not held).
    if (this.ctx.cluster && !thread.lease) {
      if (opts.underHeldLease) throw new LeaseLostError(thread.id);
      await this.leases.claim(thread);
    }
    const lease = thread.lease;
    const stamped = this.stamp(thread, events);
    const reservation = thread.seq.reservationNeeded();
    const committed = this.record(thread, { lease, reservation, stamped, write, creating: opts.creating ?? false, attempts: opts.attempts ?? 1, onError: opts.onError });
    committed.catch((err) => {
      if (err instanceof LeaseLostError) this.leases.leaseLost(thread);
    });
    // Publication is a step of its own so later events wait for it, but failures do not block them.
    let recorded = false;
    void thread
      .enqueue(async () => {
        await committed;
        recorded = true;
        await opts.after;
        // The stored emittedAtMs goes out live too, so a replayed copy is identical to the live one.
        for (const e of stamped) this.deliver(thread, e.method, e.params, opts.alsoTo, e.emittedAtMs);
        const last = stamped[stamped.length - 1];
        const fanout = this.ctx.cluster?.fanout;
        if (fanout) {
          if (last) fanout.committed(thread.id, last.seq);
          else fanout.requestsChanged(thread.id);
        }
      })
      .catch((err) => {
        // A failed transaction published nothing, and its caller has the error (awaited below).
        if (!recorded) return;
        // Past the commit (a throwing subscriber, a failed `after`): the events are stored, so
        // nothing is lost — a client that missed them is replayed them from the log when it
        // resumes, and other processes read the log at their next wake-up or heartbeat.
        this.ctx.log.warn({ err, threadId: thread.id }, "could not publish recorded events");
      });
    await committed;
    if (lease) this.leases.releaseIfIdle(thread);
    return stamped;
  }

  /**
   * Numbers events that are published only once a later transaction records them (an ending the
   * database did not take, unrecorded.ts): told to nobody now, so a number is never shown twice.
   */
  stampHeld(thread: LoadedThread, events: ThreadEvent[]): StoredEvent[] {
    // The recording transaction raises the stored reservation above them (unrecorded.ts, seqUpTo).
    return this.stamp(thread, events);
  }

  /** Seq numbers and the emission time for events about to be recorded. */
  private stamp(thread: LoadedThread, events: ThreadEvent[]): StoredEvent[] {
    const now = Date.now();
    return events.map((e) => {
      const seq = thread.seq.next();
      const stamped: StoredEvent = { seq, method: e.method, params: { ...e.params, seq }, emittedAtMs: now };
      if (e.stored) stamped.stored = { params: { ...e.stored.params, seq }, itemIds: e.stored.itemIds };
      return stamped;
    });
  }

  /**
   * The recording transaction of `stamped` (after every earlier one of the thread). Its
   * statements are pipelined: issued without waiting for each other's answers (postgres.js sends
   * them on the transaction's connection back to back), so a transaction costs about three round
   * trips (begin, statements, commit) whatever its size. Errors are reported in the order the
   * statements were issued (the fence's lease error first).
   */
  private record(
    thread: LoadedThread,
    r: {
      lease: { epoch: number } | null;
      reservation: number | null;
      stamped: StoredEvent[];
      write?: (tx: Transaction) => Promise<void>;
      creating: boolean;
      attempts: number;
      onError?: (err: unknown) => void;
    },
  ): Promise<void> {
    const { store, log } = this.ctx;
    return thread.inOrder(async () => {
      const t0 = performance.now();
      let riders = true;
      for (let attempt = 1; ; attempt++) {
        const carried: { ride: Ride | null } = { ride: null };
        try {
          await store.transaction(async (tx) => {
            // A new thread's row first: the fence and the events refer to it.
            if (r.creating && r.write) await r.write(tx);
            const statements: Promise<unknown>[] = [];
            // The fence first: a process that lost the lease writes nothing (the transaction aborts).
            if (r.lease) statements.push(this.ctx.cluster!.leases.fence(tx, thread.id, r.lease.epoch, r.reservation ?? 0));
            if (r.write && !r.creating) statements.push(r.write(tx));
            // A retry keeps the numbers: if the failed attempt did commit (its acknowledgement was
            // lost), its rows are there already and the events are not stored twice.
            statements.push(store.insertEvents(tx, thread.id, r.stamped, { ifAbsent: attempt > 1 }));
            if (!r.lease && r.reservation !== null) statements.push(store.reserveSeq(tx, thread.id, r.reservation));
            // Last, so a failing one cannot hide this transaction's own failure: the small writes
            // waiting for a transaction (an audit row, a token count) commit with this one.
            const ride = riders ? (store.sideWrites?.board(tx) ?? null) : null;
            if (ride) statements.push(...(carried.ride = ride).statements);
            await inIssueOrder(statements);
          });
          carried.ride?.landed();
          break;
        } catch (err) {
          carried.ride?.missed();
          if (carried.ride?.caused(err)) {
            // A rider's own failure: the same attempt again without riders (they go alone).
            riders = false;
            attempt--;
            continue;
          }
          // Retried in the thread's slot: nothing recorded or published after it overtakes it.
          const final = attempt >= r.attempts || err instanceof LeaseLostError || err instanceof TurnAlreadyEndedError;
          if (final) {
            r.onError?.(err); // before anything queued after this commit runs
            throw err;
          }
          log.warn({ err, threadId: thread.id, attempt }, "could not record events; retrying");
          await new Promise((resolve) => setTimeout(resolve, 20 * attempt));
        }
      }
      this.ctx.onCommit?.((performance.now() - t0) / 1000);
    });
  }

  /**
   * Publishes a notification that is not stored (deltas), in order with recorded ones: after
   * every publication queued before it. `stillWanted`: checked when its turn comes (a delta whose
   * item/started could not be recorded is dropped).
   */
  publishLive(thread: LoadedThread, method: ServerNotificationMethod, params: Record<string, unknown>, stillWanted?: () => boolean): StoredEvent {
    const { store, log } = this.ctx;
    const seq = thread.seq.next();
    const reservation = thread.seq.reservationNeeded();
    if (reservation !== null) {
      const lease = thread.lease;
      const cluster = this.ctx.cluster;
      void thread
        .inOrder(() =>
          lease && cluster
            ? store.transaction((tx) => cluster.leases.fence(tx, thread.id, lease.epoch, reservation))
            : store.reserveSeq(null, thread.id, reservation),
        )
        .catch((err) => log.error({ err, threadId: thread.id }, "could not persist seq reservation"));
    }
    const body = { ...params, seq };
    const emittedAtMs = Date.now();
    const send = () => {
      if (stillWanted && !stillWanted()) return;
      this.deliver(thread, method, body, undefined, emittedAtMs);
      const fanout = this.ctx.cluster?.fanout;
      fanout?.delta(thread.id, { seq, method, params: body, emittedAtMs });
    };
    if (thread.idle) send();
    else void thread.enqueue(async () => send());
    return { seq, method, params: body, emittedAtMs };
  }

  /** Sends to this process's subscribers (events of this process, or relayed from another). */
  deliver(thread: LoadedThread, method: string, params: Record<string, unknown>, alsoTo?: Subscriber, emittedAtMs?: number): void {
    const seq = params.seq;
    if (typeof seq === "number" && seq > thread.deliveredSeq) {
      thread.deliveryStartsAfter(seq - 1);
      thread.deliveredSeq = seq;
    }
    const n: SharedNotification = { method, params, emittedAtMs: emittedAtMs ?? Date.now() };
    for (const s of thread.subscribers) s.notifyShared ? s.notifyShared(n) : s.notify(method, params, n.emittedAtMs);
    if (alsoTo && !thread.subscribers.has(alsoTo)) alsoTo.notifyShared ? alsoTo.notifyShared(n) : alsoTo.notify(method, params, n.emittedAtMs);
  }

  async setStatus(thread: LoadedThread, status: ThreadStatus, write?: (tx: Transaction) => Promise<void>): Promise<void> {
    thread.status = status;
    await this.commit(thread, [{ method: "thread/status/changed", params: { threadId: thread.id, status } }], write);
  }
}
