/**
 * What a process does for threads whose turns may run in another process (issue 12): follow them
 * (LISTEN, then deliver committed events read from the log and relayed deltas, in seq order),
 * mirror their pending approvals to local clients and carry the answers to the owner, forward
 * interrupt/steer/metadata to the owner, and answer those requests when it is the owner.
 */
import type { ServerNotificationMethod } from "../protocol/methods.js";
import type { ThreadRecord } from "../store/records.js";
import { DeltaParts, type FanoutMessage, type Fanout } from "./fanout.js";
import { LeaseHeldError, type LeaseManager } from "./leases.js";
import type { RemoteCommand, RemoteCommands } from "./remote-commands.js";
import type { LoadedThread } from "./loaded-thread.js";
import type { RuntimeLogger, Subscriber, ThreadEvent } from "./thread-types.js";
import type { StoredEvent } from "../store/records.js";
import type { ThreadStore } from "../store/thread-store.js";
import type { Transaction } from "../store/transaction.js";

/** The turn operations a remote request runs on the owner (TurnRunner). */
export interface LocalTurnOps {
  interruptLocal(threadId: string, turnId: string): Promise<unknown>;
  steerLocal(threadId: string, turnId: string, input: unknown[], clientId: string | null): Promise<unknown>;
  shellCommandLocal(threadId: string, command: string, timeoutMs: number, requester: Subscriber): Promise<void>;
}

/**
 * What the cluster links use of the thread runtime (ThreadRuntime, threads.ts). Declared here,
 * not imported, so that the runtime may hold the links without an import cycle.
 */
export interface ClusterHost {
  readonly loaded: Map<string, LoadedThread>;
  readonly store: ThreadStore;
  load(threadId: string): Promise<LoadedThread>;
  claim(thread: LoadedThread): Promise<void>;
  commit(thread: LoadedThread, events: ThreadEvent[], write?: (tx: Transaction) => Promise<void>, opts?: { alsoTo?: Subscriber }): Promise<StoredEvent[]>;
  deliver(thread: LoadedThread, method: string, params: Record<string, unknown>, alsoTo?: Subscriber, emittedAtMs?: number): void;
  maybeUnload(thread: LoadedThread): void;
}

const NOBODY: Subscriber = { id: -1, notify: () => {} };

export class ClusterLinks {
  fanout: Fanout | null = null;
  commands: RemoteCommands | null = null;
  turns: LocalTurnOps | null = null;
  /** Approvals of other processes' turns shown to this process's clients: thread → item → stop. */
  private readonly mirrors = new Map<string, Map<string, AbortController>>();
  /** Parts of large deltas relayed in pieces, per thread, until their last piece arrives. */
  private readonly parts = new Map<string, DeltaParts>();

  private partsOf(threadId: string): DeltaParts {
    let p = this.parts.get(threadId);
    if (!p) this.parts.set(threadId, (p = new DeltaParts()));
    return p;
  }

  constructor(
    readonly leases: LeaseManager,
    private readonly runtime: ClusterHost,
    private readonly log: RuntimeLogger,
  ) {}

  async follow(thread: LoadedThread): Promise<void> {
    await this.fanout?.follow(thread.id);
  }

  unfollow(thread: LoadedThread): void {
    this.fanout?.unfollow(thread.id);
    for (const stop of this.mirrors.get(thread.id)?.values() ?? []) stop.abort();
    this.mirrors.delete(thread.id);
  }

  // ---- following -----------------------------------------------------------------------------

  /** A relay from the process running the thread: delivered in the thread's pipeline, in seq order. */
  onMessage(msg: FanoutMessage): void {
    const thread = this.runtime.loaded.get(msg.t);
    if (!thread || thread.lease) return;
    void thread
      .enqueue(() => this.apply(thread, msg))
      .catch((err) => this.log.warn({ err, threadId: thread.id }, "could not deliver events of another process"));
  }

  /** After a reconnect (LISTEN again): whatever was committed meanwhile. */
  onListen(threadId: string): void {
    const thread = this.runtime.loaded.get(threadId);
    if (thread && !thread.lease) {
      // Nothing is lost when it fails: the events are in the log, and the heartbeat's
      // reconcileFollowed reads it again for a thread delivered behind it.
      void thread
        .enqueue(() => this.catchUp(thread))
        .catch((err) => this.log.warn({ err, threadId }, "could not catch up with another process's events; the next heartbeat does"));
    }
  }

