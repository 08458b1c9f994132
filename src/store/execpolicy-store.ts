/** The saved approval rules (migrations/009_execpolicy_rules.sql). All SQL for them lives here. */
import type { Sql } from "postgres";
import { uuidv7 } from "../ids.js";

export interface StoredRule {
  id: string;
  pattern: string[];
  decision: "allow";
  /** The thread where the rule was accepted, when known. */
  threadId: string | null;
  createdAtMs: number;
}

export class ExecPolicyStore {
  constructor(private readonly sql: Sql) {}

  /** Every rule, oldest first. */
  async list(): Promise<StoredRule[]> {
    return this.sql<StoredRule[]>`
      select id, pattern, decision, thread_id, created_at_ms from execpolicy_rules order by created_at_ms, id`;
  }

  /** Saves an allow rule; saving the same prefix again keeps the first one and returns it. */
  async add(pattern: readonly string[], threadId: string | null): Promise<StoredRule> {
    const now = Date.now();
    const [row] = await this.sql<StoredRule[]>`
      insert into execpolicy_rules (id, pattern, thread_id, created_at_ms)
      values (${uuidv7(now)}, ${this.sql.array([...pattern])}, ${threadId}, ${now})
      on conflict on constraint execpolicy_rules_pattern_key do update set pattern = excluded.pattern
      returning id, pattern, decision, thread_id, created_at_ms`;
    return row!;
  }

  /** Removes a rule; false when there was none with that id. */
  async remove(id: string): Promise<boolean> {
    const rows = await this.sql`delete from execpolicy_rules where id = ${id} returning id`;
    return rows.length > 0;
  }
}
