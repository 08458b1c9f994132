/** Plain-HTTP views of the WebSocket endpoint, for tests of what is refused before any JSON-RPC. */
import WebSocket from "ws";

/** The HTTP status a WebSocket upgrade is answered with (101 when it is accepted). */
export function upgradeStatus(url: string, headers: Record<string, string> = {}): Promise<number> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers });
    ws.once("open", () => {
      ws.close();
      resolve(101);
    });
    ws.once("unexpected-response", (_req, res) => {
      resolve(res.statusCode ?? 0);
      res.resume();
    });
    ws.once("error", (err) => {
      if (!/Unexpected server response/.test(String(err))) reject(err);
    });
  });
}
