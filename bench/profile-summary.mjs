#!/usr/bin/env node
/**
 * Summarises a V8 .cpuprofile (`node --cpu-prof`, or `npm run bench -- --cpu-prof=DIR`): where
 * the samples fall, by file, by function (self) and by function (inclusive).
 *
 *   node bench/profile-summary.mjs FILE.cpuprofile [--top=40] [--from=US --to=US] [--maps=DIR] [--per=N] [--bucket-detail=N]
 *
 * --from/--to restrict to a window in the profile's clock (microseconds of the monotonic clock,
 * i.e. process.hrtime.bigint() / 1000n of any process on the machine), e.g. one benchmark round.
 * Samples are counted, not weighted by the time since the previous sample: on a shared machine a
 * descheduled process makes single gaps huge, which would blame whatever ran next.
 *
 * The server runs as an esbuild bundle (dist/bundle, chunks with source maps): frames are mapped
 * back to their original files (src/…, nm/postgres/…) through the `.map` next to each chunk, or
 * the one of the same name in --maps=DIR (the temp build of a `--ref` run is deleted afterwards;
 * rebuilding that commit gives the same chunk names). "Buckets" is the flame summary: each sample
 * goes to the first frame, from the leaf up, that belongs to a component (ws, postgres.js, the
 * provider's HTTP body, …); natives and node internals in between (writev, JSON.stringify,
 * node:events) count for the component that called them; --bucket-detail=N lists the top N
 * functions of each large bucket. --per=N also prints busy (non-idle) microseconds per unit, e.g.
 * per delta of a round.
 */
import { existsSync, readFileSync } from "node:fs";
import { SourceMap } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

const args = process.argv.slice(2);
const file = args.find((a) => !a.startsWith("--"));
const opt = (n, d) => Number(args.find((a) => a.startsWith(`--${n}=`))?.slice(n.length + 3) ?? d);
if (!file) {
  console.error("usage: node bench/profile-summary.mjs FILE.cpuprofile [--top=40] [--from=US --to=US]");
  process.exit(2);
}
const top = opt("top", 40);
const from = opt("from", -Infinity);
const to = opt("to", Infinity);

const mapsDir = args.find((a) => a.startsWith("--maps="))?.slice(7);
const per = opt("per", 0);

const prof = JSON.parse(readFileSync(file, "utf8"));

