/**
 * Paged reads of a thread's turns and items (thread/turns/list, thread/items/list, resume's first
 * page). They touch only the rows of one page, so their cost does not grow with the thread; the
 * whole-thread reads (TurnStore.turnsWithItems) remain for thread/read includeTurns.
 */
import type { Sql } from "postgres";
import { itemColumns, type ItemRecord, type TurnRecord } from "./records.js";

/** One thread of a fork chain: its turns up to `turnLimit`, as of `forkedAtMs` (null: the thread itself). */
export interface ChainLink {
  id: string;
  turnLimit: number | null;
  forkedAtMs: number | null;
}

export class HistoryPages {
  constructor(readonly sql: Sql) {}

  /** `limit` turns of the chain after (asc) or before (desc) turn ordinal `from` (exclusive; null: from the end). */
  async turns(chain: ChainLink[], from: number | null, direction: "asc" | "desc", limit: number): Promise<Array<TurnRecord & { link: ChainLink }>> {
    const sql = this.sql;
    const scope = chain.map((l) => (l.turnLimit === null ? sql`(thread_id = ${l.id})` : sql`(thread_id = ${l.id} and ordinal < ${l.turnLimit})`));
    let where = scope[0]!;
    for (const s of scope.slice(1)) where = sql`${where} or ${s}`;
    const rows = await sql<TurnRecord[]>`
      select * from turns where (${where})
        ${from === null ? sql`` : direction === "asc" ? sql`and ordinal > ${from}` : sql`and ordinal < ${from}`}
      order by ordinal ${direction === "asc" ? sql`asc` : sql`desc`} limit ${limit}`;
    return rows.map((t) => ({ ...t, link: chain.find((l) => l.id === t.threadId)! }));
  }

  /** Items of these turns, in turn then item order (a forked view keeps items started before the fork). */
  async itemsOf(turns: Array<TurnRecord & { link: ChainLink }>): Promise<ItemRecord[]> {
    if (turns.length === 0) return [];
    const rows = await this.sql<ItemRecord[]>`select ${this.sql.unsafe(itemColumns())} from items where turn_id in ${this.sql(turns.map((t) => t.id))} order by turn_id, ordinal`;
    const cut = new Map(turns.map((t) => [t.id, t.link.forkedAtMs]));
    return rows.filter((i) => {
      const at = cut.get(i.turnId);
      return at === null || at === undefined || i.startedAtMs <= at;
    });
  }

  /** Rollback markers in the chain's history logs (each link's log up to its fork point). */
  async hasRollbacks(chain: Array<{ id: string; limit: number | null }>): Promise<boolean> {
    for (const l of chain) {
      const [row] = await this.sql<{ n: number }[]>`
        select count(*)::int as n from model_messages
        where thread_id = ${l.id} and kind = 'rollback' ${l.limit === null ? this.sql`` : this.sql`and ordinal < ${l.limit}`}`;
      if (row!.n > 0) return true;
    }
    return false;
  }

  async item(itemId: string): Promise<(ItemRecord & { turnOrdinal: number }) | null> {
    const rows = await this.sql<Array<ItemRecord & { turnOrdinal: number }>>`
      select ${this.sql.unsafe(itemColumns("i"))}, t.ordinal as turn_ordinal from items i join turns t on t.id = i.turn_id where i.id = ${itemId}`;
    return rows[0] ?? null;
  }
}
