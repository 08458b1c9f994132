/**
 * Thread leases with fencing (issue 12, DESIGN.md §7). A process writes a thread's facts only
 * while it holds the thread's lease: (owner = this process, epoch). The lease is a column pair on
 * the thread row, taken with one conditional UPDATE that bumps the epoch; every recording
 * transaction re-checks (owner, epoch) with a row-locking UPDATE (the fence), so a process that
 * lost its lease — its heartbeat expired and another process took over — cannot write any more.
 *
 * Why a lease row and not session advisory locks: an advisory lock lives in one database session,
 * so every lease would pin a dedicated connection (or break behind a transaction-mode pooler such
 * as PgBouncer), and it gives no fencing token — a process that lost its session (and so the lock)
 * can still have a write in flight on another connection. A row with an epoch is checked inside the
 * very transaction that writes, needs no session, and survives reconnects.
 *
 * Liveness is one heartbeat row per process (`processes`), not one per thread: a process that
 * stops heartbeating for APP_SERVER_LEASE_TTL_MS loses every lease at once.
 */
import { randomUUID } from "node:crypto";
import type { Transaction } from "../store/transaction.js";
import type { LeaseStore, LeasedRow } from "../store/lease-store.js";
import { TurnRequestError } from "./turn-errors.js";
import type { RuntimeLogger } from "./thread-types.js";

/** A thread is leased by another live process (or a turn of a dead one awaits the sweeper). */
/** How long a claim waits for an owner that ended its turn to release the lease (40 × 50 ms). */
const RELEASE_WAIT_ATTEMPTS = 40;
const RELEASE_WAIT_MS = 50;

export class LeaseHeldError extends TurnRequestError {
  constructor(readonly threadId: string) {
    super(`a turn is already running on thread ${threadId}`);
    this.name = "LeaseHeldError";
  }
}

/** A write was fenced off: another process took the thread's lease. */
export class LeaseLostError extends Error {
  constructor(readonly threadId: string) {
    super(`lost the lease of thread ${threadId} to another process`);
    this.name = "LeaseLostError";
  }
}

export interface LeaseOptions {
  ttlMs: number;
  /** The home directory's node id (predecessors on the same home are expired at start). */
  nodeId: string | null;
  /** This process's id (default: a new one); its database sessions carry it (sessionNameOf). */
  processId?: string;
}

export class LeaseManager {
  readonly processId: string;
  private heartbeatTimer: NodeJS.Timeout | null = null;
  private lastHeartbeat = Date.now();
  /** Three beats per TTL: one lost beat (a slow query, a reconnect) does not cost the leases. */
  private readonly every: number;
  /**
   * Told once per claim when a thread's lease is held by a live process but no turn runs on it:
   * that process may be keeping it between turns, taking itself for alone (thread-leases.ts),
   * and is asked to give it back (cluster-start.ts) while the claim waits.
   */
  onIdleHeld?: (threadId: string) => void;
  /**
   * Runs after each successful heartbeat (fan-out refreshes whether another process exists).
   * `afterGap`: the beats before it failed (others may have taken this process for dead).
   */
  afterBeat?: (afterGap: boolean) => Promise<void>;

  constructor(
    readonly store: LeaseStore,
    readonly opts: LeaseOptions,
    private readonly log: RuntimeLogger,
  ) {
    this.every = Math.max(100, Math.floor(opts.ttlMs / 3));
    this.processId = opts.processId ?? randomUUID();
  }

  async start(): Promise<void> {
    await this.store.register(this.processId, this.opts.nodeId, this.opts.ttlMs);
    this.lastHeartbeat = Date.now();
    this.heartbeatTimer = setInterval(() => void this.beat(), this.every);
    this.heartbeatTimer.unref();
  }

  /** A gap in the heartbeats that no afterBeat has been told of yet. */
  private gapUnreported = false;

  /** Renews this process's registration (what a heartbeat does). */
  private async renew(): Promise<void> {
    await this.store.heartbeat(this.processId, this.opts.ttlMs);
    const now = Date.now();
    // A renewal after a gap (failed beats, or one that hung across an outage): healthy from now.
    if (now - this.lastHeartbeat > 2 * this.every) {
      this.healthySince = now;
      this.gapUnreported = true;
    }
    this.lastHeartbeat = now;
  }

