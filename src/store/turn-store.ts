/** Turns, items and the model-level history. All SQL for them lives here. */
import type { JSONValue, Sql } from "postgres";
import type { Message } from "../agent/messages.js";
import type { ThreadItem } from "../protocol/items.js";
import type { HistoryEntry } from "./history-entry.js";
import { storableText } from "./text.js";
import { itemColumns, type ItemRecord, type TurnRecord } from "./records.js";
import type { Queryable } from "./thread-store.js";
import { failedCheck } from "./transaction.js";

const json = (q: Queryable, v: unknown) => q.json(storableText(v) as JSONValue);

/** A turn's ending was recorded already (by another process, or the sweeper): not twice. */
export class TurnAlreadyEndedError extends Error {
  constructor(readonly turnId: string) {
    super(`turn ${turnId} has ended already`);
    this.name = "TurnAlreadyEndedError";
  }
}

export class TurnStore {
  constructor(readonly sql: Sql) {}

  /** A turn's stored items, in order (the payloads as recorded). */
  async itemsOfTurn(turnId: string): Promise<ThreadItem[]> {
    const rows = await this.sql<Array<{ payload: ThreadItem }>>`select payload from items where turn_id = ${turnId} order by ordinal`;
    return rows.map((r) => r.payload);
  }

  async insertTurn(q: Queryable, t: Omit<TurnRecord, "completedAtMs" | "rolledBack" | "stopReason" | "error">): Promise<void> {
    await q`
      insert into turns (id, thread_id, ordinal, status, client_user_message_id, started_at_ms)
      values (${t.id}, ${t.threadId}, ${t.ordinal}, ${t.status}, ${t.clientUserMessageId}, ${t.startedAtMs})`;
  }

