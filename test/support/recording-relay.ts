/**
 * A recording WebSocket relay: a client (the real `codex` binary) connects to the relay, which
 * opens one upstream connection per client to the server under test and forwards every frame both
 * ways, keeping a log. Conformance tests read the log to check that no request was answered
 * -32601/-32602 and that every server message validates against Codex's JSON Schema.
 *
 * The relay forwards the Authorization header so the server's token check still applies.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import WebSocket, { WebSocketServer } from "ws";

export interface RecordedFrame {
  /** Which connection through the relay (1-based, in accept order). */
  conn: number;
  dir: "client→server" | "server→client";
  /** Parsed JSON, or the raw text when it did not parse. */
  frame: any;
}

export interface RecordingRelay {
  /** ws://127.0.0.1:PORT */
  url: string;
  frames: RecordedFrame[];
  /** Requests the client sent, each with the response the server gave (undefined while pending). */
  exchanges(): Array<{ conn: number; request: any; response: any }>;
  close(): Promise<void>;
}

export async function startRecordingRelay(upstreamUrl: string): Promise<RecordingRelay> {
  const frames: RecordedFrame[] = [];
  const http_ = http.createServer((_req, res) => res.writeHead(404).end());
  const wss = new WebSocketServer({ server: http_, perMessageDeflate: false });
  const sockets = new Set<WebSocket>();
  let conns = 0;

  wss.on("connection", (client, req) => {
    const conn = ++conns;
    const headers: Record<string, string> = {};
    if (req.headers.authorization) headers.authorization = req.headers.authorization;
    const upstream = new WebSocket(upstreamUrl, { headers, perMessageDeflate: false });
    sockets.add(client).add(upstream);
    const queued: WebSocket.RawData[] = [];
    const record = (dir: RecordedFrame["dir"], data: WebSocket.RawData) => {
      const text = data.toString();
      let frame: any = text;
      try {
        frame = JSON.parse(text);
      } catch {
        /* keep the raw text */
      }
      frames.push({ conn, dir, frame });
    };
    client.on("message", (data) => {
      record("client→server", data);
      if (upstream.readyState === WebSocket.OPEN) upstream.send(data.toString());
      else queued.push(data);
    });
    upstream.on("open", () => {
      for (const d of queued.splice(0)) upstream.send(d.toString());
    });
    upstream.on("message", (data) => {
      record("server→client", data);
      if (client.readyState === WebSocket.OPEN) client.send(data.toString());
    });
    // Mirror closes both ways (1005/1006 cannot be sent, so they become a plain close).
    const closeOther = (other: WebSocket, code: number) => {
      if (other.readyState === WebSocket.OPEN || other.readyState === WebSocket.CONNECTING)
        code === 1005 || code === 1006 ? other.close() : other.close(code);
    };
    client.on("close", (code) => closeOther(upstream, code));
    upstream.on("close", (code) => closeOther(client, code));
    client.on("error", () => upstream.terminate());
    upstream.on("error", () => client.terminate());
  });

  await new Promise<void>((resolve) => http_.listen(0, "127.0.0.1", resolve));
  const port = (http_.address() as AddressInfo).port;

  return {
    url: `ws://127.0.0.1:${port}`,
    frames,
    exchanges() {
      const out: Array<{ conn: number; request: any; response: any }> = [];
      for (const f of frames) {
        if (f.dir !== "client→server" || typeof f.frame !== "object" || !f.frame.method || f.frame.id === undefined) continue;
        const response = frames.find(
          (r) => r.conn === f.conn && r.dir === "server→client" && r.frame?.id === f.frame.id && !r.frame.method,
        )?.frame;
        out.push({ conn: f.conn, request: f.frame, response });
      }
      return out;
    },
    async close() {
      for (const s of sockets) s.terminate();
      await new Promise<void>((resolve) => wss.close(() => resolve()));
      await new Promise<void>((resolve) => http_.close(() => resolve()));
    },
  };
}