  /** Every followed thread reads what was committed since its last delivery (after a gap). */
  catchUpFollowed(): void {
    for (const threadId of this.runtime.loaded.keys()) this.onListen(threadId);
  }

  /**
   * The slow path under the wake-ups (run with each heartbeat): a followed thread whose log has
   * grown past what this process delivered catches up. NOTIFY is not durable — a wake-up sent
   * while this process re-listened, or one the owner could not send, is gone, and a thread that
   * then goes quiet would never wake its followers here — so a client is in the dark for at most
   * one heartbeat interval, never for good. One index probe per followed thread with subscribers.
   */
  async reconcileFollowed(): Promise<void> {
    const followed = [...this.runtime.loaded.values()].filter((t) => !t.lease && t.subscribers.size > 0 && t.deliveredSeq >= 0);
    if (followed.length === 0) return;
    const stored = await this.runtime.store.maxEventSeqs(followed.map((t) => t.id));
    for (const thread of followed) {
      if ((stored.get(thread.id) ?? 0) > thread.deliveredSeq) this.onListen(thread.id);
    }
  }

  private async apply(thread: LoadedThread, msg: FanoutMessage): Promise<void> {
    if (thread.deliveredSeq < 0) thread.deliveryStartsAfter(await this.runtime.store.maxEventSeq(thread.id));
    const from = thread.deliveredSeq;
    const deltas = this.partsOf(thread.id)
      .collect(msg.d)
      .filter(([seq]) => seq > from)
      .map(([seq, method, params, emittedAtMs]) => ({ seq, method, params, emittedAtMs }))
      .sort((a, b) => a.seq - b.seq);
    // The log up to the wake-up; and up to the last delta when the numbers between what was
    // delivered and the deltas are not all accounted for: a wake-up that never came (the owner
    // could not notify, this process was re-listening) left events below the deltas unread, and
    // delivering a delta first would skip them for good. The owner relays a delta only after
    // every event numbered before it has committed, so they are in the log by now.
    const upTo = Math.max(msg.m, gapBelow(from, msg.m, deltas) ? deltas[deltas.length - 1]!.seq : 0);
    const stored = upTo > from ? await this.runtime.store.eventsBetween(thread.id, from, upTo) : [];
    const merged = [...stored.map((e) => ({ seq: e.seq, method: e.method, params: e.params, emittedAtMs: e.emittedAtMs })), ...deltas].sort((a, b) => a.seq - b.seq);
    this.deliverAll(thread, merged);
    if (msg.r || stored.some((e) => e.method === "thread/status/changed")) await this.mirrorRequests(thread);
  }

  /** Delivers every event committed after what this process delivered (a claim, a reconnect). */
  async catchUp(thread: LoadedThread): Promise<void> {
    if (thread.deliveredSeq < 0) return;
    const upTo = await this.runtime.store.maxEventSeq(thread.id);
    const events = await this.runtime.store.eventsBetween(thread.id, thread.deliveredSeq, upTo);
    this.deliverAll(thread, events);
    if (!thread.lease) await this.mirrorRequests(thread);
  }

  private deliverAll(thread: LoadedThread, events: Array<{ seq: number; method: string; params: Record<string, unknown>; emittedAtMs: number }>): void {
    for (const e of events) {
      if (e.seq <= thread.deliveredSeq) continue;
      // The local view of a thread running elsewhere follows its status events.
      if (e.method === "thread/status/changed" && !thread.activeTurn) thread.status = e.params.status as typeof thread.status;
      this.runtime.deliver(thread, e.method, e.params, undefined, e.emittedAtMs);
    }
  }

  /**
   * Shows this process's clients the approvals the owner's turn waits on (the recorded pending
   * requests); an answer goes to the owner, and a request answered anywhere is withdrawn here.
   * Also when a client subscribes here to a thread running elsewhere (attach): a question asked
   * before it came is still waiting for an answer.
   */
  async mirrorRequests(thread: LoadedThread): Promise<void> {
    if (thread.lease) return;
    const pending = await this.leases.store.pendingRequests(thread.id);
    const mirrored = this.mirrors.get(thread.id) ?? new Map<string, AbortController>();
    this.mirrors.set(thread.id, mirrored);
    const open = new Set(pending.map((p) => p.id));
    for (const [itemId, stop] of mirrored) {
      if (!open.has(itemId)) {
        stop.abort();
        mirrored.delete(itemId);
      }
    }
    for (const p of pending) {
      if (mirrored.has(p.id)) continue;
      const stop = new AbortController();
      mirrored.set(p.id, stop);
      const { method, params } = p.pendingRequest;
      void thread.broker.ask(method, params, thread.subscribers, stop.signal).then(async (reply) => {
        if (reply === null || stop.signal.aborted) return;
        const owner = await this.leases.liveOwner(thread.id);
        if (!owner || !this.commands) return;
        await this.commands.send(owner, { kind: "approval", threadId: thread.id, itemId: p.id, reply });
      }).catch((err) => this.log.warn({ err, threadId: thread.id, itemId: p.id }, "could not pass an approval answer to the process running the turn"));
    }
  }

