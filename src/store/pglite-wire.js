// @ts-check
/**
 * The Postgres wire protocol for one PGlite instance, on a Unix socket: what postgres.js connects
 * to (pglite-worker.js runs it in the embedded database's thread).
 *
 * It replaces pglite-socket's server, which handed PGlite one protocol message at a time: a
 * postgres.js statement is three to five messages (Parse, Bind, Describe, Execute, Sync), and each
 * cost a queue entry, two mutexes, a call into PGlite and a socket write of its own: most of the
 * thread's time outside the WebAssembly itself (issue 33 item 5, bench/RESULTS.md). Here
 * every complete message that has arrived on a connection goes to PGlite in one call, which runs
 * them in order as Postgres' own loop does (an error skips to the next Sync), and their answers
 * leave in one write.
 *
 * PGlite is a single session. Connections take turns at message boundaries, and a connection
 * inside a transaction keeps the session until the transaction ends (the others wait). A
 * connection that goes away mid-transaction, or mid-pipeline, leaves nothing behind: the session
 * is synced and rolled back before anyone else runs.
 */
import net from "node:net";

const SSL_REQUEST = 80877103;
const GSSENC_REQUEST = 80877104;
const CANCEL_REQUEST = 80877102;
const PROTOCOL_3 = 196608;
/** 'X': the client is leaving. PGlite must never see it inside a batch (it would end its backend). */
const TERMINATE = 0x58;
/** 'S' Sync and 'Q' simple Query: messages that end a pipeline. */
const SYNC_TYPE = 0x53;
const QUERY_TYPE = 0x51;
/** A start-up packet longer than this is not one (Postgres allows 10 000 bytes). */
const MAX_STARTUP_LENGTH = 10_000;

/**
 * What resets the session after a client vanished, as Postgres ends a lost connection's work: an
 * Execute of a portal that does not exist fails, which aborts whatever the client's unsynced
 * messages began (a Sync alone would commit it), and the Sync after it ends the pipeline. An open
 * transaction block is then rolled back (`ROLLBACK`, sent only if one is open).
 */
const ABORT_PIPELINE = Buffer.concat([execute("aas_no_such_portal"), typedMessage(SYNC_TYPE, Buffer.alloc(0))]);
const ROLLBACK = simpleQuery("ROLLBACK");

/**
 * @typedef {object} WireDatabase The part of PGlite this uses.
 * @property {(message: Uint8Array, opts: { onRawData: (data: Uint8Array) => void }) => Promise<void>} execProtocolRawStream
 * @property {<T>(fn: () => Promise<T>) => Promise<T>} runExclusive
 * @property {() => boolean} isInTransaction
 */

/**
 * @typedef {object} Connection
 * @property {net.Socket} socket
 * @property {Buffer} input bytes received and not yet handed to PGlite
 * @property {Buffer[]} arriving bytes received after `input` while its first message is incomplete
 *   (joined once it is: a large message arriving in many reads is copied once, not once a read)
 * @property {number} arrivingBytes
 * @property {number} wanted how many bytes the first message needs (0: unknown yet)
 * @property {boolean} started past the start-up packet
 * @property {boolean} closed
 * @property {boolean} ending it sent Terminate or broke the framing: nothing more of it runs
 * @property {boolean} queued in the ready list
 * @property {boolean} holdsSession its last batch left a transaction open or a pipeline unsynced:
 *   nobody else runs until it is done, and if it leaves, the session is reset
 */

export class PgliteWireServer {
  /** @type {net.Server | null} */
  #server = null;
  /** @type {Set<Connection>} */
  #connections = new Set();
  /** Connections with complete messages waiting, in arrival order. @type {Connection[]} */
  #ready = [];
  /** The connection whose messages ran last: inside a transaction, only it may run. @type {Connection | null} */
  #owner = null;
  /** Whether the runner (#drain) is in its loop. */
  #draining = false;
  /** The runner's last loop: close() waits for its call into PGlite to finish. @type {Promise<void>} */
  #drained = Promise.resolve();
  #closing = false;
  /** Sessions to reset (a client left mid-transaction or mid-pipeline) before anything else runs. */
  #resetPending = false;

