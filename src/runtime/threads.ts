/**
 * The thread runtime: which threads are loaded in this process, who is subscribed to each, their
 * status and event sequence, and the rule "record before publish" (DESIGN.md §4): every
 * thread-scoped notification except deltas is written to the event log in the same transaction
 * as the fact it announces, and published only after that commit, in `seq` order.
 *
 * It knows nothing about JSON-RPC or sockets: subscribers are anything with `notify`.
 *
 * ThreadRuntime is the one object the rest of the server holds; each of its jobs is a module:
 *
 *   loaded-thread.ts   one loaded thread's state and its two ordering queues
 *   event-log.ts       stamp, record, then publish (commit, publishLive, deliver)
 *   thread-leases.ts   claim, release and loss of a thread's lease
 *   loaded-threads.ts  load, unload, the record of a thread
 *   subscriptions.ts   subscribe, attach with replay, unsubscribe, disconnect
 *   thread-records.ts  start, create, read, list, metadata changes
 */
import type { Transaction } from "../store/transaction.js";
import type { ServerNotificationMethod } from "../protocol/methods.js";
import type { SandboxPolicy, ThreadStatus } from "../protocol/common.js";
import type { Thread, ThreadListParams, ThreadStartParams, ThreadStartResponse, Turn } from "../protocol/thread.js";
import type { StoredEvent, ThreadRecord } from "../store/records.js";
import type { ThreadCursor, ThreadStore } from "../store/thread-store.js";
import type { ClusterLinks } from "./cluster.js";
import { EventLog, type CommitOptions } from "./event-log.js";
import type { LoadedThread } from "./loaded-thread.js";
import { LoadedThreads } from "./loaded-threads.js";
import { Subscriptions } from "./subscriptions.js";
import type { ThreadContext } from "./thread-context.js";
import { ThreadLeases } from "./thread-leases.js";
import { ThreadRecords, type ThreadListResult } from "./thread-records.js";
import type { RuntimeLogger, Subscriber, ThreadDefaults, ThreadEvent } from "./thread-types.js";
import type { UnrecordedEnds } from "./unrecorded.js";
import type { HistoryBudget } from "./history-budget.js";

// For callers outside runtime/ (rpc, server, tests), which import these from here.
export { LoadedThread } from "./loaded-thread.js";
export { decodeCursor, type ThreadListResult } from "./thread-records.js";
export { ThreadNotFoundError } from "./thread-types.js";
export type { ActiveTurnHandle, RuntimeLogger, SharedNotification, Subscriber, ThreadDefaults, ThreadEvent } from "./thread-types.js";

export class ThreadRuntime implements ThreadContext {
  readonly loaded = new Map<string, LoadedThread>();
  /** Observes record-before-publish transaction times (metrics). */
  onCommit?: (seconds: number) => void;
  /** Leases, fan-out and remote commands (set by the server; see cluster.ts). */
  cluster: ClusterLinks | null = null;
  /** Turn endings told to clients while the database was away, recorded when it is back (unrecorded.ts). */
  unrecorded: UnrecordedEnds | null = null;
  /** Bounds the loaded threads' histories in memory (history-budget.ts; set by the server), or null: unbounded. */
  historyBudget: HistoryBudget | null = null;

  private readonly leases: ThreadLeases;
  private readonly events: EventLog;
  private readonly threads: LoadedThreads;
  private readonly subscriptions: Subscriptions;
  private readonly records: ThreadRecords;

  constructor(
    readonly store: ThreadStore,
    readonly defaults: ThreadDefaults,
    cliVersion: string,
    readonly log: RuntimeLogger,
  ) {
    this.leases = new ThreadLeases(this);
    this.events = new EventLog(this, this.leases);
    this.threads = new LoadedThreads(this, this.leases);
    this.subscriptions = new Subscriptions(this, this.threads);
    this.records = new ThreadRecords(this, this.events, this.threads, this.subscriptions, defaults, cliVersion);
  }

  // ---- events (event-log.ts) -----------------------------------------------------------------

  /** Records `events` (with `write`, in one transaction), then publishes them (EventLog.commit). */
  commit(thread: LoadedThread, events: ThreadEvent[], write?: (tx: Transaction) => Promise<void>, opts?: CommitOptions): Promise<StoredEvent[]> {
    return this.events.commit(thread, events, write, opts);
  }

