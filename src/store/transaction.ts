/**
 * An open database transaction, as the runtime sees it: a unit of work it hands from one store
 * call to the next (a turn's row, its items and its events commit together), never a place to
 * write SQL. Only store/ issues statements on it (test/architecture.test.ts keeps it so).
 */
import type { TransactionSql } from "postgres";

export type Transaction = TransactionSql;

/**
 * A check that aborts a transaction fails in SQL, so that it aborts the transaction even where
 * COMMIT is sent before its answer reaches JavaScript (a pipelined transaction). `select (case when <ok> then '1' else '<marker>' end)::int`
 * fails the statement (and with it the transaction) with "invalid input syntax for type integer:
 * "<marker>"" when the check does not hold — plain SQL, with no function to install. The marker
 * is a constant of our own, never data. This tells that failure from any other.
 */
export function failedCheck(err: unknown, marker: string): boolean {
  const e = err as { code?: string; message?: string } | null;
  return e?.code === "22P02" && typeof e.message === "string" && e.message.includes(`"${marker}"`);
}

/** Awaits every statement of a pipelined batch; throws the first failure in issue order. */
export async function inIssueOrder(statements: Promise<unknown>[]): Promise<void> {
  const results = await Promise.allSettled(statements);
  for (const r of results) if (r.status === "rejected") throw r.reason;
}