  /**
   * @param {WireDatabase} db
   * @param {{ maxConnections: number, onBroken: (err: unknown) => void }} opts `onBroken`: PGlite threw
   *   (a trap or an abort, never an SQL error, which travels in the protocol): the instance cannot
   *   be trusted any more.
   */
  constructor(db, opts) {
    this.db = db;
    this.opts = opts;
  }

  /** @param {string} socketPath */
  listen(socketPath) {
    const server = net.createServer((socket) => this.#accept(socket));
    server.maxConnections = this.opts.maxConnections;
    this.#server = server;
    return new Promise((resolve, reject) => {
      server.once("error", reject);
      server.listen(socketPath, () => {
        server.off("error", reject);
        resolve(undefined);
      });
    });
  }

  /**
   * Stops listening, drops every connection and waits for a call into PGlite under way: once it
   * resolves, nothing of this server touches PGlite again (it can be closed).
   */
  async close() {
    this.#closing = true;
    for (const c of this.#connections) c.socket.destroy();
    const server = this.#server;
    this.#server = null;
    await new Promise((resolve) => (server ? server.close(() => resolve(undefined)) : resolve(undefined)));
    await this.#drained;
  }

  /** @param {net.Socket} socket */
  #accept(socket) {
    /** @type {Connection} */
    const c = { socket, input: Buffer.alloc(0), arriving: [], arrivingBytes: 0, wanted: 0, started: false, closed: false, ending: false, queued: false, holdsSession: false };
    this.#connections.add(c);
    socket.on("data", (data) => {
      if (c.ending) return; // hung up: what it still sends is dropped
      c.arriving.push(data);
      c.arrivingBytes += data.length;
      if (c.input.length + c.arrivingBytes < c.wanted) return;
      c.input = c.input.length === 0 && c.arriving.length === 1 ? data : Buffer.concat([c.input, ...c.arriving]);
      c.arriving = [];
      c.arrivingBytes = 0;
      this.#offer(c);
    });
    socket.on("error", () => socket.destroy());
    socket.on("close", () => this.#dropped(c));
  }

  /** @param {Connection} c */
  #dropped(c) {
    if (c.closed) return;
    c.closed = true;
    this.#connections.delete(c);
    this.#ready = this.#ready.filter((r) => r !== c);
    if (c.holdsSession) this.#resetPending = true;
    if (this.#owner === c) this.#owner = null;
    this.#run();
  }

  /** Queues `c` to run if what it has received begins with a complete message. @param {Connection} c */
  #offer(c) {
    if (c.closed || c.ending || c.queued) return;
    c.wanted = firstMessageLength(c.input, c.started);
    if (c.input.length < c.wanted) return;
    c.queued = true;
    this.#ready.push(c);
    this.#run();
  }

  /** Hands waiting messages to PGlite, one connection's batch at a time. */
  #run() {
    if (this.#draining || this.#closing) return;
    this.#draining = true;
    this.#drained = this.#drain();
  }

  async #drain() {
    try {
      for (;;) {
        if (this.#closing) return;
        if (this.#resetPending) {
          this.#resetPending = false;
          await this.#resetSession();
          continue;
        }
        const next = this.#pick();
        if (!next) return;
        next.queued = false;
        await this.#serve(next);
        this.#offer(next);
      }
    } catch (err) {
      this.opts.onBroken(err);
    } finally {
      this.#draining = false; // synchronously at the loop's end: the next offer starts a new one
    }
  }

  /** The next connection to run: only the one holding the session while it does. */
  #pick() {
    const owner = this.#owner;
    const i = owner && owner.holdsSession ? this.#ready.indexOf(owner) : 0;
    if (i < 0 || this.#ready.length === 0) return null;
    return this.#ready.splice(i, 1)[0] ?? null;
  }

  /** Runs what `c` has received up to its last complete message (or its start-up packet). @param {Connection} c */
  async #serve(c) {
    if (!c.started) return this.#startUp(c);
    const { end, lastType, terminate, invalid } = scanMessages(c.input);
    const batch = c.input.subarray(0, end);
    c.input = c.input.subarray(terminate ? end + 5 : end);
    if (batch.length > 0) {
      this.#owner = c;
      c.holdsSession = true; // until PGlite has answered: a client that leaves meanwhile is reset after
      const answer = await this.#exec(batch);
      // A batch that ends with a Sync or a simple Query leaves no pipeline open.
      c.holdsSession = this.db.isInTransaction() || (lastType !== SYNC_TYPE && lastType !== QUERY_TYPE);
      if (!c.closed && answer.length > 0) c.socket.write(answer);
    }
    // A malformed length cannot be skipped: the stream has lost its framing.
    if (terminate || invalid) hangUp(c);
  }

