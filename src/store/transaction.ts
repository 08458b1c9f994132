/**
 * An open database transaction, as the runtime sees it: a unit of work it hands from one store
 * call to the next (a turn's row, its items and its events commit together), never a place to
 * write SQL. Only store/ issues statements on it (test/architecture.test.ts keeps it so).
 */
import type { ReservedSql, Sql, TransactionSql } from "postgres";

export type Transaction = TransactionSql | ReservedSql;

/**
 * How a pipelined transaction is sent (see `pipelinedTransaction`):
 * - "atOnce": the caller issues every statement synchronously, before its first await, and every
 *   check that must abort the transaction fails in SQL (a statement error), not in JavaScript
 *   after the answer: BEGIN, the statements and COMMIT leave back to back — one round trip.
 * - "awaited": COMMIT is sent once the caller's work has resolved (it may read and decide, or
 *   throw after a statement's answer): BEGIN and the statements in one round trip, COMMIT in a
 *   second.
 */
export type PipelineMode = "atOnce" | "awaited";

/** A transaction whose COMMIT the server answered ROLLBACK (a statement failed; its error is the cause). */
export class TransactionRolledBackError extends Error {
  constructor(cause?: unknown) {
    super("the transaction was rolled back", cause === undefined ? undefined : { cause });
    this.name = "TransactionRolledBackError";
  }
}

/**
 * Runs `fn` in a transaction on a reserved connection without waiting for BEGIN's answer (postgres.js's
 * `sql.begin` awaits it: a round trip of its own). postgres.js sends a reserved connection's queries
 * back to back (pipelined, each with its own Sync), so the server runs them in issue order; when one
 * fails the server refuses the rest of the transaction ("current transaction is aborted") and answers
 * COMMIT with ROLLBACK, without an error: that answer is checked here, so nothing passes for committed
 * that was not. Statements issued on `tx` once COMMIT has gone ("atOnce") throw instead of running
 * outside the transaction. ("atOnce" therefore also forbids awaiting anything but those statements:
 * COMMIT goes once the microtasks that issue them have run.)
 */
export async function pipelinedTransaction<T>(sql: Sql, fn: (tx: Transaction) => Promise<T>, mode: PipelineMode): Promise<T> {
  const reserved = await sql.reserve();
  let sealed = false;
  const tx = mode === "atOnce" ? sealable(reserved, () => sealed) : reserved;
  // The connection's close, as sql.begin hears it (postgres.js tells a connection's `onclose`,
  // which BEGIN's `onexecute` hands us): a statement still queued in postgres.js then never
  // settles, and a closed connection must not be released back into the pool.
  let connection: Connection | null = null;
  let lost: unknown = null;
  let connectionLost!: (err: unknown) => void;
  const closed = new Promise<never>((_, reject) => (connectionLost = reject));
  closed.catch(() => {});
  const onexecute = (c: Connection) => {
    connection = c;
    c.onclose = (err) => {
      lost = err ?? new Error("the database connection closed");
      connectionLost(lost);
    };
    return true; // go on pipelining
  };
  // execute(): a postgres.js query is sent when it is first awaited; BEGIN goes now.
  const begun = reserved.unsafe("begin", [], { onexecute } as object).execute();
  begun.catch(() => {}); // its failure is every statement's failure, reported through them
  let ended = false;
  try {
    let result: T;
    if (mode === "atOnce") {
      const work = fn(tx);
      work.catch(() => {}); // awaited below, with BEGIN's and COMMIT's answers
      // A statement reaches the connection a few microtasks after it is issued (`await query`
      // goes through a thenable job, then postgres.js waits one more tick): COMMIT waits for
      // the microtask queue to drain. postgres.js flushes its writes on setImmediate too, so
      // COMMIT leaves in the same or the very next write, without waiting for any answer.
      await new Promise((resolve) => setImmediate(resolve));
      sealed = true;
      const committed = reserved.unsafe("commit").execute();
      committed.catch(() => {});
      ended = true; // COMMIT is sent: the server ends the transaction whatever happens next
      const outcome = await Promise.race([Promise.allSettled([begun, work, committed]), closed]);
      for (const o of outcome) if (o.status === "rejected") throw o.reason;
      result = (outcome[1] as PromiseFulfilledResult<T>).value;
      if ((outcome[2] as PromiseFulfilledResult<{ command: string }>).value.command !== "COMMIT") throw new TransactionRolledBackError();
    } else {
      result = await Promise.race([fn(tx), closed]);
      await Promise.race([begun, closed]);
      ended = true;
      const done = await Promise.race([reserved.unsafe("commit").execute(), closed]);
      if (done.command !== "COMMIT") throw new TransactionRolledBackError();
    }
    return result;
  } catch (err) {
    if (!ended && !lost) await Promise.race([reserved.unsafe("rollback").execute(), closed]).catch(() => {});
    throw err;
  } finally {
    if (connection) (connection as Connection).onclose = null;
    // A closed connection is postgres.js's again (it reconnects it on demand).
    if (!lost) reserved.release();
  }
}

/** What postgres.js's `onexecute` query option is handed: the connection (internal, as sql.begin uses it). */
interface Connection {
  onclose: ((err?: unknown) => void) | null;
}

/** `tx` refusing new statements once `isSealed()` (COMMIT went before them). */
function sealable(tx: ReservedSql, isSealed: () => boolean): ReservedSql {
  const refuse = () => {
    throw new Error("a statement was issued after its pipelined transaction's COMMIT (the caller must issue every statement before its first await)");
  };
  return new Proxy(tx, {
    apply(target, self, args) {
      if (isSealed()) refuse();
      return Reflect.apply(target as unknown as (...a: unknown[]) => unknown, self, args);
    },
    get(target, key, receiver) {
      const value = Reflect.get(target, key, receiver);
      if (key !== "unsafe" || typeof value !== "function") return value;
      return (...args: unknown[]) => {
        if (isSealed()) refuse();
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
}

/**
 * A check that aborts a pipelined transaction must fail in SQL: COMMIT may already be on its way
 * when the answer reaches JavaScript. `select (case when <ok> then '1' else '<marker>' end)::int`
 * fails the statement (and with it the transaction) with "invalid input syntax for type integer:
 * "<marker>"" when the check does not hold — plain SQL, with no function to install. The marker
 * is a constant of our own, never data. This tells that failure from any other.
 */
export function failedCheck(err: unknown, marker: string): boolean {
  const e = err as { code?: string; message?: string } | null;
  return e?.code === "22P02" && typeof e.message === "string" && e.message.includes(`"${marker}"`);
}
