/**
 * A seeded chaos run of a cluster (issue 31, item 7), shared by test/cluster-chaos.e2e.test.ts (one
 * short seed, in CI) and bench/cluster-chaos.ts (longer seeds). Loopback only: several real
 * `app-server serve` processes on one Postgres, each through its own TcpProxy; one logical client
 * per process (a connection that is replaced, and resumes every thread by `afterSeq`, when its
 * process dies or the client is dropped); threads over the three providers. Each round starts one
 * turn per thread (a shell command that appends its job's token to a shared file, then an answer),
 * and the seed picks one fault for it: none, one process's database link cut for 1.5–4.5 s, a
 * kill -9 of one process followed by a restart, a client dropped and reconnected, or one process
 * frozen (SIGSTOP) for 1.5–4.5 s and then let go on.
 *
 * A process that dies by itself (as postgres.js 3.4.9 made one whose link was cut mid-transaction,
 * before patches/postgres+3.4.9.patch) is a violation ("exited by itself").
 *
 * At the end the invariants are read from the database and from every client's record:
 *   - every turn ended, with exactly one stored turn/completed, of the stored status;
 *   - every command ran at most once, and each command stored as succeeded did run;
 *   - every notification a client received (deltas and the outage notice aside) is stored, under
 *     the same seq, and none reached a logical client twice;
 *   - every logical client saw every stored ending of every thread (it followed them all).
 * A violation is a string in `violations`; the run itself never throws for one.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import postgres from "postgres";
import { TestClient, type Frame } from "./client.js";
import { Cluster, type Node } from "./cluster.js";
import { isDelta } from "./durability.js";
import type { MockModelServer, MockStep, RecordedRequest } from "./mock-model-server.js";
import { TcpProxy } from "./tcp-proxy.js";

export interface ChaosOptions {
  seed: number;
  processes: number;
  threads: number;
  rounds: number;
  /** A fresh database (the run leaves its rows there for the caller to drop). */
  databaseUrl: string;
  mock: MockModelServer;
  leaseTtlMs?: number;
  /** The faults to draw from (default all). */
  faults?: ReadonlyArray<ChaosFault>;
  log?: (line: string) => void;
}

export type ChaosFault = "none" | "cut" | "kill" | "client" | "freeze" | "slow";
/**
 * What CI's seed and the bench draw from; on request (--faults): "freeze" (SIGSTOP past the TTL,
 * then SIGCONT) and "slow" (every byte of one process's database link delayed 50–250 ms each way
 * for as long as a cut lasts: a congested or distant database).
 */
export const ALL_FAULTS: ReadonlyArray<ChaosFault> = ["none", "cut", "cut", "kill", "client"];

export interface ChaosReport {
  turns: number;
  faults: string[];
  violations: string[];
  /** A turn's stored start → its stored end, per turn (ms). */
  turnMs: number[];
  /** Commands the store shows as completed, and the lines they left. */
  commands: { stored: number; ran: number };
  /** Requests that got no answer in 15 s (given up on and tried again). */
  unanswered: string[];
  /** Stored turns by status, and the errors of the failed ones. */
  endings: Record<string, number>;
  errors: string[];
}

/** mulberry32: small, seedable, good enough to pick faults. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const PROVIDERS = ["openai", "anthropic", "openai-chat"] as const;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/**
 * A request to a process that went away (or cannot answer) is given up on and tried elsewhere:
 * at once when its connection closes (a killed process answers nothing), else after `ms`.
 */
function bounded<T>(p: Promise<T>, what: string, unanswered: string[], conn?: TestClient, ms = 15_000): Promise<T> {
  let timer: NodeJS.Timeout;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => {
    unanswered.push(what); // reported: a request no process answered
    reject(new Error(`${what}: no answer in ${ms} ms`));
  }, ms)));
  const closed = conn ? conn.closed.then((): never => { throw new Error(`${what}: the connection closed`); }) : null;
  return Promise.race(closed ? [p, late, closed] : [p, late]).finally(() => clearTimeout(timer));
}

/**
 * The mock's reply from the request alone (turns run concurrently, on any process): the newest
 * job token asked for; a command for it until its output is in the conversation, then an answer.
 */
