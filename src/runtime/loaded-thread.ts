/**
 * One thread as this process has it loaded: its subscribers, status, running turn, history
 * caches, lease, and the two queues that keep its events in order — `inOrder` (recording
 * transactions, in stamp order) and `enqueue` (publication, in `seq` order). The rules that use
 * them live in event-log.ts (record before publish) and subscriptions.ts (replay, then live).
 */
import type { Message } from "../agent/messages.js";
import type { ThreadStatus } from "../protocol/common.js";
import type { ThreadRecord } from "../store/records.js";
import type { HistoryEntry } from "../store/history-entry.js";
import type { SeqCounter } from "./seq.js";
import type { ClientReply, ServerRequestBroker } from "./server-requests.js";
import type { ActiveTurnHandle, Subscriber } from "./thread-types.js";

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
   * Model call ids whose tool item was recorded as started. A call among them with no result (a
   * crash, a store failure) is repaired as "outcome unknown", never "not executed".
   */
  readonly startedCalls = new Set<string>();

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
  private readonly pipeline = new SerialQueue();
  /**
   * Serialises the recording transactions in stamp order, apart from `pipeline`: the stream of a
   * turn goes on (its deltas queue for publication) while an item/started it announced commits.
   */
  private readonly commits = new SerialQueue();

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
    return this.pipeline.run(step);
  }

  /** Runs a recording transaction after every earlier one of this thread (failures do not break the chain). */
  inOrder<T>(tx: () => Promise<T>): Promise<T> {
    return this.commits.run(tx);
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
    return this.commits.settled;
  }

  /** Nothing waits to be published (a delta may go out at once). */
  get idle(): boolean {
    return this.pipeline.size === 0;
  }

  /** Steps and transactions queued or running (a release step checks it is the last one). */
  get queued(): number {
    return this.pipeline.size + this.commits.size;
  }
}

/** Runs its steps one after another, in the order given; a failed step fails only its caller. */
class SerialQueue {
  /** Settles once every step queued so far has settled. */
  settled: Promise<void> = Promise.resolve();
  /** Steps queued or running. */
  size = 0;

  run<T>(step: () => Promise<T>): Promise<T> {
    this.size++;
    const run = this.settled.then(step);
    // `run` (returned) carries a failure to the caller; the chain only orders the steps.
    this.settled = run.then(
      () => undefined,
      () => undefined,
    );
    return run.finally(() => this.size--);
  }
}
