/**
 * Per-user quotas (docs/teams.md, "Quotas"): a user over one gets a clear error (-32003 "Quota
 * exceeded", data {quota, limit, …}); other users are not affected.
 *
 *   concurrent turns   turns running on the user's threads, across every process of a cluster
 *                      (numbered slots in the database, quota-store.ts), taken before the turn
 *                      starts and given back when it ends: a burst cannot overshoot
 *   requests/second    a token bucket per user (burst: twice the rate), per process
 *   tokens/day         model tokens the providers reported for the user's threads today (UTC);
 *                      checked when a turn starts (a running turn finishes even if it crosses it)
 *
 * Usage counts for the thread's owner, whoever started the turn (a thread shared for writing
 * spends its owner's quota).
 */
import type { Usage } from "../agent/messages.js";
import { TokenBucket } from "../rpc/token-bucket.js";
import type { QuotaStore } from "../store/quota-store.js";
import type { SideWrites } from "../store/side-writes.js";

export interface QuotaLimits {
  maxConcurrentTurns?: number;
  requestsPerSecond?: number;
  tokensPerDay?: number;
}

export type QuotaKind = "concurrentTurns" | "requestsPerSecond" | "tokensPerDay";

export class QuotaExceededError extends Error {
  constructor(
    readonly quota: QuotaKind,
    message: string,
    readonly data: Record<string, unknown>,
  ) {
    super(message);
    this.name = "QuotaExceededError";
  }
}

/** A held turn slot: given back once, when the turn ends (or does not start). */
export interface TurnSlot {
  release(): void;
}

const NO_SLOT: TurnSlot = { release: () => {} };

/** Today as a UTC date (YYYY-MM-DD): the day tokens count for. */
export const utcDay = (ms = Date.now()) => new Date(ms).toISOString().slice(0, 10);

export interface QuotaDeps {
  store: QuotaStore;
  /** Where token counts are written: with the next recording transaction (side-writes.ts). */
  writes: SideWrites;
  limits: QuotaLimits;
  /** This process's id in `processes` (its heartbeat keeps its slots). */
  processId: () => string;
  /** Per-user counters for /metrics. */
  onTokens?(userName: string, usage: Usage): void;
  nameOf(userId: string): string;
  log: { warn(obj: object, msg: string): void };
}

export class Quotas {
  private readonly buckets = new Map<string, TokenBucket>();
  private readonly held = new Set<Promise<void>>();

  constructor(private readonly deps: QuotaDeps) {}

  get limits(): QuotaLimits {
    return this.deps.limits;
  }

  /** Takes one request from the user's bucket (synchronous: a burst is counted as it arrives). */
  takeRequest(userId: string): void {
    const rate = this.deps.limits.requestsPerSecond;
    if (rate === undefined) return;
    let bucket = this.buckets.get(userId);
    if (!bucket) this.buckets.set(userId, (bucket = new TokenBucket(rate, rate * 2)));
    if (!bucket.take())
      throw new QuotaExceededError("requestsPerSecond", `Quota exceeded: more than ${rate} requests per second; retry later`, {
        quota: "requestsPerSecond",
        limit: rate,
        retryAfterMs: bucket.waitMs(),
      });
  }

  /** Refuses a new turn when the user's tokens of today reached the daily limit. */
  async assertTokensLeft(userId: string): Promise<void> {
    const limit = this.deps.limits.tokensPerDay;
    if (limit === undefined) return;
    await this.deps.writes.flush(); // this process's counts still waiting for a transaction
    const used = await this.deps.store.tokensOn(userId, utcDay());
    if (used >= limit)
      throw new QuotaExceededError("tokensPerDay", `Quota exceeded: ${used} of ${limit} model tokens used today (UTC); new turns start again tomorrow`, {
        quota: "tokensPerDay",
        limit,
        used,
      });
  }

  /** One of the user's concurrent-turn slots, or QuotaExceededError when all are held. */
  async takeTurnSlot(userId: string): Promise<TurnSlot> {
    const limit = this.deps.limits.maxConcurrentTurns;
    if (limit === undefined) return NO_SLOT;
    const processId = this.deps.processId();
    const slot = await this.deps.store.takeSlot(userId, limit, processId);
    if (slot === null)
      throw new QuotaExceededError("concurrentTurns", `Quota exceeded: ${limit} turns of this user are running already; retry when one has ended`, {
        quota: "concurrentTurns",
        limit,
      });
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        const done = this.deps.store.releaseSlot(userId, slot, processId).catch((err) => this.deps.log.warn({ err, userId, slot }, "could not free a turn slot"));
        this.held.add(done);
        void done.finally(() => this.held.delete(done));
      },
    };
  }

  /**
   * A model call's tokens, counted for the thread's owner (not awaited by the turn): a side write,
   * so the count commits with the turn's next recorded step.
   */
  recordTokens(userId: string, usage: Usage): void {
    this.deps.onTokens?.(this.deps.nameOf(userId), usage);
    const day = utcDay();
    this.deps.writes
      .add((q) => this.deps.store.addTokens(userId, day, usage.inputTokens, usage.outputTokens, q))
      .catch((err: unknown) => this.deps.log.warn({ err, userId }, "could not count a model call's tokens for its user"));
  }

  /** Waits for counts and releases still being written (user/usage, shutdown, tests). */
  async flush(): Promise<void> {
    await Promise.all([...this.held, this.deps.writes.flush()]);
  }
}
