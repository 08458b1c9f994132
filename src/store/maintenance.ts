/**
 * Housekeeping statements the server runs on its database, outside any thread's work.
 */
import type { Database } from "./database.js";

/** Refreshes the planner's statistics of every table (PGlite has no autovacuum to do it). */
export async function analyzeDatabase(db: Database): Promise<void> {
  await db.sql`analyze`;
}