  /** SSL and GSS encryption requests are declined, cancel requests dropped, the start-up packet run. @param {Connection} c */
  async #startUp(c) {
    const length = c.input.readInt32BE(0);
    const code = c.input.readInt32BE(4);
    if (length < 8 || length > MAX_STARTUP_LENGTH) return hangUp(c);
    const packet = c.input.subarray(0, length);
    c.input = c.input.subarray(length);
    if (code === SSL_REQUEST || code === GSSENC_REQUEST) {
      c.socket.write("N"); // no encryption: it is a Unix socket only this user can open
      return;
    }
    // A cancel request (PGlite has no other backend to signal) or a protocol we do not speak.
    if (code !== PROTOCOL_3) return hangUp(c);
    try {
      const answer = await this.#exec(packet);
      c.started = true;
      if (!c.closed) c.socket.write(answer);
    } catch (err) {
      // PGlite refuses a start-up packet it cannot read by throwing: that client goes, the
      // database stays. Anything else it throws is a broken database (#drain).
      if (!(err instanceof Error && err.message.startsWith("Cannot process startup packet"))) throw err;
      hangUp(c);
    }
  }

  /** One call into PGlite; its answer, copied out of PGlite's memory. @param {Uint8Array} message */
  async #exec(message) {
    /** @type {Buffer[]} */
    const chunks = [];
    await this.db.runExclusive(() => this.db.execProtocolRawStream(message, { onRawData: (data) => void chunks.push(Buffer.from(data)) }));
    return chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
  }

  /** Ends whatever a vanished client left open: an unsynced pipeline, then a transaction. */
  async #resetSession() {
    await this.#exec(ABORT_PIPELINE);
    if (this.db.isInTransaction()) await this.#exec(ROLLBACK);
  }
}

/** Ends a connection whose client is done or can no longer be understood: nothing more of it runs. @param {Connection} c */
function hangUp(c) {
  c.ending = true;
  c.input = Buffer.alloc(0);
  c.socket.end();
}

/**
 * How many bytes the first message of `input` takes: a start-up packet (length, then a code)
 * before the start, a typed message (type byte, then a length that counts itself) after it; its
 * header's size while the header is incomplete. A length that cannot be right counts as what is
 * there, so that serving it finds the fault.
 * @param {Buffer} input
 * @param {boolean} started
 */
function firstMessageLength(input, started) {
  if (!started) {
    if (input.length < 8) return 8;
    const length = input.readInt32BE(0);
    return length < 8 || length > MAX_STARTUP_LENGTH ? input.length : length;
  }
  if (input.length < 5) return 5;
  const length = input.readInt32BE(1);
  return length < 4 ? input.length : 1 + length;
}

/**
 * Where the complete typed messages at the start of `input` end and the type of the last of
 * them (0 if none); whether a Terminate follows them (it is not part of the batch) or a length no
 * message can have.
 * @param {Buffer} input
 */
function scanMessages(input) {
  let end = 0;
  let lastType = 0;
  while (input.length - end >= 5) {
    const length = input.readInt32BE(end + 1);
    if (length < 4) return { end, lastType, terminate: false, invalid: true };
    if (input[end] === TERMINATE) return { end, lastType, terminate: true, invalid: false };
    if (input.length - end < 1 + length) break;
    lastType = input[end] ?? 0;
    end += 1 + length;
  }
  return { end, lastType, terminate: false, invalid: false };
}

/** A typed message: its type byte, its length (which counts itself) and `body`. @param {number} type @param {Buffer} body */
function typedMessage(type, body) {
  const message = Buffer.alloc(5 + body.length);
  message[0] = type;
  message.writeInt32BE(4 + body.length, 1);
  body.copy(message, 5);
  return message;
}

/** An Execute message for the named portal, all rows (max rows 0). @param {string} portal */
function execute(portal) {
  return typedMessage(0x45, Buffer.concat([Buffer.from(`${portal}\0`), Buffer.alloc(4)]));
}

/** A simple Query message. @param {string} text */
function simpleQuery(text) {
  return typedMessage(QUERY_TYPE, Buffer.from(`${text}\0`));
}
