/**
 * The thread runtime: which threads are loaded in this process, who is subscribed to each, their
 * status and event sequence, and the rule "record before publish" (DESIGN.md §4): every
 * thread-scoped notification except deltas is written to the event log in the same transaction
 * as the fact it announces, and published only after that commit, in `seq` order.
 *
 * It knows nothing about JSON-RPC or sockets: subscribers are anything with `notify`.
 */
import type { TransactionSql } from "postgres";
import type { AskForApproval, SandboxMode, SandboxPolicy, ThreadStatus } from "../protocol/common.js";
import type { ServerNotificationMethod } from "../protocol/methods.js";
import type { Thread, ThreadListParams, ThreadStartParams, ThreadStartResponse, Turn } from "../protocol/thread.js";
import { uuidv7 } from "../ids.js";
import type { StoredEvent, ThreadRecord } from "../store/records.js";
import type { ThreadCursor, ThreadStore } from "../store/thread-store.js";
import type { Message } from "../agent/messages.js";
import type { HistoryEntry } from "./history.js";
import { SeqCounter } from "./seq.js";
import { BIG_HISTORY_CHARS, releaseWhenIdle, textChars } from "./memory-release.js";
import type { ClusterLinks } from "./cluster.js";
import { LeaseLostError } from "./leases.js";
import { TurnAlreadyEndedError } from "../store/turn-store.js";
import { sandboxModeOf } from "./settings.js";
import { ServerRequestBroker, type ClientReply, type RequestingSubscriber } from "./server-requests.js";
import type { UnrecordedEnds } from "./unrecorded.js";
import { settingsResponse, threadView } from "./thread-view.js";

export interface Subscriber extends RequestingSubscriber {
  readonly id: number;
  /** `emittedAtMs`: when the notification was first emitted (replays keep the original time). */
  notify(method: string, params: object, emittedAtMs?: number): void;
  /**
   * The same, as one object shared by every subscriber of the delivery, so that a transport can
   * serialise it once for all of them (issue 16). Optional; without it `notify` is called.
   */
  notifyShared?(n: SharedNotification): void;
}

/** A notification as delivered to all subscribers at once; its members never change after delivery. */
export interface SharedNotification {
  readonly method: string;
  readonly params: object;
  readonly emittedAtMs: number;
  /** Filled by the first connection that serialises it, reused by the others (src/rpc/prepared-notification.ts). */
  serialised?: unknown;
}

/** What the turn runner keeps on a loaded thread (see src/runtime/turns.ts). */
export interface ActiveTurnHandle {
  readonly id: string;
}

export interface ThreadDefaults {
  modelProvider: string;
  model: string;
  cwd: string;
  approvalPolicy: AskForApproval;
  sandbox: SandboxMode;
}

export interface RuntimeLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export class ThreadNotFoundError extends Error {
  constructor(readonly threadId: string) {
    super(`thread not found: ${threadId}`);
    this.name = "ThreadNotFoundError";
  }
}

/** A notification to record and publish; `seq` is added by the runtime. */
export interface ThreadEvent {
  method: ServerNotificationMethod;
  params: Record<string, unknown>;
  /** How it is stored when that differs: params referring to item rows instead of repeating them (event-refs.ts). */
  stored?: { params: Record<string, unknown>; itemIds: string[] };
}

/** Awaits every statement of a pipelined batch; throws the first failure in issue order. */
export async function inIssueOrder(statements: Promise<unknown>[]): Promise<void> {
  const results = await Promise.allSettled(statements);
  for (const r of results) if (r.status === "rejected") throw r.reason;
}