  /**
   * Records how a turn ended. Only a turn still in progress ends, once: the row lock of the
   * UPDATE makes a second ending (another process's sweeper, a process that lost the thread)
   * fail with TurnAlreadyEndedError, which aborts its transaction and every event in it.
   */
  async finishTurn(q: Queryable, id: string, f: Pick<TurnRecord, "status" | "stopReason" | "error" | "completedAtMs">): Promise<void> {
    // The check fails in SQL (transaction.ts failedCheck): a pipelined COMMIT may follow at once.
    try {
      await q`
        with ended as (
          update turns set status = ${f.status}, stop_reason = ${f.stopReason},
            error = ${f.error === null ? null : json(q, f.error)}, completed_at_ms = ${f.completedAtMs}
          where id = ${id} and status = 'inProgress' returning 1)
        select (case when count(*) = 1 then '1' else 'aas: turn ended already' end)::int as ok from ended`;
    } catch (err) {
      if (failedCheck(err, "aas: turn ended already")) throw new TurnAlreadyEndedError(id);
      throw err;
    }
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

  async insertItem(q: Queryable, i: Omit<ItemRecord, "completedAtMs"> & { completedAtMs?: number | null; callId?: string | null }): Promise<void> {
    await q`
      insert into items (id, thread_id, turn_id, ordinal, type, status, payload, started_at_ms, completed_at_ms, call_id)
      values (${i.id}, ${i.threadId}, ${i.turnId}, ${i.ordinal}, ${i.type}, ${i.status}, ${json(q, i.payload)}, ${i.startedAtMs}, ${i.completedAtMs ?? null}, ${i.callId ?? null})`;
  }

  /** Marks an item as waiting on a server request (null: no longer waiting). */
  async setPendingRequest(q: Queryable, itemId: string, request: { method: string; params: object } | null): Promise<void> {
    await q`update items set pending_request = ${request === null ? null : json(q, request)} where id = ${itemId}`;
  }

  async countItems(turnId: string): Promise<number> {
    const [row] = await this.sql<{ n: number }[]>`select coalesce(max(ordinal) + 1, 0)::int as n from items where turn_id = ${turnId}`;
    return row!.n;
  }

  /** Model call ids of every tool item a thread recorded as started (repair: "outcome unknown"). */
  async threadStartedCallIds(threadId: string): Promise<Set<string>> {
    const rows = await this.sql<{ callId: string }[]>`select call_id from items where thread_id = ${threadId} and call_id is not null`;
    return new Set(rows.map((r) => r.callId));
  }

  /** Call ids of a turn's tool items (calls that had started). */
  async startedCallIds(turnId: string): Promise<Set<string>> {
    const rows = await this.sql<{ callId: string }[]>`select call_id from items where turn_id = ${turnId} and call_id is not null`;
    return new Set(rows.map((r) => r.callId));
  }

  async completeItem(q: Queryable, id: string, payload: ThreadItem, status: string | null, completedAtMs: number): Promise<void> {
    await q`update items set payload = ${json(q, payload)}, status = ${status}, completed_at_ms = ${completedAtMs} where id = ${id}`;
  }

  /** Appends entries to a thread's own history log (`ordinal` = position in that log). */
  async appendHistory(q: Queryable, threadId: string, rows: Array<{ ordinal: number; turnId: string | null; entry: HistoryEntry }>): Promise<void> {
    if (rows.length === 0) return;
    await q`insert into model_messages ${q(
      rows.map(({ ordinal, turnId, entry }) => ({
        thread_id: threadId,
        ordinal,
        turn_id: turnId,
        turn_ordinal: entry.kind === "message" ? entry.turnOrdinal : null,
        kind: entry.kind,
        message: json(q, entry.kind === "message" ? entry.message : entry),
      })) as never[],
    )}`;
  }

  /**
   * The thread's whole history log: its ancestors' logs up to each fork point, then its own.
   * Walking the ancestry is how a fork reads history it never copied (DESIGN.md §6).
   */
  async historyEntries(threadId: string): Promise<HistoryEntry[]> {
    const chain = await this.ancestry(threadId);
    const out: HistoryEntry[] = [];
    for (const { id, limit } of chain) {
      const rows = await this.sql<{ kind: HistoryEntry["kind"]; turnOrdinal: number | null; message: Message & HistoryEntry }[]>`
        select kind, turn_ordinal, message from model_messages
        where thread_id = ${id} ${limit === null ? this.sql`` : this.sql`and ordinal < ${limit}`}
        order by ordinal`;
      for (const r of rows) out.push(r.kind === "message" ? { kind: "message", turnOrdinal: r.turnOrdinal, message: r.message } : (r.message as HistoryEntry));
    }
    return out;
  }

  /**
   * The thread and its ancestors, oldest first, each with how much of its own log and turns the
   * next one down the chain sees (null: all of it, for the thread itself).
   */
  async ancestry(threadId: string): Promise<Array<{ id: string; limit: number | null; turnLimit: number | null; forkedAtMs: number | null }>> {
    const chain: Array<{ id: string; limit: number | null; turnLimit: number | null; forkedAtMs: number | null }> = [];
    let id: string | null = threadId;
    let limit: number | null = null;
    let turnLimit: number | null = null;
    let forkedAtMs: number | null = null;
    while (id) {
      const rows: Array<{ forkedFromId: string | null; forkMessageCount: number | null; forkTurnCount: number | null; createdAtMs: number }> = await this
        .sql`select coalesce(fork_parent_id, forked_from_id) as forked_from_id, fork_message_count, fork_turn_count, created_at_ms from threads where id = ${id}`;
      const row = rows[0];
      if (!row) break;
      chain.unshift({ id, limit, turnLimit, forkedAtMs });
      limit = row.forkMessageCount;
      turnLimit = row.forkTurnCount;
      forkedAtMs = row.createdAtMs;
      id = row.forkedFromId;
    }
    return chain;
  }

  /** Ordinal of the first log entry of a turn after `turnOrdinal` in a thread's own log, or null. */
  async firstEntryAfterTurn(threadId: string, turnOrdinal: number): Promise<number | null> {
    const [row] = await this.sql<{ n: number | null }[]>`
      select min(ordinal)::int as n from model_messages where thread_id = ${threadId} and turn_ordinal > ${turnOrdinal}`;
    return row?.n ?? null;
  }

  async countModelMessages(threadId: string): Promise<number> {
    const [row] = await this.sql<{ n: number }[]>`select coalesce(max(ordinal) + 1, 0)::int as n from model_messages where thread_id = ${threadId}`;
    return row!.n;
  }

  /**
   * Turns and items as a client sees the thread: its ancestors' turns up to each fork point
   * (items that started before the fork; a turn still running then shows as interrupted), then
   * its own.
   */
  async turnsWithItems(threadId: string): Promise<{ turns: TurnRecord[]; items: ItemRecord[] }> {
    const turns: TurnRecord[] = [];
    const items: ItemRecord[] = [];
    for (const { id, turnLimit, forkedAtMs } of await this.ancestry(threadId)) {
      const own = await this.sql<TurnRecord[]>`
        select * from turns where thread_id = ${id} ${turnLimit === null ? this.sql`` : this.sql`and ordinal < ${turnLimit}`} order by ordinal`;
      const ownItems = await this.sql<ItemRecord[]>`
        select ${this.sql.unsafe(itemColumns())} from items where thread_id = ${id}
          ${forkedAtMs === null ? this.sql`` : this.sql`and started_at_ms <= ${forkedAtMs}`}
        order by turn_id, ordinal`;
      for (const t of own) {
        if (forkedAtMs !== null && (t.completedAtMs === null || t.completedAtMs > forkedAtMs)) {
          turns.push({ ...t, status: "interrupted", stopReason: "interrupted", completedAtMs: forkedAtMs });
        } else turns.push(t);
      }
      items.push(...ownItems);
    }
    return { turns, items };
  }
}
