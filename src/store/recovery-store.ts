/**
 * SQL of recovery by lease (runtime/sweeper.ts, runtime/recovery.ts). An orphaned thread is
 * recovered in one transaction: it is claimed (LeaseStore.claimOrphan: the row is locked and its
 * lease taken), then its in-progress turns are closed or one is kept to restore, and the closing
 * events appended. The runtime decides what happens to each turn and item; this module reads and
 * writes the rows, all inside that transaction, so a recovery commits whole or not at all.
 */
import type { JSONValue, TransactionSql } from "postgres";
import type { TurnError } from "../protocol/common.js";
import type { ThreadItem } from "../protocol/items.js";
import type { LeaseStore } from "./lease-store.js";
import type { ItemRecord, StoredEvent, TurnRecord } from "./records.js";
import { storableText } from "./text.js";
import type { ThreadStore } from "./thread-store.js";

/**
 * A JSON column's value, as the other stores write theirs (thread-store.ts, turn-store.ts): text
 * PostgreSQL cannot store replaced (store/text.ts). The cast is sound: these are protocol objects
 * that came from JSON and go back to it; JSONValue only lacks the index signature they do not declare.
 */
const json = (tx: TransactionSql, v: unknown) => tx.json(storableText(v) as JSONValue);

/** An item a dead process left unfinished: the model call it belongs to, the request it waited on. */
export type UnfinishedItem = ItemRecord & { callId: string | null; pendingRequest: unknown };

/** Whether a turn's items entered and exited review mode (null: it has none), and the next item's ordinal. */
export interface ReviewMarks {
  entered: boolean | null;
  exited: boolean | null;
  next: number;
}

/** A thread this process claimed, inside the claiming transaction: its row stays locked until commit. */
export interface ClaimedThread {
  readonly threadId: string;
  /** The lease epoch this process holds now. */
  readonly epoch: number;
  /** The thread's seq reservation when claimed: events recovery writes continue above it. */
  readonly seqReserved: number;
  /** Its turns in progress, in order. */
  turnsInProgress(): Promise<TurnRecord[]>;
  /** A turn's items without a completion, in order. */
  unfinishedItems(turnId: string): Promise<UnfinishedItem[]>;
  /** Stores an item's final payload and status. */
  completeItem(payload: ThreadItem, status: string, completedAtMs: number): Promise<void>;
  /** How far a turn got with review mode (undefined: the aggregate returned no row). */
  reviewMarks(turnId: string): Promise<ReviewMarks | undefined>;
  /** Adds an item that starts and completes at `atMs`. */
  insertCompletedItem(turnId: string, ordinal: number, item: ThreadItem, atMs: number): Promise<void>;
  /** Ends a turn as interrupted with `error`. */
  interruptTurn(turnId: string, error: TurnError, completedAtMs: number): Promise<void>;
  /** Raises the thread's seq reservation to `seqReserved`, clears its system error and appends `events`. */
  appendEvents(seqReserved: number, events: StoredEvent[]): Promise<void>;
  /** Gives the lease up: the thread has no turn left for this process to run. */
  release(): Promise<void>;
}

export class RecoveryStore {
  constructor(
    private readonly threads: ThreadStore,
    private readonly leases: LeaseStore,
  ) {}

  /**
   * One transaction: claims `threadId` for process `me` when its owner is gone and runs `recover`
   * on it. What `recover` wrote commits when it returns; when it throws, everything — the claim
   * too — rolls back. Null when not claimed (another process is on it, its owner came back, or its
   * row is locked); the transaction then wrote nothing.
   */
  claimAndRecover<T>(threadId: string, me: string, recover: (thread: ClaimedThread) => Promise<T>): Promise<T | null> {
    return this.threads.transaction(async (tx) => {
      const claim = await this.leases.claimOrphan(tx, threadId, me);
      if (!claim) return null;
      return recover(this.claimed(tx, threadId, claim));
    });
  }

  private claimed(tx: TransactionSql, threadId: string, claim: { epoch: number; seqReserved: number }): ClaimedThread {
    const threads = this.threads;
    return {
      threadId,
      epoch: claim.epoch,
      seqReserved: claim.seqReserved,
      turnsInProgress: async () => await tx<TurnRecord[]>`select * from turns where thread_id = ${threadId} and status = 'inProgress' order by ordinal`,
      unfinishedItems: async (turnId) => await tx<UnfinishedItem[]>`
        select * from items where turn_id = ${turnId} and completed_at_ms is null order by ordinal`,
      completeItem: async (payload, status, completedAtMs) => {
        await tx`update items set payload = ${json(tx, payload)}, status = ${status}, completed_at_ms = ${completedAtMs} where id = ${payload.id}`;
      },
      reviewMarks: async (turnId) => {
        const [marks] = await tx<ReviewMarks[]>`
          select bool_or(type = 'enteredReviewMode') as entered, bool_or(type = 'exitedReviewMode') as exited, coalesce(max(ordinal) + 1, 0)::int as next
          from items where turn_id = ${turnId}`;
        return marks;
      },
      insertCompletedItem: async (turnId, ordinal, item, atMs) => {
        await tx`insert into items (id, thread_id, turn_id, ordinal, type, status, payload, started_at_ms, completed_at_ms)
          values (${item.id}, ${threadId}, ${turnId}, ${ordinal}, ${item.type}, 'completed', ${json(tx, item)}, ${atMs}, ${atMs})`;
      },
      interruptTurn: async (turnId, error, completedAtMs) => {
        await tx`update turns set status = 'interrupted', stop_reason = 'interrupted', error = ${json(tx, error)}, completed_at_ms = ${completedAtMs} where id = ${turnId}`;
      },
      appendEvents: async (seqReserved, events) => {
        await tx`update threads set seq_reserved = ${seqReserved}, system_error = false where id = ${threadId}`;
        await threads.insertEvents(tx, threadId, events);
      },
      release: async () => {
        await tx`update threads set owner_id = null where id = ${threadId}`;
      },
    };
  }
}
