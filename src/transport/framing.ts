/**
 * Message framing on a byte stream (stdio), detected per message:
 * - JSON lines: one message per line (`\n`, optionally `\r\n`); blank lines are skipped;
 * - LSP base protocol: `Content-Length: N\r\n` (and optionally `Content-Type: …\r\n`), an empty
 *   line, then exactly N bytes of JSON. Stock vscode-jsonrpc (and every LSP library) frames this
 *   way over stdio.
 * A JSON text never starts with `Content-Length:` or `Content-Type:`, so the first bytes of each
 * message decide; a client may even mix both. Bytes are buffered in one growable buffer (appends
 * are amortised O(1), so a 16 MiB message arriving in 64 KiB chunks is not copied quadratically),
 * and oversized messages are discarded as they stream in rather than held in memory.
 */

export type Framing = "lines" | "headers";

/** Header blocks are a line or two; anything longer is not a header block. */
export const MAX_HEADER_BYTES = 8 * 1024;

const HEADER_PREFIXES = ["content-length:", "content-type:"].map((p) => Buffer.from(p));

/** A message in the given framing. */
export function frameMessage(text: string, framing: Framing): string {
  return framing === "lines" ? `${text}\n` : `Content-Length: ${Buffer.byteLength(text)}\r\n\r\n${text}`;
}

/** A byte queue over one growable buffer. */
class ByteQueue {
  private buf = Buffer.alloc(64 * 1024);
  private start = 0;
  private end = 0;

  get length(): number {
    return this.end - this.start;
  }

  append(chunk: Buffer): void {
    if (this.end + chunk.length > this.buf.length) {
      const needed = this.length + chunk.length;
      const next = needed > this.buf.length / 2 ? Buffer.alloc(Math.max(needed * 2, this.buf.length)) : this.buf;
      this.buf.copy(next, 0, this.start, this.end);
      this.buf = next;
      this.end = this.length;
      this.start = 0;
    }
    chunk.copy(this.buf, this.end);
    this.end += chunk.length;
  }

  view(): Buffer {
    return this.buf.subarray(this.start, this.end);
  }

  indexOf(byte: number, from = 0): number {
    return this.view().indexOf(byte, from);
  }

  /** The next n bytes as UTF-8 text, consumed. */
  takeText(n: number): string {
    const text = this.buf.toString("utf8", this.start, this.start + n);
    this.skip(n);
    return text;
  }

  skip(n: number): void {
    this.start += n;
    if (this.start === this.end) this.start = this.end = 0;
  }

  clear(): void {
    this.start = this.end = 0;
  }
}

export interface FrameReaderOptions {
  /** Largest message body accepted (a longer line or Content-Length is refused). */
  maxMessageBytes: number;
  onMessage(text: string, framing: Framing): void;
  /** A message that cannot be delivered; `reason` is for the client. */
  onError(reason: string, framing: Framing): void;
}

type State =
  | { kind: "start" }
  | { kind: "body"; bytes: number }
  | { kind: "skipLine" } // an oversized line: drop bytes up to the next newline
  | { kind: "skipBody"; remaining: number }; // an oversized body: drop its bytes

export class FrameReader {
  private readonly queue = new ByteQueue();
  private state: State = { kind: "start" };

  constructor(private readonly opts: FrameReaderOptions) {}

  push(chunk: Buffer): void {
    if (this.state.kind === "skipBody" && chunk.length <= this.state.remaining) {
      this.state.remaining -= chunk.length;
      if (this.state.remaining === 0) this.state = { kind: "start" };
      return;
    }
    this.queue.append(chunk);
    this.process(false);
  }

  /** The stream ended: a last line without a newline is still a message (as readline has it). */
  end(): void {
    this.process(true);
    const q = this.queue;
    if (this.state.kind === "body") this.opts.onError(`Invalid Request: stream ended ${q.length} bytes into a ${this.state.bytes}-byte message`, "headers");
    else if (this.state.kind === "start" && q.length > 0) {
      const rest = q.takeText(q.length);
      if (rest.trim() !== "") this.deliverLine(rest);
    }
    q.clear();
  }

