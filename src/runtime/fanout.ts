/**
 * Cross-process fan-out over Postgres LISTEN/NOTIFY (issue 12; Postgres is the only shared
 * component). One channel per thread. The process that runs a thread's turn relays, in seq order:
 *   - for committed events only a wake-up with the highest committed seq (`m`): listeners read
 *     thread_events after their last delivered seq up to `m` — no gap, no duplicate, and the
 *     payload stays small whatever the event;
 *   - deltas (never stored) in full (`d`).
 * Relays are batched per thread and flushed at most every `intervalMs` (default 20 ms), after the
 * commit and outside its transaction: pg_notify inside the recording transaction serialises every
 * commit on the notification queue lock (measured 2.6–3× slower commits), here it costs nothing on
 * the commit path. A flush after a quiet period goes out on the next tick (sparse events are not
 * delayed by the batching window).
 *
 * Relays go out only while another live process exists (issue 16: a lone process spent ~25 % of
 * its busy time notifying nobody). Processes meet on one cluster-wide channel: a starting process,
 * listening there before it registers, announces itself (`hello`); every running process turns
 * relaying on at once and answers (`welcome`), and the newcomer serves only once each process alive
 * when it registered has answered — so whatever thread it follows is already relayed by its owner.
 * Relaying turns off only when a heartbeat's refresh finds no other live process (and no hello came
 * while that query ran, and this process has not itself just been cut off from the database). A
 * process that was cut off long enough to be taken for dead joins again the same way when it is
 * back, then reads what its followed threads committed meanwhile (wake-ups skipped while nobody
 * relayed to it).
 */
import type { Listening, NotifyChannel } from "../store/notify-channel.js";
import type { RuntimeLogger } from "./thread-types.js";

/** Postgres's NOTIFY payload limit is 8000 bytes; keep a margin for the JSON envelope. */
const MAX_PAYLOAD = 7600;

export interface RelayedDelta {
  seq: number;
  method: string;
  params: Record<string, unknown>;
  emittedAtMs: number;
}

/** One notification as a listener receives it. */
export interface FanoutMessage {
  /** The sending process (a process ignores its own relays). */
  o: string;
  t: string;
  /** Highest committed seq (listeners read the event log up to it), or 0. */
  m: number;
  /**
   * Relayed deltas: [seq, method, params, emittedAtMs], and for a delta too large for one
   * notification, its parts: [seq, method, params with a piece of the text, emittedAtMs, part, parts].
   */
  d: Array<[number, string, Record<string, unknown>, number] | [number, string, Record<string, unknown>, number, number, number]>;
  /** Server requests of the thread changed (approvals pending or answered). */
  r?: 1;
}

/** Characters of delta text per part: even escaped as \uXXXX (6 bytes each) a part fits one notification. */
const PART_CHARS = Math.floor((MAX_PAYLOAD - 1_200) / 6);

/**
 * A delta as relay entries: itself when it fits one notification, else its text in parts that
 * the listener joins (never splitting a surrogate pair) — so a large chunk reaches other
 * processes' clients live too, not only with its item/completed.
 */
export function splitDelta(d: RelayedDelta): FanoutMessage["d"] {
  const whole: FanoutMessage["d"][number] = [d.seq, d.method, d.params, d.emittedAtMs];
  const text = d.params.delta;
  if (typeof text !== "string" || Buffer.byteLength(JSON.stringify(whole)) <= MAX_PAYLOAD - 200) return [whole];
  const pieces: string[] = [];
  for (let i = 0; i < text.length; ) {
    let end = Math.min(text.length, i + PART_CHARS);
    const code = text.charCodeAt(end - 1);
    if (end < text.length && code >= 0xd800 && code <= 0xdbff) end--; // keep a surrogate pair together
    pieces.push(text.slice(i, end));
    i = end;
  }
  return pieces.map((piece, part) => [d.seq, d.method, { ...d.params, delta: piece }, d.emittedAtMs, part, pieces.length]);
}

