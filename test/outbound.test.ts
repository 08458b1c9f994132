/** The per-connection outbound queue: backpressure, delta merging, and the 1013 cap. */
import { describe, expect, it } from "vitest";
import { deltaHint, OutboundQueue, OVERFLOW_CLOSE_CODE, type OutboundSink } from "../src/transport/outbound.js";

/** A socket whose buffer empties only when the test says so. */
class Sink implements OutboundSink {
  bufferedAmount = 0;
  written: string[] = [];
  closedWith: number | null = null;
  write(text: string) {
    this.written.push(text);
    this.bufferedAmount += text.length;
  }
  close(code: number) {
    this.closedWith = code;
  }
  drainAll() {
    this.bufferedAmount = 0;
  }
}

const opts = { highWaterBytes: 100, maxBufferedBytes: 1_000, pollMs: 1 };
const tick = () => new Promise((r) => setTimeout(r, 5));

describe("OutboundQueue", () => {
  it("does not count one message larger than the cap against a client that reads", async () => {
    const sink = new Sink();
    const q = new OutboundQueue(sink, opts);
    q.push("a".repeat(5_000)); // written at once: the socket was empty
    q.push("s".repeat(300)); // small ones around a large one, as around turn/completed
    q.push("b".repeat(5_000)); // over the cap by itself: not counted
    q.push("t".repeat(300));
    expect(sink.closedWith).toBeNull();
    sink.drainAll();
    for (let i = 0; i < 40 && sink.written.length < 4; i++) {
      sink.drainAll();
      await tick();
    }
    expect(sink.written.map((t) => t[0])).toEqual(["a", "s", "b", "t"]);
    expect(sink.closedWith).toBeNull();
  });

  it("closes with 1013 a client that reads nothing once more than one message waits past the cap", () => {
    const sink = new Sink();
    const q = new OutboundQueue(sink, opts);
    q.push("x".repeat(200)); // fills the socket past the high-water mark
    for (let i = 0; i < 5 && sink.closedWith === null; i++) q.push("y".repeat(300));
    expect(sink.closedWith).toBe(OVERFLOW_CLOSE_CODE);
    q.push("z");
    expect(sink.written).toHaveLength(1); // nothing more after the close
  });

  it("merges consecutive deltas of one item while they wait, keeping every character", async () => {
    const sink = new Sink();
    const q = new OutboundQueue(sink, opts);
    q.push("x".repeat(200));
    const delta = (d: string) => {
      const m = { jsonrpc: "2.0", method: "item/agentMessage/delta", params: { threadId: "t", itemId: "i", delta: d } };
      q.push(JSON.stringify(m), deltaHint(m));
    };
    delta("Hel");
    delta("lo ");
    delta("world");
    expect(q.coalesced).toBe(2);
    sink.drainAll();
    for (let i = 0; i < 20 && sink.written.length < 2; i++) await tick();
    expect(JSON.parse(sink.written[1]!).params.delta).toBe("Hello world");
  });
});
