/**
 * Who receives a loaded thread's events. `subscribe` adds a connection from the next delivery
 * on; `attach` (thread/resume) first replays what the store has after the client's `afterSeq`,
 * as a step of the thread's pipeline, so that replay and live delivery meet with no gap and no
 * duplicate. Unsubscribing or disconnecting may unload the thread (loaded-threads.ts).
 */
import type { LoadedThread } from "./loaded-thread.js";
import type { LoadedThreads } from "./loaded-threads.js";
import type { ThreadContext } from "./thread-context.js";
import type { Subscriber } from "./thread-types.js";

const REPLAY_PAGE = 500;

export class Subscriptions {
  constructor(
    private readonly ctx: ThreadContext,
    private readonly threads: LoadedThreads,
  ) {}

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
      this.threads.maybeUnload(thread);
      return true;
    };
    return thread
      .enqueue(async () => {
        if (cancelled()) return;
        const { store, cluster } = this.ctx;
        // Listening before reading: an event another process commits after the read wakes us.
        await cluster?.follow(thread);
        // The starting point of live delivery, taken before the response goes out (`listening` lets
        // resume wait for it): a thread followed from another process delivers only relayed events
        // above it, so read after the response, it could swallow events committed meanwhile.
        if (thread.deliveredSeq < 0) thread.deliveryStartsAfter(await store.maxEventSeq(thread.id));
        listening?.();
        await after;
        // Replay up to what this process has delivered: later events reach every subscriber live.
        if (thread.deliveredSeq < 0) thread.deliveryStartsAfter(await store.maxEventSeq(thread.id));
        // Already subscribed (a repeated resume, or a turn/start that subscribed it first): what it
        // received live is not sent again. Its replay then follows those live events, out of seq
        // order, but each event reaches it once.
        const liveAfter = thread.subscribers.has(subscriber) ? (thread.liveAfter.get(subscriber) ?? thread.deliveredSeq) : thread.deliveredSeq;
        thread.subscribers.delete(subscriber); // nothing reaches it live while its replay is read
        thread.liveAfter.delete(subscriber);
        if (afterSeq !== null) await this.replay(thread, subscriber, afterSeq, Math.min(liveAfter, thread.deliveredSeq));
        if (cancelled()) return;
        thread.attaching.delete(subscriber);
        this.subscribe(thread, subscriber);
        // A follower may be behind the log (relays missed while its link was cut, not yet noticed
        // by the heartbeat): what it missed goes out now, to this client too, live. (Read before
        // the subscription, it would advance what was delivered past events this client then
        // never got: a resume without afterSeq replays nothing.) A turn running on another
        // process may also be waiting on an approval asked before this client came (mirrored).
        if (cluster && !thread.lease) await cluster.catchUp(thread);
      })
      .finally(() => {
        // A failed step must not leave the connection counted as subscribing.
        if (thread.attaching.delete(subscriber)) this.threads.maybeUnload(thread);
      });
  }

  /** Sends `subscriber` the stored events after `afterSeq` up to `upTo`, page by page, while it still attaches. */
  private async replay(thread: LoadedThread, subscriber: Subscriber, afterSeq: number, upTo: number): Promise<void> {
    let cursor = afterSeq;
    for (;;) {
      const page = (await this.ctx.store.listEvents(thread.id, cursor, REPLAY_PAGE)).filter((e) => e.seq <= upTo);
      if (!thread.attaching.has(subscriber)) break;
      for (const e of page) subscriber.notify(e.method, e.params, e.emittedAtMs);
      if (page.length < REPLAY_PAGE) break;
      cursor = page[page.length - 1]!.seq;
    }
  }

  unsubscribe(threadId: string, subscriber: Subscriber): "notLoaded" | "notSubscribed" | "unsubscribed" {
    const thread = this.ctx.loaded.get(threadId);
    if (!thread) return "notLoaded";
    const attaching = thread.attaching.delete(subscriber);
    thread.liveAfter.delete(subscriber);
    if (!thread.subscribers.delete(subscriber)) {
      if (!attaching) return "notSubscribed";
      this.threads.maybeUnload(thread);
      return "unsubscribed";
    }
    thread.broker.unsubscribed(subscriber);
    this.threads.maybeUnload(thread);
    return "unsubscribed";
  }

  /** A connection went away: drop its subscriptions; threads nobody watches and nothing runs on unload. */
  disconnect(subscriber: Subscriber): void {
    for (const thread of [...this.ctx.loaded.values()]) {
      const attaching = thread.attaching.delete(subscriber);
      if (attaching && !thread.subscribers.has(subscriber)) this.threads.maybeUnload(thread);
      thread.liveAfter.delete(subscriber);
      if (thread.subscribers.delete(subscriber)) {
        thread.broker.unsubscribed(subscriber);
        this.threads.maybeUnload(thread);
      }
    }
  }
}
