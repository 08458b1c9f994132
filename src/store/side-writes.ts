/**
 * Small writes nobody waits for — an action's audit row, a model call's token count — committed
 * together with the next recording transaction instead of each on its own (issue 33: every commit
 * is a WAL flush, and those flushes bound how many turns one Postgres can take a second).
 *
 *   riding     the next recording transaction (runtime/event-log.ts) issues the waiting writes
 *              after its own statements, so they commit with it: a message-only turn's audit row
 *              and token count commit with the turn's ending instead of as two commits of their own
 *   alone      when no transaction comes within `maxWaitMs` (a quiet server), or when asked to
 *              (`flush`: audit/list and user/usage read what was written before them; shutdown),
 *              the waiting writes commit in one transaction of their own
 *   in order   one batch is under way at a time (riding or alone) and batches leave in the order
 *              their writes were added, so the audit trail keeps the order of a process's actions
 *   isolated   a write never costs a recording transaction: a carrier that fails because of a
 *              rider is tried again without it (`Ride.caused`), and riders of a carrier that failed
 *              for any reason go alone, then each by itself, so one bad write loses only itself
 *
 * A write waits at most `maxWaitMs` (the server's limits.sideWriteMaxWaitMs) more than it did
 * when it committed at once; under load a transaction comes along within milliseconds, which is
 * where the saved commits matter. Committing with a transaction that fails to commit does not
 * lose a write (it goes alone), but one whose COMMIT succeeded while its answer was lost may
 * have its riders written twice: an audit row twice rather than never.
 */
import type { Sql } from "postgres";
import type { Queryable } from "./thread-store.js";
import { inIssueOrder, type Transaction } from "./transaction.js";

/** One write: issues its statement(s) on `q` (a transaction's or the pool's). */
export type SideWrite = (q: Queryable) => Promise<unknown>;

/** Writes one transaction carries at most (a carrier stays a few statements longer, not unbounded). */
const MAX_RIDERS = 64;

interface Entry {
  write: SideWrite;
  settle(err?: unknown): void;
  /** Rode a transaction that failed: goes alone from now on. */
  missed: boolean;
}

/** Writes riding one transaction: settled by the carrier once it knows how its transaction ended. */
export interface Ride {
  /** The riders' statements, issued after the carrier's own (await them with the carrier's). */
  readonly statements: Promise<unknown>[];
  /** Whether `err` (what the transaction threw) is a rider's failure: the carrier should try again without riders. */
  caused(err: unknown): boolean;
  /** The transaction committed: the riders are written. */
  landed(): void;
  /** The transaction failed: the riders go alone. */
  missed(): void;
}

export class SideWrites {
  private waiting: Entry[] = [];
  /** Whether a batch is under way (riding or alone). */
  private underWay = false;
  private timer: NodeJS.Timeout | null = null;
  /** Set by `flush`: what waits goes now, not after `maxWaitMs`. */
  private hurry = false;
  /** Settles after the last write added so far (never rejects). */
  private last: Promise<void> = Promise.resolve();

  constructor(
    private readonly sql: Sql,
    /** How long a write waits for a transaction to ride before it commits alone. */
    private readonly maxWaitMs: number,
  ) {}

  /**
   * Queues `write`; resolves once it committed, rejects with its error when it could not be
   * written (the caller logs it: nothing else depends on it).
   */
  add(write: SideWrite): Promise<void> {
    let settle!: (err?: unknown) => void;
    const written = new Promise<void>((resolve, reject) => {
      settle = (err) => (err === undefined ? resolve() : reject(err));
    });
    const last = written.catch(() => {});
    this.last = last;
    this.waiting.push({ write, settle, missed: false });
    this.next();
    return written;
  }

  /**
   * Issues the waiting writes on `tx` after the statements the caller issued so far, or returns
   * null when nothing waits or a batch is under way (they ride a later transaction).
   */
  board(tx: Transaction): Ride | null {
    if (this.underWay || this.waiting.length === 0 || this.waiting[0]!.missed) return null;
    const riders = this.take((e) => !e.missed);
    this.underWay = true;
    this.stopTimer();
    const failures = new Set<unknown>();
    const statements = riders.map((e) => {
      const issued = issue(e, tx);
      issued.catch((err: unknown) => failures.add(err));
      return issued;
    });
    let done = false;
    const end = (landed: boolean) => {
      if (done) return;
      done = true;
      this.underWay = false;
      if (landed) for (const e of riders) e.settle();
      else {
        for (const e of riders) e.missed = true;
        this.waiting.unshift(...riders);
      }
      this.next();
    };
    return { statements, caused: (err) => failures.has(err), landed: () => end(true), missed: () => end(false) };
  }

  /** Writes what waits now; resolves once every write added before the call was written or given up. */
  flush(): Promise<void> {
    if (this.waiting.length > 0) {
      this.hurry = true;
      this.next();
    }
    return this.last;
  }

  /** What comes next: nothing (a batch is under way), a batch alone now, or a timer. */
  private next(): void {
    if (this.underWay) return;
    if (this.waiting.length === 0) {
      this.hurry = false;
      this.stopTimer();
      return;
    }
    if (this.hurry || this.waiting[0]!.missed) {
      this.stopTimer();
      void this.alone();
    } else if (!this.timer) {
      this.timer = setTimeout(() => {
        this.timer = null;
        if (!this.underWay) void this.alone();
      }, this.maxWaitMs);
      this.timer.unref();
    }
  }

  private stopTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  /** The first waiting writes (up to MAX_RIDERS, while `fits`), taken off the queue. */
  private take(fits: (e: Entry) => boolean): Entry[] {
    let n = 0;
    while (n < this.waiting.length && n < MAX_RIDERS && fits(this.waiting[n]!)) n++;
    return this.waiting.splice(0, n);
  }

  /** The waiting writes in a transaction of their own; after a failure, each by itself. */
  private async alone(): Promise<void> {
    const batch = this.take(() => true);
    this.underWay = true;
    try {
      if (batch.length === 1) await issue(batch[0]!, this.sql);
      else await this.sql.begin((tx) => inIssueOrder(batch.map((e) => issue(e, tx))));
      for (const e of batch) e.settle();
    } catch (err) {
      if (batch.length === 1) batch[0]!.settle(err);
      else
        for (const e of batch)
          await issue(e, this.sql).then(
            () => e.settle(),
            (err: unknown) => e.settle(err),
          );
    } finally {
      this.underWay = false;
      this.next();
    }
  }

}

/** Issues one write; a write that throws before issuing fails like one its statement failed. */
function issue(e: Entry, q: Queryable): Promise<unknown> {
  try {
    return e.write(q);
  } catch (err) {
    return Promise.reject(err);
  }
}
