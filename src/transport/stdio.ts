/**
 * stdio transport: JSON-RPC messages on stdin/stdout; logs stay on stderr. Each incoming message
 * is either a JSON line or LSP-framed (`Content-Length:` headers), detected per message (see
 * framing.ts). Replies use JSON lines until the client has sent one LSP-framed message, then
 * LSP framing for good: a client that frames with headers expects headers back, and one that
 * reads lines never sees them.
 */
import type { Readable, Writable } from "node:stream";
import type { SendText } from "../rpc/peer.js";
import { FrameReader, frameMessage, type Framing } from "./framing.js";

export interface StdioTransportOptions {
  input?: Readable;
  output?: Writable;
  maxLineBytes: number;
  accept(send: SendText): { receive(text: string): void; closed(): void; drain?(): Promise<void> };
  /** stdin ended: the client is gone. */
  onEnd(): void;
}

export function startStdioTransport(opts: StdioTransportOptions): { close(): void } {
  const input = opts.input ?? process.stdin;
  const output = opts.output ?? process.stdout;
  let framing: Framing = "lines";
  // Messages written in the same tick leave in one write (cork until the end of the tick): a
  // stream of deltas costs one syscall per tick, not one per message.
  let corked = false;
  const uncork = () => {
    corked = false;
    output.uncork();
  };
  const write = (text: string, as: Framing = framing) => {
    if (!corked) {
      corked = true;
      output.cork();
      process.nextTick(uncork);
    }
    output.write(frameMessage(text, as));
  };
  const peer = opts.accept((text) => write(text));
  const reader = new FrameReader({
    maxMessageBytes: opts.maxLineBytes,
    onMessage: (text, used) => {
      if (used === "headers") framing = "headers";
      peer.receive(text);
    },
    onError: (message, used) => {
      if (used === "headers") framing = "headers";
      write(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32600, message } }), used);
    },
  });
  const onData = (chunk: Buffer | string) => reader.push(typeof chunk === "string" ? Buffer.from(chunk) : chunk);
  input.on("data", onData);

  let closed = false;
  const end = () => {
    if (closed) return;
    closed = true;
    input.off("data", onData);
    input.off("end", end);
    input.off("close", end);
    reader.end();
    // Requests written just before EOF (`cat requests.jsonl | app-server serve --listen stdio://`)
    // are still answered: stdout stays open until they are. A handling failure was logged and
    // answered where it happened (Peer.track); a drain that rejected anyway would only end the wait
    // early, and the connection is closed next either way.
    void Promise.resolve(peer.drain?.())
      .catch(() => {})
      .finally(() => {
        peer.closed();
        opts.onEnd();
      });
  };
  input.on("end", end);
  input.on("close", end);
  return {
    close: () => {
      input.pause();
      end();
    },
  };
}
