// Where start-up time goes, step by step, in one plain `node` process (no tsx): the same modules
// and calls as `app-server serve` (dist/), timed with performance.now() (0 = process start).
// Usage: node bench/startup-breakdown.mjs DATABASE_URL [APP_ROOT]   → one JSON line of step → ms.
// Like bin/app-server.js, it turns on Node's compile cache first (Node ≥ 22.1; nothing on Node 20).
// After "total", the parts a plain `serve` on Postgres loads only on first use (issue 33 item 3),
// each timed on its own: what the first MCP server start, model call or PGlite home costs once.
const root = process.argv[3] ? new URL(`file://${process.argv[3].replace(/\/?$/, "/")}`) : new URL("../", import.meta.url);
const dist = new URL("dist/", root);
const steps = {};
let last = performance.now();
steps["node boot → first user code"] = last;
const compileCache = await import(new URL("bin/compile-cache.js", root).href).catch(() => null); // absent before issue 33
compileCache?.enableCompileCache();
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
last = performance.now();
const lazy = [
  ["MCP SDK", "node_modules/@modelcontextprotocol/sdk/dist/esm/client/index.js"],
  ["openai SDK", "node_modules/openai/index.mjs"],
  ["@anthropic-ai/sdk", "node_modules/@anthropic-ai/sdk/index.mjs"],
  ["PGlite", "node_modules/@electric-sql/pglite/dist/index.js"],
];
for (const [name, file] of lazy) {
  await import(new URL(file, root).href);
  mark(`on first use, after ready: import ${name}`);
}
process.stdout.write(JSON.stringify(steps) + "\n");
await db.close();
await ws.close();
