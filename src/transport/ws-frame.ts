/**
 * One WebSocket text frame as a server sends it (RFC 6455 §5.2: FIN, opcode 1, no RSV bits, no
 * mask), header and payload in one buffer. A notification shared by many connections is framed
 * once and the same bytes are written to every socket (issue 33 item 1): ws would build a header
 * per connection and hand the socket two buffers per frame. The bytes are exactly ws's for the
 * same payload (its Sender.frame, server side, without permessage-deflate).
 */

export interface TextFrame {
  /** Header + payload. */
  frame: Buffer;
  /** Where the payload (the UTF-8 text) starts in `frame`. */
  payloadOffset: number;
}

export function textFrame(text: string): TextFrame {
  const length = Buffer.byteLength(text);
  const payloadOffset = length < 126 ? 2 : length < 65_536 ? 4 : 10;
  const frame = Buffer.allocUnsafe(payloadOffset + length);
  frame[0] = 0x81; // FIN + text
  if (payloadOffset === 2) frame[1] = length;
  else if (payloadOffset === 4) {
    frame[1] = 126;
    frame.writeUInt16BE(length, 2);
  } else {
    frame[1] = 127;
    frame.writeUInt32BE(Math.floor(length / 2 ** 32), 2);
    frame.writeUInt32BE(length >>> 0, 6);
  }
  frame.write(text, payloadOffset, "utf8");
  return { frame, payloadOffset };
}