  stampHeld(thread: LoadedThread, events: ThreadEvent[]): StoredEvent[] {
    return this.events.stampHeld(thread, events);
  }

  publishLive(thread: LoadedThread, method: ServerNotificationMethod, params: Record<string, unknown>, stillWanted?: () => boolean): StoredEvent {
    return this.events.publishLive(thread, method, params, stillWanted);
  }

  deliver(thread: LoadedThread, method: string, params: Record<string, unknown>, alsoTo?: Subscriber, emittedAtMs?: number): void {
    this.events.deliver(thread, method, params, alsoTo, emittedAtMs);
  }

  setStatus(thread: LoadedThread, status: ThreadStatus, write?: (tx: Transaction) => Promise<void>): Promise<void> {
    return this.events.setStatus(thread, status, write);
  }

  // ---- leases (thread-leases.ts) -------------------------------------------------------------

  claim(thread: LoadedThread): Promise<void> {
    return this.leases.claim(thread);
  }

  releaseIfIdle(thread: LoadedThread): void {
    this.leases.releaseIfIdle(thread);
  }

  /** Gives back the leases kept between turns (thread-leases.ts): another process joined, or this one was cut off. */
  releaseIdleLeases(): void {
    this.leases.releaseIdle();
  }

  leaseLost(thread: LoadedThread): void {
    this.leases.leaseLost(thread);
  }

  // ---- loaded threads (loaded-threads.ts) ----------------------------------------------------

  load(threadId: string): Promise<LoadedThread> {
    return this.threads.load(threadId);
  }

  getRecord(threadId: string): Promise<ThreadRecord> {
    return this.threads.getRecord(threadId);
  }

  statusOf(threadId: string): ThreadStatus {
    return this.threads.statusOf(threadId);
  }

  loadedIds(): string[] {
    return this.threads.loadedIds();
  }

  maybeUnload(thread: LoadedThread): void {
    this.threads.maybeUnload(thread);
  }

  shutdown(): Promise<void> {
    return this.threads.shutdown();
  }

  // ---- subscriptions (subscriptions.ts) ------------------------------------------------------

  subscribe(thread: LoadedThread, subscriber: Subscriber): void {
    this.subscriptions.subscribe(thread, subscriber);
  }

  attach(thread: LoadedThread, subscriber: Subscriber, afterSeq: number | null, after?: Promise<void>, listening?: () => void): Promise<void> {
    return this.subscriptions.attach(thread, subscriber, afterSeq, after, listening);
  }

  unsubscribe(threadId: string, subscriber: Subscriber): "notLoaded" | "notSubscribed" | "unsubscribed" {
    return this.subscriptions.unsubscribe(threadId, subscriber);
  }

  disconnect(subscriber: Subscriber): void {
    this.subscriptions.disconnect(subscriber);
  }

  // ---- thread records (thread-records.ts) ----------------------------------------------------

  statusesOf(records: ThreadRecord[]): Promise<Map<string, ThreadStatus>> {
    return this.records.statusesOf(records);
  }

  startThread(
    p: ThreadStartParams & { sandboxPolicy?: SandboxPolicy | null; source?: string; userId?: string },
    subscriber: Subscriber,
    responded?: Promise<void>,
  ): Promise<ThreadStartResponse> {
    return this.records.startThread(p, subscriber, responded);
  }

  createThread(
    record: ThreadRecord,
    subscriber: Subscriber,
    opts?: { responded?: Promise<void>; write?: (tx: Transaction) => Promise<void>; turns?: Turn[] },
  ): Promise<ThreadStartResponse> {
    return this.records.createThread(record, subscriber, opts);
  }

  readThread(threadId: string, turns?: Turn[]): Promise<Thread> {
    return this.records.readThread(threadId, turns);
  }

  listThreads(p: ThreadListParams, cursor: ThreadCursor | null, visibleTo?: string | null): Promise<ThreadListResult> {
    return this.records.listThreads(p, cursor, visibleTo);
  }

  updateMetadata(threadId: string, patch: Partial<Pick<ThreadRecord, "archived" | "name">>, event: ThreadEvent, requester: Subscriber): Promise<ThreadRecord> {
    return this.records.updateMetadata(threadId, patch, event, requester);
  }
}
