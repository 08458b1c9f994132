/**
 * The embedded database's wire server (src/store/pglite-wire.js) on a real PGlite and real
 * postgres.js clients: every complete message that arrived goes to PGlite in one call, answers
 * are what Postgres gives, connections take turns without entering each other's transactions, a
 * client that vanishes leaves nothing open, bad framing costs only its own connection, and
 * PGlite throwing is reported as a broken database.
 */
import { mkdtemp, rm } from "node:fs/promises";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { PGlite } from "@electric-sql/pglite";
import postgres from "postgres";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { PgliteWireServer } from "../src/store/pglite-wire.js";

let pg: PGlite;
let dir: string;
let socketPath: string;
const servers: PgliteWireServer[] = [];
/** Calls into PGlite and what PGlite threw to the server, per test. */
let calls: Uint8Array[];
let broken: unknown[];
/** Set by a test: the next call into PGlite throws this instead (as a trap would). */
let failNext: Error | null = null;
/** Set by a test: the next call into PGlite waits for this before it runs. */
let holdNext: Promise<void> | null = null;
const clients: postgres.Sql[] = [];
const sockets: net.Socket[] = [];

beforeAll(async () => {
  pg = await PGlite.create();
  dir = await mkdtemp(path.join(os.tmpdir(), "aas-wire-"));
});

afterAll(async () => {
  await pg.close();
  await rm(dir, { recursive: true, force: true });
});

let serial = 0;
async function startServer(): Promise<void> {
  calls = [];
  broken = [];
  socketPath = path.join(dir, `s${serial++}`);
  // The real PGlite, with each call recorded, and a fault a test can inject.
  const db = {
    execProtocolRawStream: (message: Uint8Array, opts: { onRawData: (data: Uint8Array) => void }) => {
      calls.push(message.slice());
      const fault = failNext;
      failNext = null;
      if (fault) return Promise.reject(fault);
      const hold = holdNext;
      holdNext = null;
      return hold ? hold.then(() => pg.execProtocolRawStream(message, opts)) : pg.execProtocolRawStream(message, opts);
    },
    runExclusive: <T>(fn: () => Promise<T>) => pg.runExclusive(fn),
    isInTransaction: () => pg.isInTransaction(),
  };
  const server = new PgliteWireServer(db, { maxConnections: 4, onBroken: (err) => broken.push(err) });
  servers.push(server);
  await server.listen(socketPath);
}

function client(): postgres.Sql {
  const sql = postgres({ path: socketPath, user: "postgres", database: "postgres", max: 1, onnotice: () => {}, connect_timeout: 30 });
  clients.push(sql);
  return sql;
}

afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  for (const sql of clients.splice(0)) await sql.end({ timeout: 1 });
  for (const server of servers.splice(0)) await server.close();
  failNext = null;
  holdNext = null;
});

/** A raw connection: its bytes as they arrive, and whether the server closed it. */
function rawConnection(): { socket: net.Socket; received: () => Buffer; closed: Promise<void>; next: (n: number) => Promise<Buffer> } {
  const socket = net.connect(socketPath);
  sockets.push(socket);
  let buf = Buffer.alloc(0);
  const waiters: (() => void)[] = [];
  socket.on("data", (d) => {
    buf = Buffer.concat([buf, d]);
    for (const w of waiters.splice(0)) w();
  });
  const closed = new Promise<void>((resolve) => socket.on("close", () => resolve()));
  socket.on("error", () => {});
  const next = async (n: number) => {
    while (buf.length < n) await new Promise<void>((resolve) => waiters.push(resolve));
    return buf;
  };
  return { socket, received: () => buf, closed, next };
}

function startupPacket(): Buffer {
  const params = Buffer.from("user\0postgres\0database\0postgres\0\0");
  const b = Buffer.alloc(8 + params.length);
  b.writeInt32BE(b.length, 0);
  b.writeInt32BE(196608, 4);
  params.copy(b, 8);
  return b;
}

function query(text: string): Buffer {
  return extended("Q", cstr(text));
}

