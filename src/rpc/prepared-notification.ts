/**
 * A server notification serialised once for every connection that receives it (issue 16: a delta
 * on a thread with N subscribers used to be stringified N times, and encoded to UTF-8 N more times
 * by ws). The runtime hands every subscriber the same SharedNotification object; the first
 * connection to send it builds this, the others reuse its text, bytes and coalescing hint. The
 * text is exactly what RpcPeer.notify writes (`{"jsonrpc":"2.0","method":…,"params":…,
 * "emittedAtMs":…}`; notifications carry no id, so src/rpc/ids.ts has nothing to do here).
 */
import type { SharedNotification } from "../runtime/threads.js";
import { deltaHint, type CoalesceHint } from "../transport/outbound.js";
import { textFrame, type TextFrame } from "../transport/ws-frame.js";

export class PreparedNotification {
  private msg: Record<string, unknown> | undefined;
  private json: string | undefined;
  private framed: TextFrame | undefined;
  private buf: Buffer | undefined;
  private hint: CoalesceHint | null | undefined;

  constructor(private readonly n: SharedNotification) {}

  get method(): string {
    return this.n.method;
  }

  /** The JSON-RPC message object, members in wire order. */
  get message(): Record<string, unknown> {
    return (this.msg ??= { jsonrpc: "2.0", method: this.n.method, params: this.n.params, emittedAtMs: this.n.emittedAtMs });
  }

  get text(): string {
    return (this.json ??= JSON.stringify(this.message));
  }

  /** UTF-8 of `text` (a view into `frame`: encoded once). */
  get bytes(): Buffer {
    if (this.buf) return this.buf;
    const f = (this.framed ??= textFrame(this.text));
    return (this.buf = f.frame.subarray(f.payloadOffset));
  }

  /** `text` as one WebSocket text frame, header included, written as is by every WebSocket that sends it. */
  get frame(): Buffer {
    return (this.framed ??= textFrame(this.text)).frame;
  }

  /** For a connection that has to queue it (src/transport/outbound.ts): may it merge with the one before? */
  coalesceHint(): CoalesceHint | undefined {
    if (this.hint === undefined) this.hint = deltaHint(this.message) ?? null;
    return this.hint ?? undefined;
  }
}

/** The serialisation shared by every recipient of `n` (kept on `n`: it lives as long as the notification). */
export function prepared(n: SharedNotification): PreparedNotification {
  return (n.serialised ??= new PreparedNotification(n)) as PreparedNotification;
}
