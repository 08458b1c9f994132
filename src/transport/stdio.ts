/** stdio transport: one JSON message per line on stdin/stdout; logs stay on stderr. */
import { createInterface } from "node:readline";
import type { Readable, Writable } from "node:stream";

export interface StdioTransportOptions {
  input?: Readable;
  output?: Writable;
  maxLineBytes: number;
  accept(send: (text: string) => void): { receive(text: string): void; closed(): void; drain?(): Promise<void> };
  /** stdin ended: the client is gone. */
  onEnd(): void;
}

export function startStdioTransport(opts: StdioTransportOptions): { close(): void } {
  const input = opts.input ?? process.stdin;
  const output = opts.output ?? process.stdout;
  const peer = opts.accept((text) => {
    output.write(text + "\n");
  });
  const lines = createInterface({ input, crlfDelay: Infinity });
  lines.on("line", (line) => {
    if (line.trim() === "") return;
    if (Buffer.byteLength(line) > opts.maxLineBytes) {
      output.write(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32600, message: `Invalid Request: message larger than ${opts.maxLineBytes} bytes` } }) + "\n");
      return;
    }
    peer.receive(line);
  });
  let closed = false;
  const end = () => {
    if (closed) return;
    closed = true;
    // Requests written just before EOF (`cat requests.jsonl | app-server serve --listen stdio://`)
    // are still answered: stdout stays open until they are.
    void Promise.resolve(peer.drain?.())
      .catch(() => {})
      .finally(() => {
        peer.closed();
        opts.onEnd();
      });
  };
  lines.on("close", end);
  return {
    close: () => {
      lines.close();
    },
  };
}