// ---- source maps: bundle chunk frames → original file and line ----
const maps = new Map();
const mapOf = (url) => {
  if (!url.startsWith("file://") || !url.endsWith(".js")) return null;
  if (maps.has(url)) return maps.get(url);
  let map = null;
  const js = fileURLToPath(url);
  for (const candidate of [`${js}.map`, mapsDir ? path.join(mapsDir, `${path.basename(js)}.map`) : null]) {
    if (!candidate || !existsSync(candidate)) continue;
    try {
      map = { map: new SourceMap(JSON.parse(readFileSync(candidate, "utf8"))), dir: path.dirname(js) };
      break;
    } catch {
      // unreadable map: keep the bundle position
    }
  }
  maps.set(url, map);
  return map;
};
const original = (source) =>
  source.includes("node_modules/") ? source.replace(/^.*node_modules\//, "nm/") : source.replace(/^(?:.*\/)?(src|dist|bench|test)\//, "$1/");
for (const n of prof.nodes) {
  const cf = n.callFrame;
  const m = mapOf(cf.url);
  if (!m) continue;
  const e = m.map.findEntry(cf.lineNumber, cf.columnNumber);
  if (!e || !e.originalSource) continue;
  cf.url = `mapped:${original(e.originalSource)}`;
  cf.lineNumber = e.originalLine;
}

const nodes = new Map(prof.nodes.map((n) => [n.id, n]));
const parent = new Map();
for (const n of prof.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

const hits = new Map();
let ts = prof.startTime;
let total = 0;
for (let i = 0; i < prof.samples.length; i++) {
  ts += prof.timeDeltas[i] ?? 0;
  if (ts < from || ts > to) continue;
  hits.set(prof.samples[i], (hits.get(prof.samples[i]) ?? 0) + 1);
  total++;
}
const short = (url) => url.replace(/^mapped:/, "").replace(/^.*node_modules\//, "nm/").replace(/^file:\/\/.*?\/(dist|src)\//, "$1/");
const key = (n) => `${n.callFrame.functionName || "(anonymous)"}  ${short(n.callFrame.url)}${n.callFrame.url ? `:${n.callFrame.lineNumber + 1}` : ""}`;
const fileOf = (n) => {
  const u = short(n.callFrame.url);
  if (!u) return n.callFrame.functionName; // (idle), (garbage collector), natives
  return u.startsWith("nm/") ? u.split("/").slice(0, u.startsWith("nm/@") ? 3 : 2).join("/") : u.split("/").slice(0, 2).join("/");
};

/** The component a frame belongs to, or null for natives / node internals (charged to their caller). */
const componentOf = (n) => {
  const u = short(n.callFrame.url);
  if (!u) return null;
  if (/^node:(net|internal\/streams|internal\/stream_base_commons|internal\/net|internal\/dgram)/.test(u)) return "socket I/O (node:net, streams; writev/read natives)";
  if (/^node:internal\/(deps\/undici|webstreams|encoding)/.test(u)) return "fetch body (undici, web streams, TextDecoder)";
  if (u.startsWith("node:")) return null;
  if (u.startsWith("nm/ws/")) return "ws (WebSocket frames)";
  if (u.startsWith("nm/postgres/")) return "postgres.js";
  if (/^nm\/(openai|@anthropic-ai|eventsource-parser)\//.test(u) || u.startsWith("src/providers/")) return "provider SDK / SSE parsing (+ src/providers)";
  if (/^nm\/(fastify|@fastify|avvio|find-my-way|light-my-request)/.test(u)) return "fastify";
  if (u.startsWith("nm/")) return u.split("/").slice(0, u.startsWith("nm/@") ? 3 : 2).join("/");
  const m = /^(src|dist)\/([^/]+)(\/|$)/.exec(u);
  if (m) return `src/${m[2].replace(/\.(js|ts)$/, "")}`;
  return u;
};
const bucketOf = (leafId) => {
  const leaf = nodes.get(leafId);
  const name = leaf.callFrame.functionName;
  if (!leaf.callFrame.url && /^\((garbage collector|idle|program)\)$/.test(name)) return name;
  for (let cur = leafId; cur !== undefined; cur = parent.get(cur)) {
    const c = componentOf(nodes.get(cur));
    if (c) return c;
  }
  return "node (other: timers, microtasks, events)";
};

const self = new Map();
const byFile = new Map();
const incl = new Map();
const buckets = new Map();
const bucketFns = new Map();
for (const [id, count] of hits) {
  const n = nodes.get(id);
  const b = bucketOf(id);
  buckets.set(b, (buckets.get(b) ?? 0) + count);
  // Within a bucket: the frame that owns the sample (the first with a source, from the leaf up).
  let owner = id;
  while (!nodes.get(owner).callFrame.url && parent.get(owner) !== undefined) owner = parent.get(owner);
  const fns = bucketFns.get(b) ?? new Map();
  const fk = key(nodes.get(owner)) + (owner === id ? "" : `  ← ${n.callFrame.functionName}`);
  fns.set(fk, (fns.get(fk) ?? 0) + count);
  bucketFns.set(b, fns);
  self.set(key(n), (self.get(key(n)) ?? 0) + count);
  byFile.set(fileOf(n), (byFile.get(fileOf(n)) ?? 0) + count);
  const seen = new Set();
  for (let cur = id; cur !== undefined; cur = parent.get(cur)) {
    const k = key(nodes.get(cur));
    if (seen.has(k)) continue;
    seen.add(k);
    incl.set(k, (incl.get(k) ?? 0) + count);
  }
}
const interval = prof.samples.length > 1 ? (prof.endTime - prof.startTime) / prof.samples.length / 1000 : 1;
const show = (title, m, n) => {
  console.log(`\n${title}`);
  for (const [k, v] of [...m].sort((a, b) => b[1] - a[1]).slice(0, n))
    console.log(`${String(v).padStart(7)} ${((100 * v) / total).toFixed(1).padStart(5)}%  ${k}`);
};
console.log(`${total} samples (~${interval.toFixed(2)} ms apart on average) in ${file}`);
if (per > 0) {
  // The window's wall time spread over its samples (a descheduled process still gets samples, so
  // on a busy machine this overstates CPU: /proc utime + stime is the authority).
  const windowMs = Number.isFinite(from) && Number.isFinite(to) ? (to - from) / 1000 : total * interval;
  const busy = total - (buckets.get("(idle)") ?? 0);
  console.log(`busy ${((100 * busy) / total).toFixed(1)}% of ${windowMs.toFixed(0)} ms = ${((busy / total) * windowMs).toFixed(0)} ms; per unit (${per}): ${(((busy / total) * windowMs * 1000) / per).toFixed(1)} µs`);
}
show("buckets (flame summary: self time by component, natives charged to their caller)", buckets, 20);
const detail = opt("bucket-detail", 0);
if (detail > 0)
  for (const [b] of [...buckets].sort((x, y) => y[1] - x[1]).slice(0, 8)) if (bucketFns.has(b) && !b.startsWith("(")) show(`  in ${b}`, bucketFns.get(b), detail);
show("by file (self)", byFile, 25);
show("by function (self)", self, top);
show("by function (inclusive)", incl, top);
