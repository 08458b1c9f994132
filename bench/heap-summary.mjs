#!/usr/bin/env node
/**
 * `node bench/heap-summary.mjs FILE.heapsnapshot [--top=20]`: what a V8 heap snapshot holds, without
 * DevTools. Prints total self size, self size by node type / constructor name, and the largest
 * single objects with a retainer chain (first retainer, up to 8 hops; weak edges skipped) so that
 * "who keeps this 30 MiB string" has an answer.
 */
import { readFileSync } from "node:fs";

const file = process.argv[2];
if (!file) throw new Error("usage: heap-summary.mjs FILE.heapsnapshot [--top=N]");
const top = Number(process.argv.find((a) => a.startsWith("--top="))?.slice(6) ?? 20);
const snap = JSON.parse(readFileSync(file, "utf8"));
const meta = snap.snapshot.meta;
const nf = meta.node_fields.length;
const ef = meta.edge_fields.length;
const nodeTypes = meta.node_types[0];
const edgeTypes = meta.edge_types[0];
const [N_TYPE, N_NAME, N_ID, N_SELF, N_EDGES] = ["type", "name", "id", "self_size", "edge_count"].map((f) => meta.node_fields.indexOf(f));
const [E_TYPE, E_NAME, E_TO] = ["type", "name_or_index", "to_node"].map((f) => meta.edge_fields.indexOf(f));
const { nodes, edges, strings } = snap;
const count = nodes.length / nf;

// First (non-weak) retainer of every node.
const retainer = new Int32Array(count).fill(-1);
const retainerEdge = new Int32Array(count).fill(-1);
let e = 0;
for (let i = 0; i < count; i++) {
  const n = nodes[i * nf + N_EDGES];
  for (let k = 0; k < n; k++, e += ef) {
    const et = edgeTypes[edges[e + E_TYPE]];
    if (et === "weak" || et === "shortcut") continue;
    const to = edges[e + E_TO] / nf;
    if (retainer[to] === -1) {
      retainer[to] = i;
      retainerEdge[to] = e;
    }
  }
}

const typeOf = (i) => nodeTypes[nodes[i * nf + N_TYPE]];
const nameOf = (i) => {
  const s = strings[nodes[i * nf + N_NAME]];
  return typeOf(i) === "string" || typeOf(i) === "concatenated string" ? JSON.stringify(s.slice(0, 40)) : s;
};
const edgeName = (e) => {
  const et = edgeTypes[edges[e + E_TYPE]];
  const v = edges[e + E_NAME];
  return et === "element" || et === "hidden" ? `[${v}]` : strings[v];
};

let total = 0;
const byKind = new Map();
for (let i = 0; i < count; i++) {
  const size = nodes[i * nf + N_SELF];
  total += size;
  const t = typeOf(i);
  const key = t === "object" || t === "closure" ? `${t} ${strings[nodes[i * nf + N_NAME]]}` : t;
  const cur = byKind.get(key) ?? { size: 0, n: 0 };
  cur.size += size;
  cur.n++;
  byKind.set(key, cur);
}
const mib = (b) => (b / 1048576).toFixed(2);
console.log(`${file}\n  ${count} nodes, self size ${mib(total)} MiB\n\nby type / constructor (top ${top}, MiB, count):`);
for (const [k, v] of [...byKind].sort((a, b) => b[1].size - a[1].size).slice(0, top)) console.log(`  ${mib(v.size).padStart(8)}  ${String(v.n).padStart(8)}  ${k}`);

const order = Array.from({ length: count }, (_, i) => i).sort((a, b) => nodes[b * nf + N_SELF] - nodes[a * nf + N_SELF]);
console.log(`\nlargest objects (top ${Math.min(top, 15)}) and a retainer chain:`);
for (const i of order.slice(0, Math.min(top, 15))) {
  const chain = [];
  let cur = i;
  for (let hop = 0; hop < 8 && retainer[cur] !== -1; hop++) {
    const r = retainer[cur];
    chain.push(`${edgeName(retainerEdge[cur])} ← ${typeOf(r) === "object" || typeOf(r) === "closure" ? strings[nodes[r * nf + N_NAME]] : typeOf(r)}`);
    cur = r;
  }
  console.log(`  ${mib(nodes[i * nf + N_SELF]).padStart(8)} MiB ${typeOf(i)} ${nameOf(i)}\n      ${chain.join(" · ")}`);
}