export class LoadedThread {
  readonly subscribers = new Set<Subscriber>();
  /**
   * Connections whose thread/resume was answered but whose subscription (the `attach` step) has
   * not run yet: they count as subscribed (thread/unsubscribe right after the response cancels it).
   */
  readonly attaching = new Set<Subscriber>();
  status: ThreadStatus;
  /** The running turn, if any (one per thread). */
  activeTurn: ActiveTurnHandle | null = null;
  /** The history log (with ancestry) and the model context it replays to; loaded on first use. */
  entries: HistoryEntry[] | null = null;
  history: Message[] | null = null;
  /** Next turn ordinal and next model-message ordinal (valid once `history` is loaded). */
  turnCount = 0;
  messageCount = 0;
  /** Input tokens of the last model call (for auto-compaction). */
  lastInputTokens = 0;
  broker!: ServerRequestBroker;
  /** Approvals given with `acceptForSession` (kept while the thread is loaded). */
  readonly sessionApprovals = new Set<string>();
  /** The lease this process holds on the thread (leases.ts), or null. */
  lease: { epoch: number } | null = null;
  /** The epoch this process last held: a claim at heldEpoch + 1 means nobody else wrote meanwhile. */
  heldEpoch = -2;
  claiming: Promise<void> | null = null;
  /** Highest seq delivered to this process's subscribers (-1: not known yet). */
  deliveredSeq = -1;
  /**
   * For each subscriber, the seq after which it has received every event live (-1: from the
   * first delivery on, whose seq is not known yet). A connection that resumes while already
   * subscribed (a turn/start retried on a new connection subscribes it first) is replayed only
   * what came before that point: the rest it has had.
   */
  readonly liveAfter = new Map<Subscriber, number>();
  /** Created by this process: only its creator cleans an ephemeral thread away. */
  createdHere = false;

  /**
   * `deliveredSeq` becomes known (`seq`: everything up to it was delivered, or needs no
   * delivery): subscribers that came before start their live delivery after it.
   */
  deliveryStartsAfter(seq: number): void {
    if (this.deliveredSeq >= 0) return;
    this.deliveredSeq = seq;
    for (const [s, after] of this.liveAfter) if (after < 0) this.liveAfter.set(s, seq);
  }
  /** Serialises publication (and steps that must see it, e.g. attach) so notifications leave in `seq` order. */
  private pipeline: Promise<void> = Promise.resolve();
  private inFlight = 0;
  /**
   * Serialises the recording transactions in stamp order, apart from `pipeline`: the stream of a
   * turn goes on (its deltas queue for publication) while an item/started it announced commits.
   */
  private commits: Promise<void> = Promise.resolve();
  private committing = 0;

  constructor(
    public record: ThreadRecord,
    /** Replaced when a restore adopts a lease the sweeper took. */
    public seq: SeqCounter,
  ) {
    this.status = record.systemError ? { type: "systemError" } : { type: "idle" };
  }

  get id(): string {
    return this.record.id;
  }

  /** Runs `step` after every earlier step of this thread; the chain never breaks on failure. */
  enqueue<T>(step: () => Promise<T>): Promise<T> {
    this.inFlight++;
    const run = this.pipeline.then(step);
    this.pipeline = run.then(
      () => undefined,
      () => undefined,
    );
    return run.finally(() => this.inFlight--);
  }

  /** Runs a recording transaction after every earlier one of this thread (failures do not break the chain). */
  inOrder<T>(tx: () => Promise<T>): Promise<T> {
    this.committing++;
    const run = this.commits.then(tx);
    this.commits = run.then(
      () => undefined,
      () => undefined,
    );
    return run.finally(() => this.committing--);
  }

  /**
   * Asks the thread's clients (ServerRequestBroker.ask) once everything queued for publication
   * before the question has gone out: a request never overtakes the item it is about, nor the
   * turn's first events (which wait for the turn/start response).
   */
  async ask(method: string, params: object, signal: AbortSignal, isValid?: (reply: ClientReply) => boolean): Promise<ClientReply | null> {
    await this.enqueue(async () => undefined);
    return this.broker.ask(method, params, this.subscribers, signal, isValid);
  }

  /** Settles once every transaction queued so far has settled. */
  committed(): Promise<void> {
    return this.commits;
  }

  /** Nothing waits to be published (a delta may go out at once). */
  get idle(): boolean {
    return this.inFlight === 0;
  }

  /** Steps and transactions queued or running (a release step checks it is the last one). */
  get queued(): number {
    return this.inFlight + this.committing;
  }
}

export interface ThreadListResult {
  data: Thread[];
  nextCursor: string | null;
  backwardsCursor: string | null;
}

const REPLAY_PAGE = 500;

const encodeCursor = (c: ThreadCursor | null) => (c ? Buffer.from(JSON.stringify(c)).toString("base64url") : null);

