/**
 * CPU per streamed delta of the provider adapters alone (issue 16), old build against new: the
 * mock model server (test/support/mock-model-server.ts, the real SSE formats) runs here; each
 * build's adapter runs in a child process of its own that streams S concurrent replies of C text
 * chunks per round and reports its own CPU (process.cpuUsage: user + system) per textDelta it
 * yielded, after a warm-up round. Builds are interleaved, R rounds each.
 *
 *   npx tsx bench/provider-stream-cpu.ts --dist=/tmp/before/dist --dist=/tmp/after/dist \
 *     [--provider=openai|anthropic|openai-chat] [--streams=20] [--chunks=500] [--delay-ms=1] [--rounds=3]
 *
 * --delay-ms=0 sends each reply at once (many events per network read); 1 ms spaces the chunks
 * so most reads carry one event, as from a real model.
 */
import { spawn } from "node:child_process";
import { writeFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { startMockModelServer } from "../test/support/mock-model-server.js";

const args = process.argv.slice(2);
const opt = (n: string, d: string) => args.find((a) => a.startsWith(`--${n}=`))?.slice(n.length + 3) ?? d;
const dists = args.filter((a) => a.startsWith("--dist=")).map((a) => path.resolve(a.slice(7)));
const provider = opt("provider", "openai");
const streams = Number(opt("streams", "20"));
const chunks = Number(opt("chunks", "500"));
const delayMs = Number(opt("delay-ms", "1"));
const rounds = Number(opt("rounds", "3"));
if (dists.length === 0) {
  console.error("usage: npx tsx bench/provider-stream-cpu.ts --dist=DIR [--dist=DIR …] [--provider=openai] [--streams=20] [--chunks=500] [--delay-ms=1] [--rounds=3]");
  process.exit(2);
}

// The child: imports the build's provider factory, streams, reports CPU per delta.
const CHILD = `
const [dist, baseURL, provider, streams] = process.argv.slice(2);
const { createProvider } = await import(dist + "/providers/index.js");
const p = createProvider(provider, { apiKey: "sk-bench", baseURL });
const request = { model: "mock-model", system: "", messages: [{ role: "user", content: [{ type: "text", text: "go" }] }], tools: [] };
async function one() {
  let n = 0;
  for await (const ev of p.stream(request, new AbortController().signal)) if (ev.type === "textDelta") n++;
  return n;
}
const round = async () => (await Promise.all(Array.from({ length: Number(streams) }, one))).reduce((a, b) => a + b, 0);
await round(); // warm-up (loads the SDK, opens connections, JIT)
process.send("warm");
await new Promise((r) => process.once("message", r));
const c0 = process.cpuUsage();
const deltas = await round();
const c = process.cpuUsage(c0);
process.send({ deltas, cpuUs: c.user + c.system });
`;

const mock = await startMockModelServer();
const baseURL = provider === "anthropic" ? mock.anthropicBaseUrl : mock.openaiBaseUrl;
const dir = mkdtempSync(path.join(tmpdir(), "aas-provider-cpu-"));
const childFile = path.join(dir, "child.mjs");
writeFileSync(childFile, CHILD);
const reply = () => ({ text: Array.from({ length: chunks }, (_, i) => `chunk ${i} of a reply that reads like prose, `), chunkDelayMs: delayMs });

function runChild(dist: string): Promise<{ deltas: number; cpuUs: number }> {
  return new Promise((resolve, reject) => {
    mock.enqueue(...Array.from({ length: streams }, reply)); // warm-up round
    const child = spawn(process.execPath, [childFile, dist, baseURL, provider, String(streams)], { stdio: ["ignore", "inherit", "inherit", "ipc"] });
    child.on("message", (m) => {
      if (m === "warm") {
        mock.enqueue(...Array.from({ length: streams }, reply));
        child.send("go");
      } else {
        resolve(m as { deltas: number; cpuUs: number });
        child.kill();
      }
    });
    child.on("exit", (code) => code !== 0 && code !== null && reject(new Error(`child exited ${code}`)));
  });
}

const results = new Map<string, number[]>(dists.map((d) => [d, []]));
try {
  for (let r = 0; r < rounds; r++) {
    for (const d of dists) {
      const res = await runChild(d);
      if (res.deltas !== streams * chunks) throw new Error(`${d}: ${res.deltas} deltas, expected ${streams * chunks}`);
      results.get(d)!.push(res.cpuUs / res.deltas);
    }
  }
} finally {
  await mock.close();
  rmSync(dir, { recursive: true, force: true });
}
console.log(`${provider}: ${streams} streams × ${chunks} chunks, ${delayMs} ms apart; CPU µs per delta of the adapter's process (rounds; median)`);
for (const [d, v] of results) {
  const sorted = [...v].sort((a, b) => a - b);
  console.log(`  ${d}: ${v.map((x) => x.toFixed(1)).join(" ")}  median ${sorted[Math.floor(sorted.length / 2)]!.toFixed(1)}`);
}