export function chaosReply(request: RecordedRequest, jobsFile: string): MockStep | undefined {
  const jobs = [...request.rawBody.matchAll(/please run job (J\d+)/g)];
  const job = jobs[jobs.length - 1]?.[1];
  if (!job) return undefined;
  if (request.rawBody.includes(`ok-${job}`)) return { text: ["finished ", "job ", job], chunkDelayMs: 60 };
  const command = `sleep 0.2; printf 'ok-%s\\n' ${job} >> ${jobsFile}; printf 'ok-%s\\n' ${job}`;
  return { toolCalls: [{ name: "shell", arguments: { command } }] };
}

/** One client identity across its connections: what it received over all of them. */
class LogicalClient {
  readonly frames: Frame[] = [];
  /** Every resume it sent, for the violations' messages. */
  readonly resumes: Array<{ threadId: string; afterSeq: number; connection: number }> = [];
  /** Which of its connections (1, 2, …) brought a frame. */
  readonly connectionOf = new WeakMap<Frame, number>();
  private connections = 0;
  conn: TestClient | null = null;
  private recorded = 0;
  constructor(
    public slot: number,
    /** Where its requests that got no answer are reported. */
    private readonly unanswered: string[],
  ) {}

  /** Connects (to `url`) and follows every thread from where its record ends. */
  async attach(url: string, threadIds: string[]): Promise<void> {
    this.flush();
    const c = await bounded(TestClient.initialized(url), "connect", this.unanswered);
    this.conn = c;
    this.recorded = 0;
    this.connections++;
    for (const threadId of threadIds) {
      const afterSeq = this.lastSeq(threadId);
      this.resumes.push({ threadId, afterSeq, connection: this.connections });
      await bounded(c.request("thread/resume", { threadId, afterSeq, excludeTurns: true }), "thread/resume", this.unanswered, c);
    }
  }

  /** Copies what the current connection received into the record. */
  flush(): void {
    if (!this.conn) return;
    const all = this.conn.notifications();
    for (const f of all.slice(this.recorded)) this.connectionOf.set(f, this.connections);
    this.frames.push(...all.slice(this.recorded));
    this.recorded = all.length;
  }

  async drop(): Promise<void> {
    const c = this.conn;
    if (!c) return;
    this.flush();
    this.conn = null;
    await c.close().catch(() => {});
  }

  lastSeq(threadId: string): number {
    let max = 0;
    for (const f of this.frames) if (f.params?.threadId === threadId && typeof f.params.seq === "number" && f.params.seq > max) max = f.params.seq;
    return max;
  }
}

