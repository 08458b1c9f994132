/** `npx tsx bench/peer-uid-cost.ts`: what the loopback same-user check (src/transport/auth.ts peerUid: /proc/net/tcp{,6}) costs per connection, with few and with 1 000 other open connections. */
import net from "node:net";
import { performance } from "node:perf_hooks";
import { peerUid } from "../src/transport/auth.js";
const server = net.createServer(); await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
const port = (server.address() as net.AddressInfo).port;
const accepted: net.Socket[] = []; server.on("connection", (s) => accepted.push(s));
const clients: net.Socket[] = [];
for (const n of [0, 1000]) {
  while (clients.length < n) { clients.push(net.connect(port, "127.0.0.1")); if (clients.length % 100 === 0) await new Promise((r) => setTimeout(r, 50)); }
  await new Promise((r) => setTimeout(r, 300));
  const c = net.connect(port, "127.0.0.1"); await new Promise((r) => c.once("connect", r)); await new Promise((r) => setTimeout(r, 50));
  const sock = accepted.at(-1)!;
  const t: number[] = [];
  for (let i = 0; i < 200; i++) { const s = performance.now(); const uid = await peerUid(sock); t.push(performance.now() - s); if (uid !== process.getuid!()) throw new Error("uid " + uid); }
  t.sort((a, b) => a - b);
  const lines = (await import("node:fs")).readFileSync("/proc/net/tcp", "utf8").split("\n").length;
  console.log(`${n} other connections (${lines} lines in /proc/net/tcp): median ${t[100].toFixed(2)} ms, p95 ${t[190].toFixed(2)} ms`);
  c.destroy();
}
process.exit(0);
