/**
 * src/transport/ws-frame.ts writes shared notifications straight to the socket: its frames must be
 * byte for byte what ws itself sends for the same text (Sender.frame, server side: no mask, no
 * compression), at each length encoding's edges, and read back by a ws Receiver as the same text.
 */
import { describe, expect, it } from "vitest";
import * as ws from "ws";
import { textFrame } from "../src/transport/ws-frame.js";

// ws's own frame builder and parser (exported by ws, not typed by @types/ws).
const { Sender, Receiver } = ws as unknown as {
  Sender: { frame(data: Buffer, options: object): Buffer[] };
  Receiver: new (options: object) => NodeJS.WritableStream & { on(event: string, listener: (...args: any[]) => void): void };
};

const wsFrame = (text: string): Buffer => {
  const data = Buffer.from(text);
  const list = Sender.frame(data, { fin: true, rsv1: false, opcode: 1, mask: false, readOnly: false });
  return Buffer.concat(list);
};

const texts: Array<[string, string]> = [
  ["empty", ""],
  ["125 bytes (the last one-byte length)", "a".repeat(125)],
  ["126 bytes (the first two-byte length)", "a".repeat(126)],
  ["65 535 bytes", "b".repeat(65_535)],
  ["65 536 bytes (the first eight-byte length)", "c".repeat(65_536)],
  ["non-ASCII (length in bytes, not characters)", `{"delta":"é漢字😀${"x".repeat(120)}"}`],
];

describe("textFrame", () => {
  for (const [name, text] of texts) {
    it(`${name}: the bytes ws sends, and the same text read back`, async () => {
      const { frame, payloadOffset } = textFrame(text);
      expect(frame.equals(wsFrame(text))).toBe(true);
      expect(frame.subarray(payloadOffset).toString("utf8")).toBe(text);
      const receiver = new Receiver({ isServer: false, maxPayload: 0 });
      const got = new Promise<{ data: Buffer; isBinary: boolean }>((resolve, reject) => {
        receiver.on("message", (data: Buffer, isBinary: boolean) => resolve({ data, isBinary }));
        receiver.on("error", reject);
      });
      receiver.write(frame);
      const m = await got;
      expect(m.isBinary).toBe(false);
      expect(m.data.toString("utf8")).toBe(text);
    });
  }
});