/** Typed messages in `buf` of type `type` ('Z' ReadyForQuery, 'E' ErrorResponse, …). */
function messagesOf(buf: Buffer, type: string): Buffer[] {
  const out: Buffer[] = [];
  let at = 0;
  while (at + 5 <= buf.length) {
    const len = buf.readInt32BE(at + 1);
    if (String.fromCharCode(buf[at]!) === type) out.push(buf.subarray(at, at + 1 + len));
    at += 1 + len;
  }
  return out;
}

/** Connects raw, through the start-up exchange (up to its ReadyForQuery). */
async function startedRawConnection() {
  const conn = rawConnection();
  conn.socket.write(startupPacket());
  for (;;) {
    const buf = await conn.next(conn.received().length + 1);
    if (messagesOf(buf, "Z").length > 0) break;
  }
  const answered = conn.received().length;
  return { ...conn, since: () => conn.received().subarray(answered) };
}

describe("the embedded database's wire server", () => {
  it("hands every complete message that arrived to PGlite in one call and answers them in order", async () => {
    await startServer();
    const conn = await startedRawConnection();
    const before = calls.length;
    conn.socket.write(Buffer.concat(Array.from({ length: 10 }, (_, i) => query(`select ${i} as n`))));
    while (messagesOf(conn.since(), "Z").length < 10) await conn.next(conn.received().length + 1);
    const answer = conn.since();
    // Ten queries, ten answers in order (each row's value), from one call into PGlite.
    const rows = messagesOf(answer, "D").map((d) => d.subarray(11).toString());
    expect(rows).toEqual(["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"]);
    expect(calls.length - before).toBe(1);
  });

  it("answers postgres.js like Postgres: a failing statement in a pipelined transaction rolls all of it back", async () => {
    await startServer();
    const sql = client();
    await sql`create table pipelined (id int primary key)`;
    await expect(
      sql.begin((tx) => [tx`insert into pipelined values (1)`, tx`insert into pipelined values (1)`, tx`insert into pipelined values (2)`]),
    ).rejects.toMatchObject({ code: "23505" });
    expect(await sql`select count(*)::int as n from pipelined`).toEqual([{ n: 0 }]);
    await sql.begin((tx) => [tx`insert into pipelined values (1)`, tx`insert into pipelined values (2)`]);
    expect(await sql`select array_agg(id order by id) as ids from pipelined`).toEqual([{ ids: [1, 2] }]);
    expect(pg.isInTransaction()).toBe(false);
    await sql`drop table pipelined`;
  });

  it("takes a message larger than many reads whole, and answers it whole", async () => {
    await startServer();
    const sql = client();
    await sql`create table big (body text)`;
    const body = "0123456789abcdef".repeat(1 << 18); // 4 MiB: arrives in many reads of the socket
    await sql`insert into big values (${body})`;
    const [row] = await sql`select body, length(body)::int as n from big`;
    expect(row!.n).toBe(body.length);
    expect(row!.body === body).toBe(true);
    await sql`drop table big`;
  });

  it("keeps a connection's transaction its own: another connection runs after it ends, not inside it", async () => {
    await startServer();
    const a = client();
    const b = client();
    await a`create table turns (who text)`;
    await b`select 1`; // b is connected and started
    const reserved = await a.reserve();
    await reserved`begin`;
    await reserved`insert into turns values ('a')`;
    const bInsert = b`insert into turns values ('b')`.execute();
    // b's insert waits: inside a's transaction a sees only its own row.
    expect(await reserved`select who from turns`).toEqual([{ who: "a" }]);
    await reserved`rollback`;
    reserved.release();
    await bInsert;
    expect(await a`select who from turns`).toEqual([{ who: "b" }]);
    await a`drop table turns`;
  });

  it("rolls back what a client that vanished left open: a transaction, or unsynced messages", async () => {
    await startServer();
    const sql = client();
    await sql`create table left_open (id int)`;
    // A transaction block left open.
    const inBlock = await startedRawConnection();
    inBlock.socket.write(query("begin; insert into left_open values (1)"));
    while (messagesOf(inBlock.since(), "Z").length < 1) await inBlock.next(inBlock.received().length + 1);
    expect(pg.isInTransaction()).toBe(true);
    inBlock.socket.destroy();
    // Extended-protocol messages without their Sync: Parse, Bind and Execute of an insert.
    const unsynced = await startedRawConnection();
    const parse = extended("P", Buffer.concat([cstr(""), cstr("insert into left_open values (2)"), Buffer.from([0, 0])]));
    const bind = extended("B", Buffer.concat([cstr(""), cstr(""), Buffer.from([0, 0, 0, 0, 0, 0])]));
    const exec = extended("E", Buffer.concat([cstr(""), Buffer.from([0, 0, 0, 0])]));
    const before = calls.length;
    unsynced.socket.write(Buffer.concat([parse, bind, exec]));
    while (calls.length === before) await new Promise((r) => setTimeout(r, 5));
    unsynced.socket.destroy();
    // Neither row was committed, and the session is free for the next client.
    expect(await sql`select count(*)::int as n from left_open`).toEqual([{ n: 0 }]);
    await sql.begin((tx) => [tx`insert into left_open values (3)`]);
    expect(await sql`select array_agg(id) as ids from left_open`).toEqual([{ ids: [3] }]);
    expect(pg.isInTransaction()).toBe(false);
    await sql`drop table left_open`;
  });

  it("declines encryption, ends a connection on Terminate, and drops one whose framing is broken while others go on", async () => {
    await startServer();
    const sql = client();
    const ssl = rawConnection();
    const sslRequest = Buffer.alloc(8);
    sslRequest.writeInt32BE(8, 0);
    sslRequest.writeInt32BE(80877103, 4);
    ssl.socket.write(sslRequest);
    expect((await ssl.next(1)).toString()).toBe("N");

    const leaving = await startedRawConnection();
    const callsBefore = calls.length;
    leaving.socket.write(Buffer.from([0x58, 0, 0, 0, 4]));
    await leaving.closed;
    expect(calls.length).toBe(callsBefore); // PGlite never saw the Terminate

    const garbled = await startedRawConnection();
    garbled.socket.write(Buffer.from([0x51, 0, 0, 0, 2, 0x41]));
    await garbled.closed;

    const badStart = rawConnection();
    const tooLong = Buffer.alloc(8);
    tooLong.writeInt32BE(1 << 20, 0);
    tooLong.writeInt32BE(196608, 4);
    badStart.socket.write(tooLong);
    await badStart.closed;

    expect(await sql`select 41 + 1 as n`).toEqual([{ n: 42 }]);
    expect(broken).toEqual([]);
  });

  it("closes only once its call into PGlite is done, and calls PGlite no more after that", async () => {
    await startServer();
    const sql = client();
    await sql`select 1`;
    const before = calls.length;
    let release!: () => void;
    holdNext = new Promise<void>((resolve) => (release = resolve));
    const inFlight = sql`select 2`.execute();
    inFlight.catch(() => {});
    while (calls.length === before) await new Promise((r) => setTimeout(r, 5));
    // Closing drops the client mid-call: it held the session, so an open server would reset it next.
    let closed = false;
    const closing = servers.at(-1)!.close().then(() => (closed = true));
    await new Promise((r) => setTimeout(r, 20));
    expect(closed).toBe(false);
    release();
    await closing;
    const atClose = calls.length;
    expect(atClose).toBe(before + 1);
    // PGlite is free for whoever closes it, and the server calls it no more.
    expect((await pg.query<{ n: number }>("select 7 as n")).rows).toEqual([{ n: 7 }]);
    expect(pg.isInTransaction()).toBe(false);
    expect(calls.length).toBe(atClose);
  });

  it("reports PGlite throwing (a trap, not an SQL error) as a broken database", async () => {
    await startServer();
    const sql = client();
    await sql`select 1`;
    const trap = new Error("unreachable executed");
    failNext = trap;
    const lost = sql`select 2`.execute();
    lost.catch(() => {});
    while (broken.length === 0) await new Promise((r) => setTimeout(r, 5));
    expect(broken).toEqual([trap]);
    // An SQL error is an answer, not a broken database.
    await startServer();
    const again = client();
    await expect(again`select * from no_such_table`).rejects.toMatchObject({ code: "42P01" });
    expect(broken).toEqual([]);
  });
});

function cstr(s: string): Buffer {
  return Buffer.from(`${s}\0`);
}

function extended(type: string, body: Buffer): Buffer {
  const b = Buffer.alloc(5 + body.length);
  b[0] = type.charCodeAt(0);
  b.writeInt32BE(4 + body.length, 1);
  body.copy(b, 5);
  return b;
}
