/**
 * Turn endings the database did not take (issue 12, Postgres outages; issue 31: one ending, told
 * as stored).
 *
 * When the end of a turn cannot be committed (the database is away), clients are told no ending
 * (DESIGN.md §7): only an `error` (willRetry) saying the ending waits for the database. This
 * module keeps the ending — the turn record, the item payloads and the events, already numbered —
 * and records it once the database answers again, under the lease the turn ran with, then tells
 * it: afterwards the store says what clients were told (the turn `failed`, the thread
 * `systemError`, no item stuck), and a client resuming by `afterSeq` replays the same events.
 * If another process took the thread over meanwhile (this one was cut off past the lease TTL), its
 * ending is the stored one: this one is dropped and that one is delivered instead, so every
 * client sees the one stored ending, once.
 *
 * Until then the thread's state in the store is not the one clients know: no new turn starts on
 * it (ThreadStateUnrecordedError), the lease is kept (another process must not take a thread
 * whose last turn still reads `inProgress`), and the thread stays loaded (its in-memory seq
 * counter is above every number handed out; the stored reservation may not be).
 */
import type { ThreadStatus } from "../protocol/common.js";
import type { ThreadItem } from "../protocol/items.js";
import type { StoredEvent, TurnRecord } from "../store/records.js";
import { TurnAlreadyEndedError, type TurnStore } from "../store/turn-store.js";
import { LeaseLostError } from "./leases.js";
import { TurnRequestError } from "./turn-errors.js";
import type { LoadedThread } from "./loaded-thread.js";
import type { RuntimeLogger } from "./thread-types.js";
import type { ThreadStore } from "../store/thread-store.js";
import type { ClusterLinks } from "./cluster.js";

/** Default for APP_SERVER_RECORD_RETRY_MS: how often an unrecorded ending is tried again. */
export const DEFAULT_RECORD_RETRY_MS = 500;

export interface UnrecordedEnd {
  record: TurnRecord;
  systemError: boolean;
  /** Completions of items whose own record failed (a command that ran, a closed message). */
  items: ThreadItem[];
  /** The events to record and then publish (numbered, told to nobody yet). */
  events: StoredEvent[];
  /** The thread's status once the ending is recorded. */
  threadStatus: ThreadStatus;
  /** The lease the turn ran under (null: no leases, e.g. a unit test runtime). */
  epoch: number | null;
}

/** turn/start (or compact) on a thread whose last ending is not recorded yet. */
export class ThreadStateUnrecordedError extends TurnRequestError {
  constructor(threadId: string, turnId: string) {
    super(
      `thread ${threadId}: the end of turn ${turnId} is not recorded yet (the database was unavailable); ` +
        `new turns are refused until it is — retry when the database is back`,
    );
    this.name = "ThreadStateUnrecordedError";
  }
}

/**
 * What recording a held ending uses of the thread runtime (ThreadRuntime, threads.ts). Declared
 * here, not imported, so that the runtime may hold this object without an import cycle.
 */
export interface UnrecordedHost {
  readonly store: ThreadStore;
  readonly cluster: ClusterLinks | null;
  deliver(thread: LoadedThread, method: string, params: Record<string, unknown>, alsoTo?: undefined, emittedAtMs?: number): void;
  leaseLost(thread: LoadedThread): void;
  releaseIfIdle(thread: LoadedThread): void;
  maybeUnload(thread: LoadedThread): void;
}

export class UnrecordedEnds {
  private readonly pending = new Map<string, { thread: LoadedThread; end: UnrecordedEnd }>();
  private timer: NodeJS.Timeout | null = null;
  private attempting: Promise<void> | null = null;

  constructor(
    private readonly runtime: UnrecordedHost,
    private readonly turns: TurnStore,
    private readonly log: RuntimeLogger,
    private readonly retryMs = DEFAULT_RECORD_RETRY_MS,
  ) {}

  has(threadId: string): boolean {
    return this.pending.has(threadId);
  }

  /** Refuses new work on a thread whose last ending is not recorded (nor told) yet. */
  assertRecorded(threadId: string): void {
    const p = this.pending.get(threadId);
    if (p) throw new ThreadStateUnrecordedError(threadId, p.end.record.id);
  }

  add(thread: LoadedThread, end: UnrecordedEnd): void {
    this.pending.set(thread.id, { thread, end });
    this.log.warn({ threadId: thread.id, turnId: end.record.id, events: end.events.length }, "the end of a turn is kept until the database takes it");
    this.schedule();
  }

  private schedule(): void {
    if (this.timer || this.pending.size === 0) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.attemptAll().finally(() => this.schedule());
    }, this.retryMs);
    this.timer.unref();
  }

  /** One pass over every pending ending (passes never overlap). */
  attemptAll(): Promise<void> {
    return (this.attempting ??= (async () => {
      for (const [threadId, { thread, end }] of [...this.pending]) {
        try {
          // In the thread's pipeline: after anything queued before, before anything queued after.
          await thread.enqueue(async () => {
            await this.record(thread, end);
            // Recorded: now it is told, with the numbers it has in the log.
            thread.status = end.threadStatus;
            thread.record = { ...thread.record, systemError: end.systemError, updatedAtMs: end.record.completedAtMs! };
            for (const e of end.events) this.runtime.deliver(thread, e.method, e.params, undefined, e.emittedAtMs);
          });
          this.pending.delete(threadId);
          this.log.info({ threadId, turnId: end.record.id }, "recorded the end of a turn after the database came back");
          const last = end.events[end.events.length - 1];
          if (last) this.runtime.cluster?.fanout?.committed(thread.id, last.seq); // other processes' clients
          this.afterRecorded(thread);
        } catch (err) {
          if (err instanceof LeaseLostError || err instanceof TurnAlreadyEndedError) {
            // Another process swept the thread (this one was cut off longer than the lease TTL):
            // it recorded an ending of its own, which is the one this process's clients get.
            this.pending.delete(threadId);
            this.log.warn({ threadId, turnId: end.record.id }, "the end of a turn could not be recorded: the thread's lease was taken over meanwhile");
            this.runtime.leaseLost(thread); // which delivers the stored ending from the log
            this.afterRecorded(thread);
          }
          // Otherwise the database is still away: the next pass tries again.
        }
      }
    })().finally(() => (this.attempting = null)));
  }

  private async record(thread: LoadedThread, end: UnrecordedEnd): Promise<void> {
    const { store, cluster } = this.runtime;
    const lastSeq = end.events.length ? end.events[end.events.length - 1]!.seq : 0;
    // Above every number handed out meanwhile (deltas too), not only the recorded ones.
    const seqUpTo = Math.max(lastSeq, thread.seq.reservedUpTo);
    await store.transaction(async (tx) => {
      if (cluster && end.epoch !== null) await cluster.leases.fence(tx, thread.id, end.epoch, seqUpTo);
      else await store.reserveSeq(tx, thread.id, seqUpTo);
      for (const item of end.items) {
        await this.turns.completeItem(tx, item.id, item, "status" in item ? String(item.status) : "completed", item.completedAtMs ?? end.record.completedAtMs!);
      }
      await this.turns.finishTurn(tx, end.record.id, end.record);
      await store.updateThread(tx, thread.id, { systemError: end.systemError, updatedAtMs: end.record.completedAtMs! });
      await store.insertEvents(tx, thread.id, end.events);
    });
  }

  private afterRecorded(thread: LoadedThread): void {
    // The history written during the outage may be partial: reload it from the store.
    thread.entries = null;
    thread.history = null;
    this.runtime.releaseIfIdle(thread);
    this.runtime.maybeUnload(thread);
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}