  // ---- requests to the owner -----------------------------------------------------------------

  /** Sends `command` to the live process holding the thread's lease; null when there is none. */
  async toOwner(threadId: string, command: RemoteCommand): Promise<{ result: unknown } | null> {
    if (!this.commands) return null;
    const owner = await this.leases.liveOwner(threadId);
    if (!owner) return null;
    return { result: await this.commands.send(owner, command) };
  }

  /** thread/name/set, archive: recorded under the lease, by the owner when a turn runs elsewhere. */
  async updateMetadata(threadId: string, patch: Partial<Pick<ThreadRecord, "archived" | "name">>, event: ThreadEvent, requester: Subscriber): Promise<ThreadRecord> {
    const runtime = this.runtime;
    const thread = await runtime.load(threadId);
    try {
      await runtime.claim(thread);
    } catch (err) {
      if (!(err instanceof LeaseHeldError)) throw err;
      const forwarded = await this.toOwner(threadId, { kind: "metadata", threadId, patch, event });
      runtime.maybeUnload(thread);
      if (!forwarded) throw err;
      const stored = forwarded.result as { method: string; params: Record<string, unknown>; emittedAtMs: number };
      requester.notify(stored.method, stored.params, stored.emittedAtMs);
      const record = await runtime.store.getThread(threadId);
      return record!;
    }
    const now = Date.now();
    const [stored] = await runtime.commit(thread, [event], (tx) => runtime.store.updateThread(tx, threadId, { ...patch, updatedAtMs: now }).then(() => {}), { alsoTo: requester });
    thread.record = { ...thread.record, ...patch, updatedAtMs: now };
    runtime.maybeUnload(thread);
    void stored;
    return thread.record;
  }

  /** Runs a request another process sent to this one (the owner of the thread). */
  async handle(command: RemoteCommand): Promise<unknown> {
    switch (command.kind) {
      case "interrupt":
        return this.turns!.interruptLocal(command.threadId, command.turnId);
      case "steer":
        return this.turns!.steerLocal(command.threadId, command.turnId, command.input, command.clientId);
      case "shellCommand":
        // Its notifications reach the sender's client through the fan-out, as every owner event does.
        return this.turns!.shellCommandLocal(command.threadId, command.command, command.timeoutMs, NOBODY).then(() => ({}));
      case "approval": {
        const thread = this.runtime.loaded.get(command.threadId);
        const answered = thread?.broker.answer((params) => (params as { itemId?: string }).itemId === command.itemId, command.reply as never);
        if (!answered) throw new Error(`no pending request for item ${command.itemId} on this process`);
        return {};
      }
      case "release":
        // Only a process that took itself for alone keeps idle leases; the sender proves it is
        // not (a hello it missed): relay from now on and give back every idle lease.
        this.fanout?.peerFound();
        return {};
      case "metadata": {
        const thread = await this.runtime.load(command.threadId);
        const [stored] = await this.runtime.commit(thread, [command.event as ThreadEvent], (tx) =>
          this.runtime.store.updateThread(tx, command.threadId, { ...command.patch, updatedAtMs: Date.now() }).then(() => {}),
        );
        thread.record = { ...thread.record, ...command.patch };
        this.runtime.maybeUnload(thread);
        return stored;
      }
    }
  }
}

export type { ServerNotificationMethod };

/**
 * Whether some number between `from` (delivered) and the last of `deltas` (sorted by seq) is
 * neither covered by the wake-up (`m`: the log is read up to it) nor one of the deltas.
 */
export function gapBelow(from: number, m: number, deltas: ReadonlyArray<{ seq: number }>): boolean {
  let next = Math.max(from, m) + 1;
  for (const d of deltas) {
    if (d.seq < next) continue;
    if (d.seq > next) return true;
    next = d.seq + 1;
  }
  return false;
}
