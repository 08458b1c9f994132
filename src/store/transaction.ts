/**
 * An open database transaction, as the runtime sees it: a unit of work it hands from one store
 * call to the next (a turn's row, its items and its events commit together), never a place to
 * write SQL. Only store/ issues statements on it (test/architecture.test.ts keeps it so).
 */
import type { TransactionSql } from "postgres";

export type Transaction = TransactionSql;
