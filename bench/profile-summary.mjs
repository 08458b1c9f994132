#!/usr/bin/env node
/**
 * Summarises a V8 .cpuprofile (`node --cpu-prof`, or `npm run bench -- --cpu-prof=DIR`): where
 * the samples fall, by file, by function (self) and by function (inclusive).
 *
 *   node bench/profile-summary.mjs FILE.cpuprofile [--top=40] [--from=US --to=US]
 *
 * --from/--to restrict to a window in the profile's clock (microseconds of the monotonic clock,
 * i.e. process.hrtime.bigint() / 1000n of any process on the machine), e.g. one benchmark round.
 * Samples are counted, not weighted by the time since the previous sample: on a shared machine a
 * descheduled process makes single gaps huge, which would blame whatever ran next.
 */
import { readFileSync } from "node:fs";

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

const prof = JSON.parse(readFileSync(file, "utf8"));
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
const short = (url) => url.replace(/^.*node_modules\//, "nm/").replace(/^file:\/\/.*?\/(dist|src)\//, "$1/");
const key = (n) => `${n.callFrame.functionName || "(anonymous)"}  ${short(n.callFrame.url)}${n.callFrame.url ? `:${n.callFrame.lineNumber + 1}` : ""}`;
const fileOf = (n) => {
  const u = short(n.callFrame.url);
  if (!u) return n.callFrame.functionName; // (idle), (garbage collector), natives
  return u.startsWith("nm/") ? u.split("/").slice(0, u.startsWith("nm/@") ? 3 : 2).join("/") : u.split("/").slice(0, 2).join("/");
};

const self = new Map();
const byFile = new Map();
const incl = new Map();
for (const [id, count] of hits) {
  const n = nodes.get(id);
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
show("by file (self)", byFile, 25);
show("by function (self)", self, top);
show("by function (inclusive)", incl, top);
