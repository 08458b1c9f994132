/** Turns, items and the model-level history. All SQL for them lives here. */
import type { JSONValue, Sql } from "postgres";
import type { Message } from "../agent/messages.js";
import type { ThreadItem } from "../protocol/items.js";
import type { ItemRecord, ModelMessageRecord, TurnRecord } from "./records.js";
import type { Queryable } from "./thread-store.js";

const json = (q: Queryable, v: unknown) => q.json(v as JSONValue);

export class TurnStore {
  constructor(readonly sql: Sql) {}

  async insertTurn(q: Queryable, t: Omit<TurnRecord, "completedAtMs" | "rolledBack" | "stopReason" | "error">): Promise<void> {
    await q`
      insert into turns (id, thread_id, ordinal, status, client_user_message_id, started_at_ms)
      values (${t.id}, ${t.threadId}, ${t.ordinal}, ${t.status}, ${t.clientUserMessageId}, ${t.startedAtMs})`;
  }

  async finishTurn(q: Queryable, id: string, f: Pick<TurnRecord, "status" | "stopReason" | "error" | "completedAtMs">): Promise<void> {
    await q`
      update turns set status = ${f.status}, stop_reason = ${f.stopReason},
        error = ${f.error === null ? null : json(q, f.error)}, completed_at_ms = ${f.completedAtMs}
      where id = ${id}`;
  }

  async countTurns(threadId: string): Promise<number> {
    const [row] = await this.sql<{ n: number }[]>`select count(*)::int as n from turns where thread_id = ${threadId}`;
    return row!.n;
  }

  async findTurnByClientMessageId(threadId: string, clientUserMessageId: string): Promise<TurnRecord | null> {
    const rows = await this.sql<TurnRecord[]>`
      select * from turns where thread_id = ${threadId} and client_user_message_id = ${clientUserMessageId}`;
    return rows[0] ?? null;
  }

  async getTurn(id: string): Promise<TurnRecord | null> {
    const rows = await this.sql<TurnRecord[]>`select * from turns where id = ${id}`;
    return rows[0] ?? null;
  }

  async insertItem(q: Queryable, i: Omit<ItemRecord, "completedAtMs">): Promise<void> {
    await q`
      insert into items (id, thread_id, turn_id, ordinal, type, status, payload, started_at_ms)
      values (${i.id}, ${i.threadId}, ${i.turnId}, ${i.ordinal}, ${i.type}, ${i.status}, ${json(q, i.payload)}, ${i.startedAtMs})`;
  }

  async completeItem(q: Queryable, id: string, payload: ThreadItem, status: string | null, completedAtMs: number): Promise<void> {
    await q`update items set payload = ${json(q, payload)}, status = ${status}, completed_at_ms = ${completedAtMs} where id = ${id}`;
  }

  async insertModelMessages(q: Queryable, threadId: string, rows: ModelMessageRecord[]): Promise<void> {
    if (rows.length === 0) return;
    await q`insert into model_messages ${q(
      rows.map((r) => ({ thread_id: threadId, ordinal: r.ordinal, turn_id: r.turnId, message: json(q, r.message) })) as never[],
    )}`;
  }

  /** The thread's own model history in order (forks add their ancestry in the runtime). */
  async modelHistory(threadId: string): Promise<Message[]> {
    const rows = await this.sql<{ message: Message }[]>`
      select m.message from model_messages m
      left join turns t on t.id = m.turn_id
      where m.thread_id = ${threadId} and coalesce(t.rolled_back, false) = false
      order by m.ordinal`;
    return rows.map((r) => r.message);
  }

  async countModelMessages(threadId: string): Promise<number> {
    const [row] = await this.sql<{ n: number }[]>`select coalesce(max(ordinal) + 1, 0)::int as n from model_messages where thread_id = ${threadId}`;
    return row!.n;
  }

  async turnsWithItems(threadId: string): Promise<{ turns: TurnRecord[]; items: ItemRecord[] }> {
    const turns = await this.sql<TurnRecord[]>`select * from turns where thread_id = ${threadId} order by ordinal`;
    const items = await this.sql<ItemRecord[]>`select * from items where thread_id = ${threadId} order by turn_id, ordinal`;
    return { turns, items };
  }
}