  private process(ended: boolean): void {
    const q = this.queue;
    for (;;) {
      const s = this.state;
      if (s.kind === "skipLine") {
        const nl = q.indexOf(0x0a);
        if (nl < 0) return q.clear();
        q.skip(nl + 1);
        this.state = { kind: "start" };
      } else if (s.kind === "skipBody") {
        const n = Math.min(s.remaining, q.length);
        q.skip(n);
        s.remaining -= n;
        if (s.remaining > 0) return;
        this.state = { kind: "start" };
      } else if (s.kind === "body") {
        if (q.length < s.bytes) return;
        this.state = { kind: "start" };
        this.opts.onMessage(q.takeText(s.bytes), "headers");
      } else {
        const framing = this.detect(ended);
        if (framing === undefined) return;
        if (!(framing === "headers" ? this.readHeaders() : this.readLine())) return;
      }
    }
  }

  /** Which framing the next message uses; undefined until enough bytes have arrived to tell. */
  private detect(ended: boolean): Framing | undefined {
    const head = this.queue.view();
    if (head.length === 0) return undefined;
    for (const prefix of HEADER_PREFIXES) {
      const n = Math.min(prefix.length, head.length);
      if (head.subarray(0, n).toString("latin1").toLowerCase() !== prefix.subarray(0, n).toString("latin1")) continue;
      if (n === prefix.length) return "headers";
      return ended ? "lines" : undefined; // "Cont…" so far: wait for the rest
    }
    return "lines";
  }

  /** Reads one JSON line; false when it has not fully arrived. */
  private readLine(): boolean {
    const q = this.queue;
    const nl = q.indexOf(0x0a);
    if (nl < 0) {
      if (q.length > this.opts.maxMessageBytes) {
        this.tooLarge("lines");
        q.clear();
        this.state = { kind: "skipLine" };
      }
      return false;
    }
    const line = q.takeText(nl + 1).replace(/\r?\n$/, "");
    if (line.trim() !== "") this.deliverLine(line);
    return true;
  }

  private deliverLine(line: string): void {
    if (Buffer.byteLength(line) > this.opts.maxMessageBytes) this.tooLarge("lines");
    else this.opts.onMessage(line, "lines");
  }

  /** Reads a header block up to its empty line; false when it has not fully arrived. */
  private readHeaders(): boolean {
    const q = this.queue;
    const view = q.view();
    const headers: string[] = [];
    let pos = 0;
    for (;;) {
      const nl = view.indexOf(0x0a, pos);
      if (nl < 0) {
        if (q.length > MAX_HEADER_BYTES) {
          this.opts.onError(`Invalid Request: LSP header block longer than ${MAX_HEADER_BYTES} bytes`, "headers");
          q.clear();
          this.state = { kind: "skipLine" };
        }
        return false;
      }
      const line = view.toString("latin1", pos, nl).replace(/\r$/, "");
      pos = nl + 1;
      if (line === "") break;
      headers.push(line);
    }
    q.skip(pos);
    const length = headers.map((h) => /^content-length:[ \t]*(\d{1,15})[ \t]*$/i.exec(h)).find((m) => m)?.[1];
    if (length === undefined) {
      // Without a length the body cannot be found: report it and read on from here (whatever
      // follows is answered as what it looks like, at worst with parse errors).
      this.opts.onError("Invalid Request: LSP header block without a valid Content-Length", "headers");
      return true;
    }
    const bytes = Number(length);
    if (bytes > this.opts.maxMessageBytes) {
      this.tooLarge("headers");
      this.state = { kind: "skipBody", remaining: bytes };
    } else {
      this.state = { kind: "body", bytes };
    }
    return true;
  }

  private tooLarge(framing: Framing): void {
    this.opts.onError(`Invalid Request: message larger than ${this.opts.maxMessageBytes} bytes`, framing);
  }
}