/** Joins the parts of split deltas (they may span notifications); whole entries pass through. */
export class DeltaParts {
  private readonly pending = new Map<number, string[]>();

  /** The complete deltas among `entries`, parts held until their last one arrives. */
  collect(entries: FanoutMessage["d"]): Array<[number, string, Record<string, unknown>, number]> {
    const out: Array<[number, string, Record<string, unknown>, number]> = [];
    for (const e of entries) {
      if (e.length === 4) {
        out.push(e);
        continue;
      }
      const [seq, method, params, emittedAtMs, part, parts] = e;
      const got = this.pending.get(seq) ?? [];
      got[part] = params.delta as string;
      if (got.filter((x) => x !== undefined).length < parts) {
        this.pending.set(seq, got);
        continue;
      }
      this.pending.delete(seq);
      out.push([seq, method, { ...params, delta: got.join("") }, emittedAtMs]);
    }
    return out;
  }

  /** Forgets parts that can no longer complete (after a catch-up from the log). */
  dropUpTo(seq: number): void {
    for (const s of this.pending.keys()) if (s <= seq) this.pending.delete(s);
  }
}

/** The cluster-wide channel where processes announce themselves (hello / welcome). */
export const PRESENCE_CHANNEL = "aas_presence";

type Presence = { k: "hello"; o: string } | { k: "welcome"; o: string; to: string };

export const threadChannel = (threadId: string) => `aas_t_${threadId.replace(/[^0-9a-zA-Z]/g, "").toLowerCase()}`;

interface Outbox {
  maxSeq: number;
  /** Seqs of committed events in this batch (each part's wake-up covers those before its deltas' successors). */
  committedSeqs: number[];
  deltas: RelayedDelta[];
  requestsChanged: boolean;
}

export class Fanout {
  private readonly outbox = new Map<string, Outbox>();
  private readonly following = new Map<string, Promise<Listening>>();
  private timer: NodeJS.Timeout | null = null;
  private lastFlush = 0;
  private flushing: Promise<void> = Promise.resolve();
  /** Observes how long each flush's NOTIFY statement took (bench). */
  onFlush?: (ms: number, messages: number) => void;
  /** Whether another live process may follow this one's threads: relays are sent only then. */
  relaying = false;
  /**
   * Told when another process is found alive (its hello, or the registry): a process alone keeps
   * its idle threads' leases (thread-leases.ts) and gives them back now, before its welcome.
   */
  onPeerFound?: () => void;
  /** Hellos heard so far: a refresh that ran across one must not turn relaying off. */
  private hellos = 0;
  /** Welcomes awaited while joining: process id → resolve. */
  private readonly awaited = new Map<string, () => void>();
  private presence: Listening | null = null;

  constructor(
    private readonly channel: NotifyChannel,
    readonly processId: string,
    private readonly log: RuntimeLogger,
    private readonly onMessage: (msg: FanoutMessage) => void,
    /** Called when a channel is (re)listened, e.g. after a reconnect: catch up from the log. */
    private readonly onListen: (threadId: string) => void,
    private readonly intervalMs = 20,
  ) {}

  // ---- presence ----------------------------------------------------------------------------

  /** Listens on the presence channel; call before registering (a later joiner must reach us). */
  async listenPresence(): Promise<void> {
    this.presence = await this.channel.listen(PRESENCE_CHANNEL, (text) => this.onPresence(text));
  }

  private onPresence(text: string): void {
    let msg: Presence;
    try {
      msg = JSON.parse(text) as Presence;
    } catch {
      return;
    }
    if (msg.o === this.processId) return;
    if (msg.k === "hello") {
      this.hellos++;
      if (!this.relaying) this.log.info({ peer: msg.o }, "another process joined: relaying to other processes");
      this.peerFound();
      void this.channel.notify(PRESENCE_CHANNEL, JSON.stringify({ k: "welcome", o: this.processId, to: msg.o })).catch((err) =>
        this.log.warn({ err, peer: msg.o }, "could not answer a joining process"),
      );
    } else if (msg.k === "welcome" && msg.to === this.processId) {
      this.awaited.get(msg.o)?.();
    }
  }

