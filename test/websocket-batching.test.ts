/**
 * The WebSocket transport batches the frames it writes in one tick into one write to the TCP socket
 * (src/transport/websocket.ts, writesPerTick): it corks the socket of the upgrade request, which ws
 * writes its frames to. Observed on the server's side of the connection: the socket's writes, and
 * which frames each one carried.
 */
import net from "node:net";
import { afterEach, describe, expect, it, vi } from "vitest";
import { WebSocket } from "ws";
import { localPrincipal } from "../src/identity/principal.js";
import { createLogger } from "../src/log.js";
import { startWebSocketTransport, type WebSocketTransport } from "../src/transport/websocket.js";

let transport: WebSocketTransport | undefined;
afterEach(async () => {
  vi.restoreAllMocks();
  await transport?.close();
  transport = undefined;
});

/** The bytes of each write made on a socket whose local port is `port` (the server's side). */
function recordWrites(port: () => number | undefined): string[] {
  const writes: string[] = [];
  const proto = net.Socket.prototype as net.Socket & {
    _write(chunk: Buffer, encoding: BufferEncoding, cb: (err?: Error | null) => void): void;
    _writev(chunks: Array<{ chunk: Buffer }>, cb: (err?: Error | null) => void): void;
  };
  const write = proto._write;
  const writev = proto._writev;
  vi.spyOn(proto, "_write").mockImplementation(function (this: net.Socket, chunk, encoding, cb) {
    if (this.localPort === port()) writes.push(Buffer.from(chunk).toString("latin1"));
    return write.call(this, chunk, encoding, cb);
  });
  vi.spyOn(proto, "_writev").mockImplementation(function (this: net.Socket, chunks, cb) {
    if (this.localPort === port()) writes.push(chunks.map((c) => Buffer.from(c.chunk).toString("latin1")).join(""));
    return writev.call(this, chunks, cb);
  });
  return writes;
}

describe("websocket transport write batching", () => {
  it("frames sent in one tick leave the server's socket in one write, and each arrives as its own message", async () => {
    let port: number | undefined;
    const writes = recordWrites(() => port);
    const remotes: Array<string | null> = [];
    transport = await startWebSocketTransport({
      host: "127.0.0.1",
      port: 0,
      maxFrameBytes: 1 << 20,
      log: createLogger("silent"),
      isReady: () => true,
      accept: (send, _close, who) => {
        remotes.push(who.remote);
        return {
          // Three frames in one tick for each message received.
          receive: (text) => {
            for (let n = 0; n < 3; n++) send(JSON.stringify({ n, of: text }));
          },
          closed: () => {},
        };
      },
      admission: { tokenRequired: true, admit: async () => ({ ok: true, principal: localPrincipal("local") }) },
      keepalive: { pingIntervalMs: 0, maxMissedPongs: 2, initializeTimeoutMs: 0 },
    });
    port = Number(new URL(transport.url).port);

    const client = new WebSocket(transport.url);
    const received: string[] = [];
    const three = new Promise<void>((resolve) =>
      client.on("message", (data) => {
        received.push(data.toString());
        if (received.length === 3) resolve();
      }),
    );
    await new Promise<void>((resolve, reject) => {
      client.once("open", resolve);
      client.once("error", reject);
    });
    client.send("ping-1");
    await three;
    client.close();

    expect(received).toEqual([0, 1, 2].map((n) => JSON.stringify({ n, of: "ping-1" })));
    expect(remotes).toEqual(["127.0.0.1"]);
    const framesIn = (w: string) => [0, 1, 2].filter((n) => w.includes(JSON.stringify({ n, of: "ping-1" })));
    const carrying = writes.filter((w) => framesIn(w).length > 0);
    // One write with all three frames (without the batching, ws writes each frame on its own).
    expect(carrying.map(framesIn)).toEqual([[0, 1, 2]]);
  });
});
