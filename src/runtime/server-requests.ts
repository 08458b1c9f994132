/**
 * Server → client requests that belong to a thread (tool calls, approvals). A request goes to
 * every subscribed connection that accepts it (docs/teams.md: those of the thread's owner and of
 * users it is shared with for writing); the first reply wins and every connection it was sent to gets
 * `serverRequest/resolved`. A connection that disconnects does not answer: the request stays
 * pending, and a connection that subscribes later is sent it again (same params, its own id).
 */
import type { ClientReply } from "../protocol/jsonrpc.js";

// loaded-thread.ts imports it from here.
export type { ClientReply };

export interface RequestingSubscriber {
  request?(method: string, params: object): { id: number; reply: Promise<ClientReply> };
  /** Whether this subscriber may be sent (and answer) this request; absent: yes. */
  accepts?(method: string, params: object): boolean;
}

interface Pending {
  method: string;
  params: object;
  sent: Map<RequestingSubscriber, number>;
  /** Copies sent and not answered yet. */
  outstanding: Set<RequestingSubscriber>;
  /** An unusable reply (error, bad shape), kept in case no other client answers better. */
  fallback: ClientReply | null;
  isValid(reply: ClientReply): boolean;
  settle(reply: ClientReply | null): void;
}

export class ServerRequestBroker {
  private readonly pending = new Set<Pending>();

  constructor(private readonly announceResolved: (to: RequestingSubscriber, requestId: number) => void) {}

  get size(): number {
    return this.pending.size;
  }

  /**
   * Sends `method` to `subscribers` (and to later subscribers while unanswered). Resolves with the
   * first reply, or with null when `signal` fires first.
   */
  ask(
    method: string,
    params: object,
    subscribers: Iterable<RequestingSubscriber>,
    signal: AbortSignal,
    isValid: (reply: ClientReply) => boolean = (r) => r.error === undefined,
  ): Promise<ClientReply | null> {
    return new Promise((resolve) => {
      let settled = false;
      const entry: Pending = {
        method,
        params,
        sent: new Map(),
        outstanding: new Set(),
        fallback: null,
        isValid,
        settle: (reply) => {
          if (settled) return;
          settled = true;
          this.pending.delete(entry);
          signal.removeEventListener("abort", onAbort);
          for (const [sub, id] of entry.sent) this.announceResolved(sub, id);
          resolve(reply);
        },
      };
      const onAbort = () => entry.settle(null);
      if (signal.aborted) return resolve(null);
      signal.addEventListener("abort", onAbort, { once: true });
      this.pending.add(entry);
      for (const sub of subscribers) this.send(entry, sub);
    });
  }

  /**
   * An answer that came from elsewhere (a client on another process): settles the first pending
   * request `matches` accepts, when the answer is valid for it. False when there is none.
   */
  answer(matches: (params: object) => boolean, reply: ClientReply): boolean {
    for (const entry of this.pending) {
      if (!matches(entry.params)) continue;
      if (!entry.isValid(reply)) return false;
      entry.settle(reply);
      return true;
    }
    return false;
  }

  /** A connection subscribed: it gets every unanswered request. */
  subscribed(sub: RequestingSubscriber): void {
    for (const entry of this.pending) if (!entry.sent.has(sub)) this.send(entry, sub);
  }

  /** A connection went away: its copies will never be answered. */
  unsubscribed(sub: RequestingSubscriber): void {
    for (const entry of this.pending) {
      entry.sent.delete(sub);
      entry.outstanding.delete(sub);
    }
  }

  private send(entry: Pending, sub: RequestingSubscriber): void {
    // A subscriber that may only read the thread (a share, an admin) sees the request's item, not the question.
    if (!sub.request || sub.accepts?.(entry.method, entry.params) === false) return;
    const { id, reply } = sub.request(entry.method, entry.params);
    entry.sent.set(sub, id);
    entry.outstanding.add(sub);
    reply.then(
      (r) => {
        entry.outstanding.delete(sub);
        // The first VALID answer wins: an error or malformed reply from one client (say, one that
        // cannot handle approvals) counts only when no other client still holds a copy.
        if (entry.isValid(r) || entry.outstanding.size === 0) entry.settle(r);
        else entry.fallback = r;
      },
      () => {
        // Closed before answering: the request stays pending for other (and later) clients.
        entry.sent.delete(sub);
        entry.outstanding.delete(sub);
        if (entry.outstanding.size === 0 && entry.fallback) entry.settle(entry.fallback);
      },
    );
  }
}
