// Where start-up time goes, step by step, in one plain `node` process (no tsx): the same modules
// and calls as `app-server serve` (dist/), timed with performance.now() (0 = process start).
// Usage: node bench/startup-breakdown.mjs DATABASE_URL [APP_ROOT]   → one JSON line of step → ms.
const root = process.argv[3] ? new URL(`file://${process.argv[3].replace(/\/?$/, "/")}`) : new URL("../", import.meta.url);
const dist = new URL("dist/", root);
const steps = {};
let last = performance.now();
steps["node boot → first user code"] = last;
const mark = (name) => {
  const now = performance.now();
  steps[name] = now - last;
  last = now;
};
const { createLogger } = await import(new URL("log.js", dist).href);
mark("import pino (dist/log.js)");
await import(new URL("node_modules/zod/index.js", root).href);
mark("import zod");
await import(new URL("protocol/methods.js", dist).href);
mark("import protocol schemas (zod objects)");
const { startWebSocketTransport } = await import(new URL("transport/websocket.js", dist).href);
mark("import fastify + @fastify/websocket + ws");
const { openDatabase } = await import(new URL("store/database.js", dist).href);
mark("import postgres.js + store");
await import(new URL("cli.js", dist).href);
mark("import rest of the CLI (rpc, runtime, json-schema)");
const log = createLogger("warn");
const ws = await startWebSocketTransport({
  host: "127.0.0.1",
  port: 0,
  maxFrameBytes: 1 << 20,
  log,
  isReady: () => true,
  accept: () => ({ receive() {}, closed() {} }),
  // The transport asks who a client is (src/identity/admission.ts); nobody connects here.
  admission: { tokenRequired: false, admit: async () => ({ principal: null }) },
});
mark("Fastify() + register websocket + listen");
const db = await openDatabase({ databaseUrl: process.argv[2] });
mark("openDatabase: connect, select 1, migrations check");
steps["total (process start → ready)"] = performance.now();
process.stdout.write(JSON.stringify(steps) + "\n");
await db.close();
await ws.close();