export async function runChaos(opts: ChaosOptions): Promise<ChaosReport> {
  // Two streams: the faults come from the seed alone; which client a turn/start goes through
  // (retries included, as many as timing makes) draws from its own, so a seed's faults are the
  // same in every run.
  const random = rng(opts.seed);
  const clientRandom = rng(opts.seed ^ 0x5bd1e995);
  const pick = <T>(xs: readonly T[], from = random): T => xs[Math.floor(from() * xs.length)]!;
  const log = opts.log ?? (() => {});
  const ttl = opts.leaseTtlMs ?? 1500;
  const pg = new URL(opts.databaseUrl);
  const workspace = mkdtempSync(path.join(os.tmpdir(), "aas-chaos-"));
  const jobsFile = path.join(workspace, "jobs.log");
  opts.mock.respond = (r) => chaosReply(r, jobsFile);
  const sql = postgres(opts.databaseUrl, { max: 2, onnotice: () => {} });
  const proxies: TcpProxy[] = [];
  const clusters: Cluster[] = [];
  const nodes: Array<Node | null> = [];
  const clients: LogicalClient[] = [];
  const report: ChaosReport = { turns: 0, faults: [], violations: [], turnMs: [], commands: { stored: 0, ran: 0 }, endings: {}, errors: [], unanswered: [] };
  const threadIds: string[] = [];
  const env = { APP_SERVER_LEASE_TTL_MS: String(ttl), APP_SERVER_SWEEP_INTERVAL_MS: "250", APP_SERVER_RECORD_RETRY_MS: "250" };
  try {
    for (let i = 0; i < opts.processes; i++) {
      const proxy = await TcpProxy.start({ host: pg.hostname, port: Number(pg.port || 5432) });
      proxies.push(proxy);
      const cluster = new Cluster(proxy.urlFor(opts.databaseUrl), opts.mock, env);
      clusters.push(cluster);
      nodes.push(await cluster.spawn());
      clients.push(new LogicalClient(i, report.unanswered));
    }
    const first = await TestClient.initialized(nodes[0]!.url);
    for (let t = 0; t < opts.threads; t++) {
      const started = await first.request("thread/start", { cwd: workspace, approvalPolicy: "never", sandbox: "workspace-write", modelProvider: PROVIDERS[t % PROVIDERS.length] });
      threadIds.push(started.thread.id);
    }
    await first.close();
    for (const c of clients) await c.attach(nodes[c.slot]!.url, threadIds);

    /** A live process's URL for a client of `slot` (its own when it runs). */
    const urlFor = (slot: number) => (nodes[slot] ?? nodes.find((n) => n !== null))!.url;
    const reattach = async (c: LogicalClient) => {
      for (let attempt = 0; ; attempt++) {
        try {
          return await c.attach(urlFor(c.slot), threadIds);
        } catch (err) {
          await c.drop();
          if (attempt >= 100) throw err;
          await sleep(200); // the process is restarting, or its database link is down
        }
      }
    };

    let job = 0;
    const startedAt = new Map<string, number>();
    for (let round = 0; round < opts.rounds; round++) {
      const turnIds = new Set<string>(); // a retried turn/start (same clientUserMessageId) gives the same turn
      // One turn per thread, through a random client: a refusal (the thread's last ending not
      // recorded yet, the database away, a process gone) is retried through another.
      const starts = threadIds.map(async (threadId) => {
        const token = `J${++job}`;
        for (let attempt = 0; attempt < 200; attempt++) {
          const c = pick(clients, clientRandom);
          try {
            if (!c.conn) throw new Error("not connected");
            const { turn } = await bounded(c.conn.request("turn/start", { threadId, input: [{ type: "text", text: `please run job ${token}`, text_elements: [] }], clientUserMessageId: token }), "turn/start", report.unanswered, c.conn);
            startedAt.set(turn.id, performance.now());
            turnIds.add(turn.id);
            return;
          } catch {
            await sleep(100);
          }
        }
        report.violations.push(`round ${round}: no process took the turn of ${token}`);
      });
      const fault = pick(opts.faults ?? ALL_FAULTS);
      const victim = Math.floor(random() * opts.processes);
      const faultAfter = Math.floor(random() * 400);
      const cutFor = ttl + Math.floor(random() * 3000);
      const faulted = (async () => {
        await sleep(faultAfter);
        log(`round ${round}: ${fault} ${victim}`);
        if (fault === "cut") {
          report.faults.push(`round ${round}: database link of process ${victim} cut for ${cutFor} ms`);
          proxies[victim]!.cut();
          await sleep(cutFor);
          proxies[victim]!.restore();
        } else if (fault === "slow") {
          const delayMs = 50 + Math.floor(random() * 200);
          report.faults.push(`round ${round}: database link of process ${victim} slowed by ${delayMs} ms each way for ${cutFor} ms`);
          proxies[victim]!.slow(delayMs);
          await sleep(cutFor);
          proxies[victim]!.slow(0);
        } else if (fault === "freeze") {
          report.faults.push(`round ${round}: process ${victim} frozen (SIGSTOP) for ${cutFor} ms`);
          const node = nodes[victim]!;
          node.proc.child.kill("SIGSTOP");
          await sleep(cutFor);
          node.proc.child.kill("SIGCONT");
        } else if (fault === "kill") {
          report.faults.push(`round ${round}: process ${victim} killed (-9) and restarted`);
          const node = nodes[victim]!;
          nodes[victim] = null;
          node.proc.child.kill("SIGKILL");
          await node.proc.exited;
          for (const c of clients.filter((c) => c.slot === victim)) await c.drop();
          nodes[victim] = await clusters[victim]!.spawn();
          log(`round ${round}: process ${victim} restarted`);
          for (const c of clients.filter((c) => c.slot === victim)) await reattach(c);
        } else if (fault === "client") {
          report.faults.push(`round ${round}: client ${victim} dropped and reconnected`);
          const c = clients[victim]!;
          await c.drop();
          await reattach(c);
        } else report.faults.push(`round ${round}: no fault`);
      })();
      await Promise.all([starts, faulted].flat());
      // Progress: every turn of the round ends (bounded by polls, not by a clock).
      for (let poll = 0; ; poll++) {
        const rows = turnIds.size
          ? await sql<{ id: string; status: string; ms: number | null }[]>`select id, status, completed_at_ms - started_at_ms as ms from turns where id in ${sql([...turnIds])}`
          : [];
        const open = rows.filter((r) => r.status === "inProgress");
        // The stored times: this loop starts only after the round's fault is over (a restart, a
        // reconnect), later than many turns ended.
        for (const r of rows) if (r.status !== "inProgress" && startedAt.has(r.id) && r.ms !== null) {
          report.turnMs.push(Number(r.ms));
          startedAt.delete(r.id);
        }
        if (open.length === 0 && rows.length === turnIds.size) break;
        if (poll >= 1200) {
          report.violations.push(`round ${round}: turns never ended: ${open.map((r) => r.id).join(", ")}`);
          break;
        }
        await sleep(100);
      }
      report.turns += turnIds.size;
      log(`${report.faults.at(-1)}; ${turnIds.size} turns ended`);
    }

    // Quiet: every client has caught up with the log of every thread.
    const stored = new Map<string, Array<{ seq: number; method: string; params: any }>>();
    for (const threadId of threadIds) {
      stored.set(threadId, (await sql<{ seq: string; method: string; params: any }[]>`select seq, method, params from thread_events where thread_id = ${threadId} order by seq`).map((r) => ({ seq: Number(r.seq), method: r.method, params: r.params })));
    }
    for (const c of clients) {
      for (let poll = 0; ; poll++) {
        c.flush();
        const behind = threadIds.filter((t) => c.lastSeq(t) < stored.get(t)!.at(-1)!.seq);
        if (behind.length === 0) break;
        if (poll >= 300) {
          report.violations.push(`client ${c.slot} (connected to ${c.conn ? "a process" : "nothing"}) never caught up: ${behind.map((t) => `${t} at ${c.lastSeq(t)} of ${stored.get(t)!.at(-1)!.seq}`).join(", ")}`);
          break;
        }
        await sleep(100);
      }
    }
    // No process died but the ones the run killed (and restarted).
    for (const [i, n] of nodes.entries()) if (n && n.proc.child.exitCode !== null) report.violations.push(`process ${i} exited by itself (code ${n.proc.child.exitCode}): ${n.proc.stderrLines.slice(-3).join(" / ")}`);
    const turns = await sql<{ id: string; status: string; error: string | null }[]>`select id, status, error->>'message' as error from turns`;
    for (const t of turns) {
      report.endings[t.status] = (report.endings[t.status] ?? 0) + 1;
      if (t.error) report.errors.push(t.error);
    }
    checkInvariants(report, threadIds, stored, clients, turns, readJobs(jobsFile), await commandItems(sql));
    if (process.env.CHAOS_DEBUG && report.violations.length)
      for (const [i, n] of nodes.entries()) if (n) writeFileSync(`/tmp/chaos-node${i}.log`, [...n.proc.stdoutLines, ...n.proc.stderrLines].join("\n"));
  } finally {
    opts.mock.respond = undefined;
    for (const c of clients) await c.drop();
    for (const cluster of clusters) await cluster.close();
    for (const proxy of proxies) await proxy.close();
    await sql.end();
    rmSync(workspace, { recursive: true, force: true });
  }
  return report;
}