  /**
   * Announces this (registered) process and waits, at most `timeoutMs`, for a welcome from each of
   * `others` (the live processes when it registered). Relaying starts on if there are any.
   */
  async join(others: string[], timeoutMs: number): Promise<void> {
    if (others.length > 0) this.relaying = true;
    const waits = others.map((id) => new Promise<void>((resolve) => this.awaited.set(id, resolve)));
    await this.announce();
    let timer: NodeJS.Timeout | undefined;
    const timedOut = await Promise.race([
      Promise.all(waits).then(() => false),
      new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(true), timeoutMs))),
    ]);
    clearTimeout(timer);
    if (timedOut) this.log.warn({ missing: others.filter((id) => this.awaited.has(id)), timeoutMs }, "not every running process answered this one's hello in time");
    this.awaited.clear();
  }

  /** NOTIFYs `hello`: every running process relays from now on (and answers `welcome`). */
  async announce(): Promise<void> {
    await this.channel.notify(PRESENCE_CHANNEL, JSON.stringify({ k: "hello", o: this.processId }));
  }

  /** Another live process exists (its hello, the registry, a request of its own): relays go out from now on. */
  peerFound(): void {
    const found = !this.relaying;
    this.relaying = true;
    if (found) this.onPeerFound?.();
  }

  /** Number of hellos heard so far (pass to `peersSeen` with a refresh started now). */
  get hellosHeard(): number {
    return this.hellos;
  }

  /**
   * A refresh of the registry, started when `hellosHeard` was `since`, found `others` live
   * processes. `mayStop`: whether an empty registry can be believed — not while this process's
   * own view of leases is stale (LeaseManager.judgesOthers: after an outage every lease reads
   * expired though its process lives, and a wake-up skipped then is one a follower never gets).
   */
  peersSeen(others: number, since: number, mayStop: boolean): void {
    if (others > 0) this.peerFound();
    else if (this.relaying && mayStop && since === this.hellos) {
      this.relaying = false;
      this.log.info({}, "no other live process: relaying stopped");
    }
  }

  // ---- the owner side ----------------------------------------------------------------------

  committed(threadId: string, seq: number): void {
    if (!this.relaying) return;
    const box = this.box(threadId);
    box.maxSeq = Math.max(box.maxSeq, seq);
    box.committedSeqs.push(seq);
    this.schedule();
  }

  delta(threadId: string, d: RelayedDelta): void {
    if (!this.relaying) return;
    this.box(threadId).deltas.push(d);
    this.schedule();
  }

  requestsChanged(threadId: string): void {
    if (!this.relaying) return;
    this.box(threadId).requestsChanged = true;
    this.schedule();
  }

  private box(threadId: string): Outbox {
    let box = this.outbox.get(threadId);
    if (!box) this.outbox.set(threadId, (box = { maxSeq: 0, committedSeqs: [], deltas: [], requestsChanged: false }));
    return box;
  }

  private schedule(): void {
    if (this.timer) return;
    const wait = Math.max(0, this.lastFlush + this.intervalMs - Date.now());
    this.timer = setTimeout(() => {
      this.timer = null;
      this.flushing = this.flushing.then(() => this.flush());
    }, wait);
  }

  private async flush(): Promise<void> {
    this.lastFlush = Date.now();
    const channels: string[] = [];
    const payloads: string[] = [];
    for (const [threadId, box] of this.outbox) {
      for (const text of this.encode(threadId, box)) {
        channels.push(threadChannel(threadId));
        payloads.push(text);
      }
    }
    this.outbox.clear();
    if (channels.length === 0) return;
    const t0 = performance.now();
    try {
      // One statement for the whole batch; rows are notified in order (deltas before the wake-up).
      await this.channel.notifyAll(channels, payloads);
      this.onFlush?.(performance.now() - t0, channels.length);
    } catch (err) {
      // Listeners catch up from the event log on their next wake-up or re-listen; deltas are lost.
      this.log.warn({ err, messages: channels.length }, "could not relay notifications to other processes");
    }
  }

  /**
   * Splits a thread's batch into payloads under the NOTIFY limit. Each part's wake-up covers the
   * committed events below the next part's first delta, so a listener merging log and deltas by
   * seq never delivers a delta before an earlier event.
   */
  private encode(threadId: string, box: Outbox): string[] {
    // Each entry is serialised once (issue 16: it was three times per delta) and the payload is
    // assembled from those texts: the same JSON as JSON.stringify of a FanoutMessage.
    const parts: Array<{ seq: number[]; json: string[] }> = [{ seq: [], json: [] }];
    let size = 0;
    const add = (seq: number, json: string, bytes: number) => {
      if (size + bytes > MAX_PAYLOAD - 200) {
        parts.push({ seq: [], json: [] });
        size = 0;
      }
      const part = parts[parts.length - 1]!;
      part.seq.push(seq);
      part.json.push(json);
      size += bytes + 1;
    };
    for (const d of box.deltas) {
      const json = JSON.stringify([d.seq, d.method, d.params, d.emittedAtMs]);
      const bytes = Buffer.byteLength(json);
      if (bytes <= MAX_PAYLOAD - 200) {
        add(d.seq, json, bytes);
        continue;
      }
      for (const entry of splitDelta(d)) {
        const partJson = JSON.stringify(entry);
        const partBytes = Buffer.byteLength(partJson);
        if (partBytes > MAX_PAYLOAD - 200) continue; // not a text delta: its item/completed carries it
        add(d.seq, partJson, partBytes);
      }
    }
    const out: string[] = [];
    const head = `{"o":${JSON.stringify(this.processId)},"t":${JSON.stringify(threadId)},"m":`;
    parts.forEach((part, i) => {
      const next = parts[i + 1]?.seq[0];
      const last = next === undefined;
      const m = last ? box.maxSeq : Math.max(0, ...box.committedSeqs.filter((s) => s < next));
      if (last && part.json.length === 0 && m === 0 && !box.requestsChanged) return;
      out.push(`${head}${m},"d":[${part.json.join(",")}]${last && box.requestsChanged ? ',"r":1' : ""}}`);
    });
    return out;
  }

  // ---- the listener side -------------------------------------------------------------------

  /** Starts listening on a thread's channel (resolves once LISTEN is in effect). */
  async follow(threadId: string): Promise<void> {
    let listening = this.following.get(threadId);
    if (!listening) {
      let first = true;
      listening = this.channel.listen(
        threadChannel(threadId),
        (text) => {
          let msg: FanoutMessage;
          try {
            msg = JSON.parse(text) as FanoutMessage;
          } catch {
            return;
          }
          if (msg.o !== this.processId) this.onMessage(msg);
        },
        () => {
          // The first LISTEN is followed by the caller's own read; later ones are reconnects.
          if (!first) this.onListen(threadId);
          first = false;
        },
      );
      this.following.set(threadId, listening);
      listening.catch(() => this.following.delete(threadId));
    }
    await listening;
  }

  unfollow(threadId: string): void {
    const listening = this.following.get(threadId);
    if (!listening) return;
    this.following.delete(threadId);
    // A LISTEN that failed was reported to follow()'s caller; a failed UNLISTEN only leaves
    // wake-ups for a thread nobody here follows, which onMessage drops (not loaded).
    void listening
      .then((l) => l.unlisten())
      .catch((err) => this.log.warn({ err, threadId }, "could not stop listening for a thread's events"));
  }

  async close(): Promise<void> {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
      this.flushing = this.flushing.then(() => this.flush());
    }
    await this.flushing;
    for (const id of [...this.following.keys()]) this.unfollow(id);
    // Shutting down: the connection closes next, and its LISTENs with it.
    await this.presence?.unlisten().catch((err) => this.log.warn({ err }, "could not stop listening for other processes"));
    this.presence = null;
  }
}
