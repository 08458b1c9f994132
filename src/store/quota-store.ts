/**
 * Per-user token usage by day and per-user turn slots (migrations/016_users_audit.sql). All SQL
 * for them lives here.
 */
import type { Sql } from "postgres";
import type { Queryable } from "./thread-store.js";

export class QuotaStore {
  constructor(private readonly sql: Sql) {}

  /**
   * Adds a model call's tokens to the user's count of the UTC day `day` (YYYY-MM-DD). `q`: where
   * to write it (a transaction it rides, side-writes.ts), the pool when absent.
   */
  async addTokens(userId: string, day: string, input: number, output: number, q: Queryable = this.sql): Promise<void> {
    await q`
      insert into user_token_usage (user_id, day, input_tokens, output_tokens) values (${userId}, ${day}, ${input}, ${output})
      on conflict (user_id, day) do update set
        input_tokens = user_token_usage.input_tokens + excluded.input_tokens,
        output_tokens = user_token_usage.output_tokens + excluded.output_tokens`;
  }

  async tokensOn(userId: string, day: string): Promise<number> {
    const [row] = await this.sql<{ n: number | null }[]>`
      select input_tokens + output_tokens as n from user_token_usage where user_id = ${userId} and day = ${day}`;
    return row?.n == null ? 0 : Number(row.n);
  }

  /** Daily totals since `fromDay` (oldest first) and the lifetime total. */
  async usage(userId: string, fromDay: string): Promise<{ days: Array<{ day: string; tokens: number }>; lifetime: number; peak: number }> {
    const days = await this.sql<{ day: string; tokens: number }[]>`
      select to_char(day, 'YYYY-MM-DD') as day, input_tokens + output_tokens as tokens from user_token_usage
      where user_id = ${userId} and day >= ${fromDay} order by day`;
    const [all] = await this.sql<{ lifetime: number | null; peak: number | null }[]>`
      select sum(input_tokens + output_tokens) as lifetime, max(input_tokens + output_tokens) as peak
      from user_token_usage where user_id = ${userId}`;
    return { days: days.map((d) => ({ day: d.day, tokens: Number(d.tokens) })), lifetime: Number(all?.lifetime ?? 0), peak: Number(all?.peak ?? 0) };
  }

  /**
   * Takes one of the user's `limit` turn slots for `processId`, or returns null when all are held
   * (by live processes: slots of processes whose heartbeat expired are freed first). Two callers
   * racing for one slot cannot both get it (the primary key); the loser tries the next.
   */
  async takeSlot(userId: string, limit: number, processId: string): Promise<number | null> {
    await this.sql`
      delete from user_turn_slots s where s.user_id = ${userId}
        and not exists (select 1 from processes p where p.id = s.process_id and p.expires_at > now())`;
    for (let attempt = 0; attempt < limit; attempt++) {
      const [row] = await this.sql<{ slot: number }[]>`
        insert into user_turn_slots (user_id, slot, process_id, acquired_at_ms)
        select ${userId}, s, ${processId}, ${Date.now()} from generate_series(0, ${limit - 1}) s
        where not exists (select 1 from user_turn_slots x where x.user_id = ${userId} and x.slot = s)
        order by s limit 1
        on conflict do nothing
        returning slot`;
      if (row) return row.slot;
      const [held] = await this.sql<{ n: number }[]>`select count(*)::int as n from user_turn_slots where user_id = ${userId} and slot < ${limit}`;
      if ((held?.n ?? 0) >= limit) return null;
    }
    return null;
  }

  async setSlotTurn(userId: string, slot: number, turnId: string): Promise<void> {
    await this.sql`update user_turn_slots set turn_id = ${turnId} where user_id = ${userId} and slot = ${slot}`;
  }

  async releaseSlot(userId: string, slot: number, processId: string): Promise<void> {
    await this.sql`delete from user_turn_slots where user_id = ${userId} and slot = ${slot} and process_id = ${processId}`;
  }

  /** Turns in progress on the user's threads (every process). */
  async runningTurns(userId: string): Promise<number> {
    const [row] = await this.sql<{ n: number }[]>`
      select count(*)::int as n from turns t join threads th on th.id = t.thread_id
      where th.user_id = ${userId} and t.status = 'inProgress'`;
    return row?.n ?? 0;
  }

  /** Frees every slot this process holds (at shutdown). */
  async releaseAll(processId: string): Promise<void> {
    await this.sql`delete from user_turn_slots where process_id = ${processId}`;
  }
}