function readJobs(file: string): string[] {
  try {
    return readFileSync(file, "utf8").split("\n").filter(Boolean);
  } catch {
    return [];
  }
}

async function commandItems(sql: postgres.Sql): Promise<Array<{ status: string; command: string }>> {
  return sql<{ status: string; command: string }[]>`select status, payload->>'command' as command from items where type = 'commandExecution'`;
}

function checkInvariants(
  report: ChaosReport,
  threadIds: string[],
  stored: Map<string, Array<{ seq: number; method: string; params: any }>>,
  clients: LogicalClient[],
  turns: Array<{ id: string; status: string }>,
  jobLines: string[],
  commands: Array<{ status: string; command: string }>,
): void {
  const v = report.violations;
  const endings = new Map<string, Array<{ status: string }>>();
  for (const events of stored.values())
    for (const e of events) if (e.method === "turn/completed") endings.set(e.params.turn.id, [...(endings.get(e.params.turn.id) ?? []), { status: e.params.turn.status }]);
  for (const t of turns) {
    const ends = endings.get(t.id) ?? [];
    if (t.status === "inProgress") v.push(`turn ${t.id} is still in progress`);
    if (ends.length !== 1) v.push(`turn ${t.id} has ${ends.length} stored endings`);
    else if (ends[0]!.status !== t.status) v.push(`turn ${t.id}: stored ending ${ends[0]!.status}, row ${t.status}`);
  }
  // Commands: at most once each; one stored as succeeded did run.
  const counts = new Map<string, number>();
  for (const line of jobLines) counts.set(line, (counts.get(line) ?? 0) + 1);
  for (const [line, n] of counts) if (n > 1) v.push(`command of ${line} ran ${n} times`);
  const completed = commands.filter((c) => c.status === "completed");
  report.commands = { stored: completed.length, ran: jobLines.length };
  for (const c of completed) {
    const job = /(J\d+)/.exec(c.command)?.[1];
    if (job && !counts.has(`ok-${job}`)) v.push(`command of ${job} is stored as completed but never ran`);
  }
  // Clients: received ⊆ stored, once each; every stored ending seen.
  for (const c of clients) {
    c.flush();
    for (const threadId of threadIds) {
      const log = new Map(stored.get(threadId)!.map((e) => [e.seq, e.method]));
      const seen = c.frames.filter((f) => f.params?.threadId === threadId && typeof f.params.seq === "number" && !isDelta(f.method!) && !(f.method === "error" && f.params.willRetry));
      const seqs = new Set<number>();
      for (const f of seen) {
        const seq = f.params.seq as number;
        if (seqs.has(seq)) {
          const on = seen.filter((g) => g.params.seq === seq).map((g) => c.connectionOf.get(g));
          const resumes = c.resumes.filter((r) => r.threadId === threadId).map((r) => `${r.afterSeq} on connection ${r.connection}`);
          v.push(`client ${c.slot} received seq ${seq} (${f.method}) of ${threadId} twice, on connections ${on.join(" and ")} (resumed after ${resumes.join(", ")})`);
        }
        seqs.add(seq);
        if (log.get(seq) !== f.method) v.push(`client ${c.slot} was told ${f.method} at seq ${seq} of ${threadId}; the log has ${log.get(seq) ?? "nothing"}`);
      }
      for (const e of stored.get(threadId)!) {
        if (e.method !== "turn/completed" || seqs.has(e.seq)) continue;
        const around = [...seqs].filter((s) => Math.abs(s - e.seq) <= 6).sort((a, b) => a - b);
        if (process.env.CHAOS_DEBUG) writeFileSync(`/tmp/chaos-missed-${c.slot}-${e.seq}.json`, JSON.stringify({ ending: e, stored: stored.get(threadId)!.map((x) => `${x.seq} ${x.method}`), seen: c.frames.filter((f) => f.params?.threadId === threadId).map((f) => `${f.params.seq} ${f.method}`), resumes: c.resumes }, null, 1));
        const resumes = c.resumes.filter((r) => r.threadId === threadId).map((r) => r.afterSeq);
        v.push(`client ${c.slot} never saw the ending of turn ${e.params.turn.id} (seq ${e.seq} of ${threadId}; it saw ${around.join(", ") || "none"} near it; resumed after ${resumes.join(", ")})`);
      }
    }
  }
}
