/** Per-message framing detection on stdio (src/transport/framing.ts): JSON lines and LSP headers. */
import { describe, expect, it } from "vitest";
import { FrameReader, frameMessage, MAX_HEADER_BYTES, type Framing } from "../src/transport/framing.js";

function reader(maxMessageBytes = 1024) {
  const got: Array<[kind: "message" | "error", text: string, framing: Framing]> = [];
  const r = new FrameReader({
    maxMessageBytes,
    onMessage: (text, framing) => got.push(["message", text, framing]),
    onError: (reason, framing) => got.push(["error", reason, framing]),
  });
  return { r, got };
}

const lsp = (body: string) => `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;

/** Feeds the bytes in every chunking that matters: whole, and one byte at a time. */
function feedAll(bytes: string, maxMessageBytes?: number) {
  const whole = reader(maxMessageBytes);
  whole.r.push(Buffer.from(bytes));
  whole.r.end();
  const byByte = reader(maxMessageBytes);
  for (const b of Buffer.from(bytes)) byByte.r.push(Buffer.from([b]));
  byByte.r.end();
  expect(byByte.got).toEqual(whole.got);
  return whole.got;
}

describe("FrameReader", () => {
  it("reads JSON lines (LF and CRLF), skips blank lines, and keeps a last line without a newline", () => {
    expect(feedAll('{"a":1}\n\n  \r\n{"b":"ü"}\r\n{"c":3}')).toEqual([
      ["message", '{"a":1}', "lines"],
      ["message", '{"b":"ü"}', "lines"],
      ["message", '{"c":3}', "lines"],
    ]);
  });

  it("reads LSP-framed messages, whose bodies need no newline and may contain them, with any header case and a Content-Type", () => {
    const body2 = '{"x":"line\\nbreak",\n "y":"€"}';
    const bytes = lsp('{"id":1}') + `content-type: application/vscode-jsonrpc; charset=utf-8\r\nCONTENT-LENGTH: ${Buffer.byteLength(body2)}\r\n\r\n${body2}` + lsp("{}");
    expect(feedAll(bytes)).toEqual([
      ["message", '{"id":1}', "headers"],
      ["message", body2, "headers"],
      ["message", "{}", "headers"],
    ]);
  });

  it("detects the framing per message, so a client may mix both", () => {
    expect(feedAll(`{"l":1}\n${lsp('{"h":2}')}{"l":3}\n${lsp('{"h":4}')}`).map(([, t, f]) => [t, f])).toEqual([
      ['{"l":1}', "lines"],
      ['{"h":2}', "headers"],
      ['{"l":3}', "lines"],
      ['{"h":4}', "headers"],
    ]);
  });

  it("counts Content-Length in bytes, not characters (multi-byte UTF-8 split across chunks)", () => {
    const body = JSON.stringify({ s: "😀é漢".repeat(50) });
    expect(feedAll(lsp(body) + lsp("[]"))).toEqual([
      ["message", body, "headers"],
      ["message", "[]", "headers"],
    ]);
  });

  it("refuses an oversized line or body with an error in its own framing, discards it, and reads on", () => {
    const big = JSON.stringify({ s: "x".repeat(200) });
    const got = feedAll(`${big}\n{"ok":1}\n${lsp(big)}${lsp('{"ok":2}')}`, 100);
    expect(got).toEqual([
      ["error", "Invalid Request: message larger than 100 bytes", "lines"],
      ["message", '{"ok":1}', "lines"],
      ["error", "Invalid Request: message larger than 100 bytes", "headers"],
      ["message", '{"ok":2}', "headers"],
    ]);
  });

  it("reports a header block without a valid Content-Length, or one that never ends", () => {
    expect(feedAll('Content-Length: abc\r\n\r\n{"ok":1}\n')).toEqual([
      ["error", "Invalid Request: LSP header block without a valid Content-Length", "headers"],
      ["message", '{"ok":1}', "lines"],
    ]);
    const { r, got } = reader();
    r.push(Buffer.from(`Content-Type: ${"x".repeat(MAX_HEADER_BYTES)}`));
    expect(got).toEqual([["error", `Invalid Request: LSP header block longer than ${MAX_HEADER_BYTES} bytes`, "headers"]]);
  });

  it("reports a stream that ends inside an LSP body", () => {
    const { r, got } = reader();
    r.push(Buffer.from('Content-Length: 10\r\n\r\n{"a"'));
    r.end();
    expect(got).toEqual([["error", "Invalid Request: stream ended 4 bytes into a 10-byte message", "headers"]]);
  });

  it("a line that merely starts like a header word is still a line", () => {
    expect(feedAll("Cont\n")).toEqual([["message", "Cont", "lines"]]);
  });

  it("frames outgoing messages as JSON lines or with a byte-counted Content-Length", () => {
    expect(frameMessage('{"a":"é"}', "lines")).toBe('{"a":"é"}\n');
    expect(frameMessage('{"a":"é"}', "headers")).toBe('Content-Length: 10\r\n\r\n{"a":"é"}');
  });
});