  private async beat(): Promise<void> {
    try {
      await this.renew();
      const afterGap = this.gapUnreported;
      this.gapUnreported = false;
      await this.afterBeat?.(afterGap).catch((err) => this.log.warn({ err }, "could not refresh the list of other processes"));
    } catch (err) {
      this.noteOutage();
      this.log.warn({ err, sinceLastMs: Date.now() - this.lastHeartbeat }, "heartbeat failed");
    }
  }

  /** Since when heartbeats have succeeded without a gap (0: since start-up). */
  private healthySince = 0;

  /** A query of this process failed on the database: its view of others' leases is stale. */
  noteOutage(): void {
    this.healthySince = Number.POSITIVE_INFINITY;
  }

  /**
   * Whether expired leases now mean dead owners. Not while, nor for one TTL after, this process
   * was itself cut off from the database: every process was then unable to heartbeat, so their
   * leases read expired though they live (and a turn whose end waits to be recorded,
   * unrecorded.ts, would be closed under its owner). After two TTLs of heartbeats since
   * reconnecting, the live ones have renewed. The sweeper asks before and after each query that could have
   * hung across an outage.
   */
  judgesOthers(): boolean {
    const now = Date.now();
    // Two TTLs, not one: a peer's reconnect can lag ours by its pool's backoff (database.ts).
    return this.heartbeatFresh() && now - this.healthySince >= 2 * this.opts.ttlMs;
  }

  /** Whether the last heartbeat is recent enough that no other process can have taken this one for dead. */
  heartbeatFresh(): boolean {
    return Date.now() - this.lastHeartbeat <= 2 * this.every;
  }

  async stop(): Promise<void> {
    if (this.heartbeatTimer) clearInterval(this.heartbeatTimer);
    this.heartbeatTimer = null;
    await this.store.unregister(this.processId).catch((err) => this.log.warn({ err }, "could not unregister the process"));
  }

  /** Takes a free thread's lease; LeaseHeldError when a live process (or an orphaned turn) has it. */
  async acquire(threadId: string): Promise<LeasedRow> {
    let asked = false;
    for (let attempt = 0; ; attempt++) {
      const row = await this.store.acquire(threadId, this.processId);
      if (row === "missing") throw new Error(`thread not found: ${threadId}`);
      if (row === "unregistered") {
        // Back from an outage before the next heartbeat: renew first (others may be sweeping our
        // threads as those of a dead process), then try again.
        if (attempt >= RELEASE_WAIT_ATTEMPTS) throw new LeaseHeldError(threadId);
        await this.renew();
        continue;
      }
      if (row !== "busy") return row;
      // Busy with no turn in progress: the owner has ended its turn (its clients may already have
      // turn/completed) and is giving the lease back, or keeps it between turns (asked to give it
      // back). Wait for that, briefly, instead of telling a client that reacts at once on another
      // process that a turn is still running.
      const running = (await this.store.runningStatus([threadId])).has(threadId);
      if (running || attempt >= RELEASE_WAIT_ATTEMPTS) throw new LeaseHeldError(threadId);
      if (!asked) {
        asked = true;
        this.onIdleHeld?.(threadId);
      }
      await new Promise((r) => setTimeout(r, RELEASE_WAIT_MS));
    }
  }

  /** The fence, inside a recording transaction; throws LeaseLostError (the transaction aborts). */
  async fence(tx: Transaction, threadId: string, epoch: number, seqUpTo: number): Promise<void> {
    if (!(await this.store.fence(tx, threadId, this.processId, epoch, seqUpTo))) throw new LeaseLostError(threadId);
  }

  release(threadId: string, epoch: number): Promise<void> {
    return this.store.release(threadId, this.processId, epoch);
  }

  releaseMany(threadIds: string[]): Promise<void> {
    return this.store.releaseMany(threadIds, this.processId);
  }

  liveOwner(threadId: string): Promise<string | null> {
    return this.store.liveOwner(threadId, this.processId);
  }
}