export function decodeCursor(text: string): ThreadCursor | null {
  try {
    const c = JSON.parse(Buffer.from(text, "base64url").toString("utf8")) as ThreadCursor;
    if (
      ["created_at", "updated_at", "recency_at", "section_position"].includes(c.key) &&
      Number.isSafeInteger(c.value) &&
      typeof c.id === "string" &&
      (c.inclusive === undefined || typeof c.inclusive === "boolean")
    )
      return c;
  } catch {
    /* fall through */
  }
  return null;
}

export class ThreadRuntime {
  readonly loaded = new Map<string, LoadedThread>();
  /** Observes record-before-publish transaction times (metrics). */
  onCommit?: (seconds: number) => void;
  /** Leases, fan-out and remote commands (set by the server; see cluster.ts). */
  cluster: ClusterLinks | null = null;
  /** Turn endings told to clients while the database was away, recorded when it is back (unrecorded.ts). */
  unrecorded: UnrecordedEnds | null = null;

  constructor(
    readonly store: ThreadStore,
    readonly defaults: ThreadDefaults,
    private readonly cliVersion: string,
    private readonly log: RuntimeLogger,
  ) {}

  // ---- events ------------------------------------------------------------------------------

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
  async commit(
    thread: LoadedThread,
    events: ThreadEvent[],
    write?: (tx: TransactionSql) => Promise<void>,
    opts: { after?: Promise<void>; alsoTo?: Subscriber; creating?: boolean; underHeldLease?: boolean; attempts?: number; onError?: (err: unknown) => void } = {},
  ): Promise<StoredEvent[]> {
    // Seq numbers and writes only under the thread's lease (taken here when not held).
    if (this.cluster && !thread.lease) {
      if (opts.underHeldLease) throw new LeaseLostError(thread.id);
      await this.claim(thread);
    }
    const lease = thread.lease;
    const stamped = this.stamp(thread, events);
    const reservation = thread.seq.reservationNeeded();
    const committed = this.record(thread, { lease, reservation, stamped, write, creating: opts.creating ?? false, attempts: opts.attempts ?? 1, onError: opts.onError });
    committed.catch((err) => {
      if (err instanceof LeaseLostError) this.leaseLost(thread);
    });
    // Publication is a step of its own so later events wait for it, but failures do not block them.
    void thread.enqueue(async () => {
      await committed;
      await opts.after;
      // The stored emittedAtMs goes out live too, so a replayed copy is identical to the live one.
      for (const e of stamped) this.deliver(thread, e.method, e.params, opts.alsoTo, e.emittedAtMs);
      const last = stamped[stamped.length - 1];
      const fanout = this.cluster?.fanout;
      if (fanout) {
        if (last) fanout.committed(thread.id, last.seq);
        else fanout.requestsChanged(thread.id);
      }
    }).catch(() => {});
    await committed;
    if (lease) this.releaseIfIdle(thread);
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
      write?: (tx: TransactionSql) => Promise<void>;
      creating: boolean;
      attempts: number;
      onError?: (err: unknown) => void;
    },
  ): Promise<void> {
    return thread.inOrder(async () => {
      const t0 = performance.now();
      for (let attempt = 1; ; attempt++) {
        try {
          await this.store.transaction(async (tx) => {
            // A new thread's row first: the fence and the events refer to it.
            if (r.creating && r.write) await r.write(tx);
            const statements: Promise<unknown>[] = [];
            // The fence first: a process that lost the lease writes nothing (the transaction aborts).
            if (r.lease) statements.push(this.cluster!.leases.fence(tx, thread.id, r.lease.epoch, r.reservation ?? 0));
            if (r.write && !r.creating) statements.push(r.write(tx));
            // A retry keeps the numbers: if the failed attempt did commit (its acknowledgement was
            // lost), its rows are there already and the events are not stored twice.
            statements.push(this.store.insertEvents(tx, thread.id, r.stamped, { ifAbsent: attempt > 1 }));
            if (!r.lease && r.reservation !== null) statements.push(this.store.reserveSeq(tx, thread.id, r.reservation));
            await inIssueOrder(statements);
          });
          break;
        } catch (err) {
          // Retried in the thread's slot: nothing recorded or published after it overtakes it.
          const final = attempt >= r.attempts || err instanceof LeaseLostError || err instanceof TurnAlreadyEndedError;
          if (final) {
            r.onError?.(err); // before anything queued after this commit runs
            throw err;
          }
          this.log.warn({ err, threadId: thread.id, attempt }, "could not record events; retrying");
          await new Promise((resolve) => setTimeout(resolve, 20 * attempt));
        }
      }
      this.onCommit?.((performance.now() - t0) / 1000);
    });
  }

  // ---- leases (leases.ts) ------------------------------------------------------------------

  /**
   * Takes the thread's lease for this process. The thread row comes back with it (settings, name
   * — caches are refreshed), and when another
   * process held the lease since this one last did, seq continues above the stored reservation,
   * the history caches are dropped (reloaded on next use) and events it committed are delivered to
   * this process's subscribers first.
   * LeaseHeldError: another live process holds it (a turn runs there).
   */
  claim(thread: LoadedThread): Promise<void> {
    if (!this.cluster || thread.lease) return Promise.resolve();
    return (thread.claiming ??= (async () => {
      try {
        const row = await this.cluster!.leases.acquire(thread.id);
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
          if (thread.subscribers.size > 0) await this.cluster!.catchUp(thread);
        }
      } finally {
        thread.claiming = null;
      }
    })());
  }

  /** Gives the lease back once nothing runs on the thread (after the pending steps). */
  releaseIfIdle(thread: LoadedThread): void {
    // Kept while the thread's last ending is unrecorded: its stored turn still reads inProgress.
    if (!this.cluster || !thread.lease || this.unrecorded?.has(thread.id)) return;
    void thread
      .enqueue(async () => {
        const lease = thread.lease;
        // Only as the last step, with no turn: a later commit stamped under this lease still needs it.
        if (!lease || thread.activeTurn !== null || thread.queued > 1 || thread.claiming || this.unrecorded?.has(thread.id)) return;
        thread.lease = null;
        await this.cluster!.leases.release(thread.id, lease.epoch);
      })
      .catch((err) => this.log.warn({ err, threadId: thread.id }, "could not release a thread lease"));
  }

  /** A write was fenced off: another process owns the thread now; stop the turn running here. */
  leaseLost(thread: LoadedThread): void {
    if (thread.lease) {
      this.log.warn({ threadId: thread.id, epoch: thread.lease.epoch }, "lost the thread's lease to another process; stopping its turn here");
      thread.lease = null;
      thread.entries = null;
      thread.history = null;
      (thread.activeTurn as { abort?: AbortController } | null)?.abort?.abort();
    }
    // This process's clients follow the thread from the log now: what the new owner stored (the
    // turn's ending among it) reaches them after whatever is queued here. A relay of it that came
    // while this process still took itself for the owner was not applied, and none may follow.
    const cluster = this.cluster;
    if (cluster) {
      void thread
        .enqueue(() => cluster.catchUp(thread))
        .catch((err) => this.log.warn({ err, threadId: thread.id }, "could not deliver what the thread's new owner recorded; the next relay does"));
    }
  }

  /**
   * Publishes a notification that is not stored (deltas), in order with recorded ones: after
   * every publication queued before it. `stillWanted`: checked when its turn comes (a delta whose
   * item/started could not be recorded is dropped).
   */
  publishLive(thread: LoadedThread, method: ServerNotificationMethod, params: Record<string, unknown>, stillWanted?: () => boolean): StoredEvent {
    const seq = thread.seq.next();
    const reservation = thread.seq.reservationNeeded();
    if (reservation !== null) {
      const lease = thread.lease;
      const cluster = this.cluster;
      void thread
        .inOrder(() =>
          lease && cluster
            ? this.store.transaction((tx) => cluster.leases.fence(tx, thread.id, lease.epoch, reservation))
            : this.store.reserveSeq(this.store.sql, thread.id, reservation),
        )
        .catch((err) => this.log.error({ err, threadId: thread.id }, "could not persist seq reservation"));
    }
    const body = { ...params, seq };
    const emittedAtMs = Date.now();
    const send = () => {
      if (stillWanted && !stillWanted()) return;
      this.deliver(thread, method, body, undefined, emittedAtMs);
      const fanout = this.cluster?.fanout;
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

  async setStatus(thread: LoadedThread, status: ThreadStatus, write?: (tx: TransactionSql) => Promise<void>): Promise<void> {
    thread.status = status;
    await this.commit(thread, [{ method: "thread/status/changed", params: { threadId: thread.id, status } }], write);
  }

  // ---- loading -----------------------------------------------------------------------------

  /** The loaded thread, loading it from the store if needed. */
  async load(threadId: string): Promise<LoadedThread> {
    const existing = this.loaded.get(threadId);
    if (existing) return existing;
    const record = await this.store.getThread(threadId);
    if (!record) throw new ThreadNotFoundError(threadId);
    const again = this.loaded.get(threadId); // a concurrent load won the race
    if (again) return again;
    const thread = this.track(new LoadedThread(record, new SeqCounter(record.seqReserved)));
    this.loaded.set(threadId, thread);
    return thread;
  }

  async getRecord(threadId: string): Promise<ThreadRecord> {
    const loaded = this.loaded.get(threadId);
    if (loaded) return loaded.record;
    const record = await this.store.getThread(threadId);
    if (!record) throw new ThreadNotFoundError(threadId);
    return record;
  }

  /** Wires a thread's server-request broker to announce `serverRequest/resolved` per connection. */
  private track(thread: LoadedThread): LoadedThread {
    thread.broker = new ServerRequestBroker((to, requestId) => {
      // Not a stored event, so it takes no number of its own elsewhere than on the process running
      // the thread: another process's seq block is the owner's, and a number from it would run
      // ahead of the events still to come (a client resuming after it would miss them). There it
      // repeats the last seq this process delivered.
      const seq = this.cluster && !thread.lease && thread.deliveredSeq >= 0 ? thread.deliveredSeq : thread.seq.next();
      (to as Subscriber).notify("serverRequest/resolved", { threadId: thread.id, requestId, seq });
    });
    return thread;
  }

  subscribe(thread: LoadedThread, subscriber: Subscriber): void {
    if (thread.subscribers.has(subscriber)) return;
    thread.subscribers.add(subscriber);
    thread.liveAfter.set(subscriber, thread.deliveredSeq);
    thread.broker.subscribed(subscriber);
  }

  /**
   * Subscribes a connection (thread/resume), first replaying the stored notifications after
   * `afterSeq`. It runs as a step of the thread's pipeline: every event committed before it is in
   * the store (and read here), every event after it is published to the new subscriber — no gap,
   * no duplicate. `after`: wait for this first (the resume response must go out before the replay).
   */
  async attach(thread: LoadedThread, subscriber: Subscriber, afterSeq: number | null, after?: Promise<void>, listening?: () => void): Promise<void> {
    // The step joins the thread's pipeline at once, before the response goes out: events
    // published after it (the client may react to the response) wait for the subscription.
    thread.attaching.add(subscriber);
    // Cancelled by thread/unsubscribe or a disconnect before the step subscribed: nothing to do
    // (and the thread may be unloadable now).
    const cancelled = () => {
      if (thread.attaching.has(subscriber)) return false;
      this.maybeUnload(thread);
      return true;
    };
    return thread.enqueue(async () => {
      if (cancelled()) return;
      // Listening before reading: an event another process commits after the read wakes us.
      await this.cluster?.follow(thread);
      // The starting point of live delivery, taken before the response goes out (`listening` lets
      // resume wait for it): a thread followed from another process delivers only relayed events
      // above it, so read after the response, it could swallow events committed meanwhile.
      if (thread.deliveredSeq < 0) thread.deliveryStartsAfter(await this.store.maxEventSeq(thread.id));
      listening?.();
      await after;
      // Replay up to what this process has delivered: later events reach every subscriber live.
      if (thread.deliveredSeq < 0) thread.deliveryStartsAfter(await this.store.maxEventSeq(thread.id));
      // Already subscribed (a repeated resume, or a turn/start that subscribed it first): what it
      // received live is not sent again. Its replay then follows those live events, out of seq
      // order, but each event reaches it once.
      const liveAfter = thread.subscribers.has(subscriber) ? (thread.liveAfter.get(subscriber) ?? thread.deliveredSeq) : thread.deliveredSeq;
      thread.subscribers.delete(subscriber); // nothing reaches it live while its replay is read
      thread.liveAfter.delete(subscriber);
      if (afterSeq !== null) {
        let cursor = afterSeq;
        const upTo = Math.min(liveAfter, thread.deliveredSeq);
        for (;;) {
          const page = (await this.store.listEvents(thread.id, cursor, REPLAY_PAGE)).filter((e) => e.seq <= upTo);
          if (!thread.attaching.has(subscriber)) break;
          for (const e of page) subscriber.notify(e.method, e.params, e.emittedAtMs);
          if (page.length < REPLAY_PAGE) break;
          cursor = page[page.length - 1]!.seq;
        }
      }
      if (cancelled()) return;
      thread.attaching.delete(subscriber);
      this.subscribe(thread, subscriber);
      // A turn running on another process may be waiting on an approval asked before this client came.
      if (this.cluster && !thread.lease) await this.cluster.mirrorRequests(thread);
    }).finally(() => {
      // A failed step must not leave the connection counted as subscribing.
      if (thread.attaching.delete(subscriber)) this.maybeUnload(thread);
    });
  }

  statusOf(threadId: string): ThreadStatus {
    return this.loaded.get(threadId)?.status ?? { type: "notLoaded" };
  }

  /**
   * Statuses as the database tells them: a turn in progress anywhere (on whichever process) makes
   * the thread active; otherwise the local view, or systemError/notLoaded from the row.
   */
  async statusesOf(records: ThreadRecord[]): Promise<Map<string, ThreadStatus>> {
    const running = this.cluster ? await this.cluster.leases.store.runningStatus(records.map((r) => r.id)) : new Map<string, { waitingOnApproval: boolean }>();
    const out = new Map<string, ThreadStatus>();
    for (const r of records) {
      const local = this.loaded.get(r.id);
      const run = running.get(r.id);
      if (local?.activeTurn) out.set(r.id, local.status);
      else if (run) out.set(r.id, { type: "active", activeFlags: run.waitingOnApproval ? ["waitingOnApproval"] : [] });
      else if (local && local.status.type !== "active") out.set(r.id, local.status);
      else if (local) out.set(r.id, r.systemError ? { type: "systemError" } : { type: "idle" });
      else out.set(r.id, { type: "notLoaded" });
    }
    return out;
  }

  // ---- thread operations -------------------------------------------------------------------

  /** `source`: the Thread.source label (which kind of client started it, see thread-source.ts). */
  async startThread(
    p: ThreadStartParams & { sandboxPolicy?: SandboxPolicy | null; source?: string; userId?: string },
    subscriber: Subscriber,
    responded?: Promise<void>,
  ): Promise<ThreadStartResponse> {
    const now = Date.now();
    const id = uuidv7(now);
    const record: ThreadRecord = {
      id,
      sessionId: id,
      forkedFromId: null,
      forkParentId: null,
      forkTurnCount: null,
      forkMessageCount: null,
      name: null,
      preview: "",
      ephemeral: p.ephemeral ?? false,
      archived: false,
      modelProvider: p.modelProvider ?? this.defaults.modelProvider,
      model: p.model ?? this.defaults.model,
      reasoningEffort: null,
      cwd: p.cwd ?? this.defaults.cwd,
      approvalPolicy: p.approvalPolicy ?? this.defaults.approvalPolicy,
      sandbox: p.sandbox ?? (p.sandboxPolicy ? sandboxModeOf(p.sandboxPolicy) : this.defaults.sandbox),
      sandboxPolicy: p.sandboxPolicy ?? null,
      baseInstructions: p.baseInstructions ?? null,
      developerInstructions: p.developerInstructions ?? null,
      dynamicTools: p.dynamicTools ?? [],
      config: p.config ?? null,
      cliVersion: this.cliVersion,
      source: p.source ?? "appServer",
      systemError: false,
      tokenUsage: null,
      seqReserved: 0,
      createdAtMs: now,
      updatedAtMs: now,
      userId: p.userId ?? "local",
    };
    return this.createThread(record, subscriber, { responded });
  }

  /**
   * Records a new thread (and `write`, e.g. a fork's first history entries) with its
   * `thread/started` event, subscribes `subscriber`, and answers with the settings response.
   */
  async createThread(
    record: ThreadRecord,
    subscriber: Subscriber,
    opts: { responded?: Promise<void>; write?: (tx: TransactionSql) => Promise<void>; turns?: Turn[] } = {},
  ): Promise<ThreadStartResponse> {
    const thread = this.track(new LoadedThread(record, new SeqCounter(0)));
    thread.createdHere = true;
    thread.deliveredSeq = 0;
    // The creator holds the new thread's lease from its first write (epoch 1).
    if (this.cluster) {
      thread.lease = { epoch: 1 };
      thread.heldEpoch = 1;
    }
    if (!record.forkedFromId) {
      thread.history = [];
      thread.entries = [];
    }
    this.subscribe(thread, subscriber);
    const view = threadView(record, thread.status);
    this.loaded.set(record.id, thread);
    try {
      await this.commit(
        thread,
        [{ method: "thread/started", params: { thread: view } }],
        async (tx) => {
          await this.store.insertThread(tx, { ...record, seqReserved: 0, ownerId: this.cluster?.leases.processId ?? null, leaseEpoch: this.cluster ? 1 : 0 });
          if (opts.write) await opts.write(tx);
        },
        { after: opts.responded, creating: true },
      );
    } catch (err) {
      this.loaded.delete(record.id);
      throw err;
    }
    return settingsResponse(threadView(record, thread.status, opts.turns ?? []), record);
  }

  async readThread(threadId: string, turns: Turn[] = []): Promise<Thread> {
    // From the database when another process may have changed it (name, settings, status).
    const record = this.cluster ? await this.freshRecord(threadId) : await this.getRecord(threadId);
    const status = (await this.statusesOf([record])).get(threadId)!;
    return threadView(record, status, turns);
  }

  private async freshRecord(threadId: string): Promise<ThreadRecord> {
    const loaded = this.loaded.get(threadId);
    if (loaded?.lease) return loaded.record;
    const record = await this.store.getThread(threadId);
    if (!record) throw new ThreadNotFoundError(threadId);
    if (loaded && !loaded.activeTurn) loaded.record = record;
    return record;
  }

  /** `visibleTo`: only that user's threads and those shared with it (null: all). */
  async listThreads(p: ThreadListParams, cursor: ThreadCursor | null, visibleTo: string | null = null): Promise<ThreadListResult> {
    const cwds = p.cwd == null ? null : Array.isArray(p.cwd) ? p.cwd : [p.cwd];
    const page = await this.store.listThreads({
      limit: p.limit ?? 25,
      cursor,
      sortKey: p.sortKey ?? "created_at",
      direction: p.sortDirection ?? "desc",
      archived: p.archived ?? false,
      cwds,
      searchTerm: p.searchTerm ? p.searchTerm : null,
      modelProviders: p.modelProviders ?? null,
      sources: p.sourceKinds && p.sourceKinds.length ? p.sourceKinds : null,
      // Sub-agents, attachments, sections, projects and originators do not exist here: a filter
      // on any of them matches no thread.
      matchesNothing: Boolean(p.parentThreadId || p.ancestorThreadId || p.attachedToThreadId || p.sectionId || p.projectId || p.originators?.length),
      includedIds: p.includedThreadIds ?? null,
      excludedIds: p.excludedThreadIds ?? [],
      visibleTo,
    });
    const statuses = await this.statusesOf(page.rows);
    return {
      // The row as stored (another process may have renamed it), unless this process leases it.
      data: page.rows.map((r) => threadView(this.loaded.get(r.id)?.lease ? this.loaded.get(r.id)!.record : r, statuses.get(r.id)!)),
      nextCursor: encodeCursor(page.next),
      backwardsCursor: encodeCursor(page.backwards),
    };
  }

  /**
   * Applies a metadata change to a thread and announces it. A thread not loaded here takes its
   * `seq` from the store (atomically) instead of being loaded just for this.
   */
  async updateMetadata(
    threadId: string,
    patch: Partial<Pick<ThreadRecord, "archived" | "name">>,
    event: ThreadEvent,
    requester: Subscriber,
  ): Promise<ThreadRecord> {
    const now = Date.now();
    if (this.cluster) return this.cluster.updateMetadata(threadId, patch, event, requester);
    const loaded = this.loaded.get(threadId);
    if (loaded) {
      await this.commit(loaded, [event], async (tx) => {
        await this.store.updateThread(tx, threadId, { ...patch, updatedAtMs: now });
      }, { alsoTo: requester });
      loaded.record = { ...loaded.record, ...patch, updatedAtMs: now };
      return loaded.record;
    }
    const record = await this.store.transaction(async (tx) => {
      const rows = await tx<{ seqReserved: number }[]>`
        update threads set seq_reserved = seq_reserved + 1 where id = ${threadId} returning seq_reserved`;
      if (rows.length === 0) throw new ThreadNotFoundError(threadId);
      const seq = rows[0]!.seqReserved;
      await this.store.updateThread(tx, threadId, { ...patch, updatedAtMs: now });
      const stored = { seq, method: event.method, params: { ...event.params, seq }, emittedAtMs: now };
      await this.store.insertEvents(tx, threadId, [stored]);
      const updated = await this.store.getThread(threadId, tx);
      return { updated: updated!, stored };
    });
    requester.notify(record.stored.method, record.stored.params, record.stored.emittedAtMs);
    return record.updated;
  }

  loadedIds(): string[] {
    return [...this.loaded.keys()].sort();
  }

  unsubscribe(threadId: string, subscriber: Subscriber): "notLoaded" | "notSubscribed" | "unsubscribed" {
    const thread = this.loaded.get(threadId);
    if (!thread) return "notLoaded";
    const attaching = thread.attaching.delete(subscriber);
    thread.liveAfter.delete(subscriber);
    if (!thread.subscribers.delete(subscriber)) {
      if (!attaching) return "notSubscribed";
      this.maybeUnload(thread);
      return "unsubscribed";
    }
    thread.broker.unsubscribed(subscriber);
    this.maybeUnload(thread);
    return "unsubscribed";
  }

  /** A connection went away: drop its subscriptions; threads nobody watches and nothing runs on unload. */
  disconnect(subscriber: Subscriber): void {
    for (const thread of [...this.loaded.values()]) {
      const attaching = thread.attaching.delete(subscriber);
      if (attaching && !thread.subscribers.has(subscriber)) this.maybeUnload(thread);
      thread.liveAfter.delete(subscriber);
      if (thread.subscribers.delete(subscriber)) {
        thread.broker.unsubscribed(subscriber);
        this.maybeUnload(thread);
      }
    }
  }

  /** Unloads a thread nobody watches and nothing runs on (called again when its turn ends). */
  maybeUnload(thread: LoadedThread): void {
    if (thread.subscribers.size > 0 || thread.attaching.size > 0 || thread.activeTurn !== null || this.loaded.get(thread.id) !== thread) return;
    if (this.unrecorded?.has(thread.id)) return; // its seq counter is the only exact one until then
    this.loaded.delete(thread.id);
    this.cluster?.unfollow(thread);
    this.releaseIfIdle(thread);
    // Its history is garbage now; if it was big, have V8 give the memory back once idle.
    if (thread.entries && textChars(thread.entries) >= BIG_HISTORY_CHARS) {
      releaseWhenIdle(() => [...this.loaded.values()].some((t) => t.activeTurn !== null));
    }
    if (thread.record.ephemeral && thread.createdHere) {
      // Through the thread's own pipeline: its insert may still be committing on another connection.
      void thread
        .enqueue(() => this.store.deleteThreads([thread.id], this.cluster?.leases.processId))
        .catch((err) => this.log.warn({ err, threadId: thread.id }, "could not delete ephemeral thread"));
    }
  }

  /** On shutdown: ephemeral threads do not outlive the process. */
  async shutdown(): Promise<void> {
    const ephemeral = [...this.loaded.values()].filter((t) => t.record.ephemeral && t.createdHere).map((t) => t.id);
    this.loaded.clear();
    await this.store.deleteThreads(ephemeral, this.cluster?.leases.processId).catch((err) => this.log.warn({ err }, "could not delete ephemeral threads"));
  }
}
