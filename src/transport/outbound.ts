/**
 * Per-connection outbound buffering with backpressure. Messages go straight to the socket while
 * it keeps up; when its buffer passes the high-water mark they queue here, and while queued,
 * consecutive deltas of the same item are merged into one (a slow reader gets fewer, larger
 * deltas — never lost text, never a dropped lifecycle notification). Past a hard cap the
 * connection is closed with 1013 so memory stays bounded with a client that reads nothing; the
 * client reconnects and resumes with `afterSeq` (the stored events fill the gap).
 */

/** What the queue needs from a socket (a ws WebSocket, or a stdout adapter). */
export interface OutboundSink {
  /** Bytes accepted but not yet written to the network. */
  readonly bufferedAmount: number;
  /**
   * One message: its text, or its UTF-8 bytes (a notification serialised once for many sockets).
   * `source`: what the message was pushed with, when it is sent as pushed (not merged), so a
   * sink may write a form of it prepared once for every connection (a WebSocket frame).
   */
  write(data: string | Buffer, source?: HintSource): void;
  close(code: number, reason: string): void;
}

/** Marks a delta notification that may be merged with the one queued before it. */
export interface CoalesceHint {
  /** Same key = same stream (method + item + part index). */
  key: string;
  message: { method: string; params: { delta: string; seq?: number } & Record<string, unknown>; emittedAtMs?: number; jsonrpc?: string };
}

export interface OutboundOptions {
  /** Queue instead of writing once the socket holds this many bytes (default 1 MiB). */
  highWaterBytes: number;
  /** Close the connection (1013) when socket buffer + queue exceed this (default 32 MiB). */
  maxBufferedBytes: number;
  /** How often to retry while the socket is full. */
  pollMs?: number;
  onCoalesced?(): void;
  onOverflow?(bufferedBytes: number): void;
}

/** A hint computed only if the message has to wait (the direct path never needs it). */
export interface HintSource {
  coalesceHint(): CoalesceHint | undefined;
}

interface Entry {
  /** Serialised message; absent while deltas are still being merged into it. */
  text?: string | Buffer;
  bytes: number;
  hint?: CoalesceHint;
  /** Merged delta texts, joined once when the entry is sent (merging stays linear). */
  parts?: string[];
  /** What it was pushed with (dropped once merged). */
  source?: HintSource;
}

export const OVERFLOW_CLOSE_CODE = 1013;
export const OVERFLOW_CLOSE_REASON = "outbound buffer full: reconnect and thread/resume with afterSeq";

export class OutboundQueue {
  private readonly queue: Entry[] = [];
  private queuedBytes = 0;
  private timer: NodeJS.Timeout | null = null;
  private closed = false;
  coalesced = 0;

  constructor(
    private readonly sink: OutboundSink,
    private readonly opts: OutboundOptions,
  ) {}

  /** Bytes waiting here plus in the socket's own buffer. */
  get bufferedBytes(): number {
    return this.queuedBytes + this.sink.bufferedAmount;
  }

  /** `text`: the message as text or UTF-8 bytes (sizes count its length either way). */
  push(text: string | Buffer, hintOrSource?: CoalesceHint | HintSource): void {
    if (this.closed) return;
    const source = hintOrSource && "coalesceHint" in hintOrSource ? hintOrSource : undefined;
    if (this.queue.length === 0 && this.sink.bufferedAmount < this.opts.highWaterBytes) {
      this.sink.write(text, source);
      return;
    }
    const hint = source ? source.coalesceHint() : (hintOrSource as CoalesceHint | undefined);
    const tail = this.queue[this.queue.length - 1];
    if (hint && tail?.hint && tail.hint.key === hint.key) {
      tail.parts ??= [tail.hint.message.params.delta];
      tail.parts.push(hint.message.params.delta);
      tail.hint = { key: hint.key, message: { ...hint.message, emittedAtMs: tail.hint.message.emittedAtMs ?? hint.message.emittedAtMs } };
      delete tail.text;
      delete tail.source;
      tail.bytes += hint.message.params.delta.length;
      this.queuedBytes += hint.message.params.delta.length;
      this.coalesced++;
      this.opts.onCoalesced?.();
    } else {
      this.queue.push({ text, bytes: text.length, ...(hint ? { hint } : {}), ...(source ? { source } : {}) });
      this.queuedBytes += text.length;
    }
    // Only what waits here counts: the socket itself never holds much more than the high-water
    // mark (we stop writing there), and one large message must not doom a reading client (a
    // 12 MB answer is followed by turn/completed carrying it again, with small events around
    // it): the largest waiting message is not counted. A client that reads nothing piles up
    // everything else and is closed; memory stays bounded by the cap plus one message.
    if (this.queuedBytes > this.opts.maxBufferedBytes && this.queuedBytes - this.largestQueued() > this.opts.maxBufferedBytes) {
      this.opts.onOverflow?.(this.bufferedBytes);
      this.close();
      this.sink.close(OVERFLOW_CLOSE_CODE, OVERFLOW_CLOSE_REASON);
      return;
    }
    this.schedule();
  }

  private largestQueued(): number {
    let max = 0;
    for (const e of this.queue) if (e.bytes > max) max = e.bytes;
    return max;
  }

  close(): void {
    this.closed = true;
    this.queue.length = 0;
    this.queuedBytes = 0;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  private schedule(): void {
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.pump();
    }, this.opts.pollMs ?? 5);
  }

  private pump(): void {
    while (!this.closed && this.queue.length > 0 && this.sink.bufferedAmount < this.opts.highWaterBytes) {
      const entry = this.queue.shift()!;
      this.queuedBytes -= entry.bytes;
      if (entry.text !== undefined) this.sink.write(entry.text, entry.source);
      else this.sink.write(serialise(entry));
    }
    if (!this.closed && this.queue.length > 0) this.schedule();
  }
}

function serialise(entry: Entry): string {
  const m = entry.hint!.message;
  return JSON.stringify({ ...m, params: { ...m.params, delta: entry.parts!.join("") } });
}

const DELTA_METHOD = /(\/delta|Delta)$/;

/** The coalescing hint for a notification, if it is a delta. */
export function deltaHint(message: { method?: unknown; params?: unknown }): CoalesceHint | undefined {
  if (typeof message.method !== "string" || !DELTA_METHOD.test(message.method)) return undefined;
  const p = message.params as Record<string, unknown> | undefined;
  if (!p || typeof p.delta !== "string" || typeof p.itemId !== "string") return undefined;
  const part = p.summaryIndex ?? p.contentIndex ?? "";
  return { key: `${message.method}|${p.threadId}|${p.itemId}|${part}`, message: message as CoalesceHint["message"] };
}
