/**
 * The saved approval rules (migrations/009_execpolicy_rules.sql), each its user's
 * (016_users_audit.sql: one person's rule says nothing about another's threads). All SQL for them
 * lives here.
 */
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

  /** A user's rules (null: every user's), oldest first. */
  async list(userId: string | null): Promise<StoredRule[]> {
    return this.sql<StoredRule[]>`
      select id, pattern, decision, thread_id, created_at_ms from execpolicy_rules
      ${userId === null ? this.sql`` : this.sql`where user_id = ${userId}`}
      order by created_at_ms, id`;
  }

  /** Saves a user's allow rule; saving the same prefix again keeps the first one and returns it. */
  async add(pattern: readonly string[], threadId: string | null, userId: string): Promise<StoredRule> {
    const now = Date.now();
    const [row] = await this.sql<StoredRule[]>`
      insert into execpolicy_rules (id, pattern, thread_id, created_at_ms, user_id)
      values (${uuidv7(now)}, ${this.sql.array([...pattern])}, ${threadId}, ${now}, ${userId})
      on conflict on constraint execpolicy_rules_user_pattern_key do update set pattern = excluded.pattern
      returning id, pattern, decision, thread_id, created_at_ms`;
    return row!;
  }

  /** Removes a rule of the user's (null: anyone's); false when there was none with that id. */
  async remove(id: string, userId: string | null): Promise<boolean> {
    const rows = await this.sql`delete from execpolicy_rules where id = ${id} ${userId === null ? this.sql`` : this.sql`and user_id = ${userId}`} returning id`;
    return rows.length > 0;
  }
}
