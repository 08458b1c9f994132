/**
 * A TCP proxy on 127.0.0.1 in front of Postgres that counts what the server sends: every
 * statement executed (extended protocol Execute, or a simple Query), classified by its SQL
 * ("insert into items", "update threads", "begin", …), and the bytes. The local Postgres has no
 * pg_stat_statements preloaded, and the benched server is a separate process whose postgres.js
 * options the bench cannot change, so the wire is where statements can be counted exactly.
 * Bytes are forwarded as they arrive; parsing only observes.
 */
import net from "node:net";

export interface ProxyCounts {
  /** Statements executed (Execute messages + simple Query messages). */
  statements: number;
  /** Of those, per normalised kind. */
  byKind: Map<string, number>;
  /**
   * Durable commits, from Postgres's replies: each COMMIT, plus each INSERT, UPDATE or DELETE
   * completed outside a transaction (autocommit, e.g. a lease taken or given back), which flushes
   * the WAL as a COMMIT does.
   */
  commits: number;
  /** Bytes client → Postgres and back. */
  bytesToPg: number;
  bytesFromPg: number;
  connections: number;
}

/** "insert into items", "update threads", "select … from turns", "begin", "commit". */
export function statementKind(sql: string): string {
  const s = sql.replace(/\s+/g, " ").trim().toLowerCase();
  let m = /^(insert into|update|delete from) "?([a-z_]+)/.exec(s);
  if (m) return `${m[1]} ${m[2]}`;
  if (/^select\b/.test(s)) {
    m = /\bfrom "?([a-z_]+)/.exec(s);
    return m ? `select … from ${m[1]}` : "select (no table)";
  }
  m = /^([a-z]+)/.exec(s);
  return m ? m[1]! : "?";
}

const SSL_REQUEST = 80877103;
const GSSENC_REQUEST = 80877104;

export class PgCountingProxy {
  private server!: net.Server;
  private readonly sockets = new Set<net.Socket>();
  private counts: ProxyCounts = { statements: 0, byKind: new Map(), commits: 0, bytesToPg: 0, bytesFromPg: 0, connections: 0 };
  url = "";

  private constructor(private readonly target: { host: string; port: number }) {}

  /** Starts a proxy for `databaseUrl`; `url` is the same URL pointing at the proxy. */
  static async start(databaseUrl: string): Promise<PgCountingProxy> {
    const u = new URL(databaseUrl);
    const p = new PgCountingProxy({ host: u.hostname, port: Number(u.port || 5432) });
    await p.listen();
    const proxied = new URL(databaseUrl);
    proxied.hostname = "127.0.0.1";
    proxied.port = String((p.server.address() as net.AddressInfo).port);
    p.url = proxied.toString();
    return p;
  }

  private listen(): Promise<void> {
    this.server = net.createServer((client) => this.accept(client));
    return new Promise((resolve) => this.server.listen(0, "127.0.0.1", () => resolve()));
  }

  private accept(client: net.Socket): void {
    const upstream = net.connect(this.target.port, this.target.host);
    this.counts.connections++;
    for (const s of [client, upstream]) {
      this.sockets.add(s);
      s.setNoDelay(true);
      s.on("close", () => this.sockets.delete(s));
      s.on("error", () => {});
    }
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
    // Postgres → client: typed messages, except the one-byte answer to an SSL or GSS request.
    let answersPending = 0;
    let fromPg: Buffer = Buffer.alloc(0);
    /** The transaction status of the last ReadyForQuery ('I' idle, 'T' in a transaction, 'E' failed one). */
    let status = "I";
    upstream.on("data", (d: Buffer) => {
      this.counts.bytesFromPg += d.length;
      client.write(d);
      fromPg = fromPg.length ? Buffer.concat([fromPg, d]) : d;
      for (;;) {
        if (answersPending > 0) {
          if (fromPg.length < 1) break;
          answersPending--;
          fromPg = fromPg.subarray(1);
          continue;
        }
        const msg = typedMessage(fromPg);
        if (!msg) break;
        const { type, body } = msg;
        fromPg = msg.rest;
        if (type === "Z") status = String.fromCharCode(body[0]!);
        else if (type === "C") {
          const tag = cstring(body, 0).text;
          if (tag === "COMMIT" || (status === "I" && /^(INSERT|UPDATE|DELETE|MERGE) /.test(tag))) this.counts.commits++;
        }
      }
      fromPg = fromPg.length ? Buffer.from(fromPg) : Buffer.alloc(0);
    });

    // Client → Postgres: untyped startup messages first, then typed messages.
    let startup = true;
    let buf: Buffer = Buffer.alloc(0);
    const statements = new Map<string, string>(); // prepared statement name → SQL
    let bound = "";
    client.on("data", (d: Buffer) => {
      this.counts.bytesToPg += d.length;
      upstream.write(d);
      buf = buf.length ? Buffer.concat([buf, d]) : d;
      for (;;) {
        if (startup) {
          if (buf.length < 8) break;
          const len = buf.readInt32BE(0);
          if (buf.length < len) break;
          const code = buf.readInt32BE(4);
          if (code !== SSL_REQUEST && code !== GSSENC_REQUEST) startup = false;
          else answersPending++;
          buf = buf.subarray(len);
          continue;
        }
        const msg = typedMessage(buf);
        if (!msg) break;
        const { type, body } = msg;
        buf = msg.rest;
        if (type === "Q") {
          this.count(cstring(body, 0).text);
        } else if (type === "P") {
          const name = cstring(body, 0);
          statements.set(name.text, cstring(body, name.next).text);
        } else if (type === "B") {
          const portal = cstring(body, 0);
          bound = statements.get(cstring(body, portal.next).text) ?? "?";
        } else if (type === "E") {
          this.count(bound);
        }
      }
      if (buf.length === 0) buf = Buffer.alloc(0);
      else buf = Buffer.from(buf); // do not pin the whole chunk
    });
  }

  private count(sql: string): void {
    this.counts.statements++;
    const k = statementKind(sql);
    this.counts.byKind.set(k, (this.counts.byKind.get(k) ?? 0) + 1);
  }

  snapshot(): ProxyCounts {
    return { ...this.counts, byKind: new Map(this.counts.byKind) };
  }

  static diff(after: ProxyCounts, before: ProxyCounts): ProxyCounts {
    const byKind = new Map<string, number>();
    for (const [k, v] of after.byKind) {
      const d = v - (before.byKind.get(k) ?? 0);
      if (d) byKind.set(k, d);
    }
    return {
      statements: after.statements - before.statements,
      byKind,
      commits: after.commits - before.commits,
      bytesToPg: after.bytesToPg - before.bytesToPg,
      bytesFromPg: after.bytesFromPg - before.bytesFromPg,
      connections: after.connections - before.connections,
    };
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** The first whole typed message of `buf` (a type byte, then a length that counts itself) and what follows it; null until it has all arrived. */
function typedMessage(buf: Buffer): { type: string; body: Buffer; rest: Buffer } | null {
  if (buf.length < 5) return null;
  const len = buf.readInt32BE(1);
  if (buf.length < 1 + len) return null;
  return { type: String.fromCharCode(buf[0]!), body: buf.subarray(5, 1 + len), rest: buf.subarray(1 + len) };
}

function cstring(buf: Buffer, at: number): { text: string; next: number } {
  const end = buf.indexOf(0, at);
  const stop = end < 0 ? buf.length : end;
  return { text: buf.toString("utf8", at, stop), next: stop + 1 };
}
