/** Thread rows and the per-thread event log. All SQL for threads lives here. */
import type { JSONValue, PendingQuery, ReservedSql, Row, Sql, TransactionSql } from "postgres";
import type { ThreadSortKey } from "../protocol/thread.js";
import type { NewThread, StoredEvent, ThreadRecord } from "./records.js";
import type { SideWrites } from "./side-writes.js";
import { storableText } from "./text.js";
import { resolveItemRefs } from "./event-refs.js";
import { searchedPage, snippetsFor, type SearchMatch, type SearchSnippet } from "./thread-search.js";

export type Queryable = Sql | TransactionSql | ReservedSql;
type Fragment = PendingQuery<Row[]>;

export interface ThreadListQuery {
  limit: number;
  cursor: ThreadCursor | null;
  sortKey: ThreadSortKey;
  direction: "asc" | "desc";
  archived: boolean;
  cwds: string[] | null;
  searchTerm: string | null;
  modelProviders: string[] | null;
  /** Thread.source values to keep (null: all). */
  sources: string[] | null;
  matchesNothing?: boolean;
  includedIds: string[] | null;
  excludedIds: string[];
  /** Only threads this user owns or that are shared with it (null: every thread, for admins). */
  visibleTo?: string | null;
}

/** Keyset position: the sort value and id of a boundary row; `inclusive` for backwards cursors. */
export interface ThreadCursor {
  key: ThreadSortKey;
  value: number;
  id: string;
  inclusive?: boolean;
}

export interface ThreadListPage {
  rows: ThreadRecord[];
  /** Position of the last row when more rows follow. */
  next: ThreadCursor | null;
  /** Position of the first row (inclusive), for paging the other way. */
  backwards: ThreadCursor | null;
}

export interface ThreadSearchQuery {
  query: string;
  limit: number;
  /** Keyset position (updated_at_ms, id) of the previous page's last row. */
  cursor: { value: number; id: string } | null;
  archived: boolean;
  /** As ThreadListQuery.visibleTo. */
  visibleTo?: string | null;
}

export interface ThreadSearchPage {
  rows: { record: ThreadRecord; snippet: SearchSnippet | null }[];
  next: { value: number; id: string } | null;
}

type ThreadPatch = Partial<
  Pick<
    ThreadRecord,
    | "name"
    | "preview"
    | "archived"
    | "model"
    | "modelProvider"
    | "reasoningEffort"
    | "cwd"
    | "approvalPolicy"
    | "sandbox"
    | "sandboxPolicy"
    | "config"
    | "systemError"
    | "tokenUsage"
    | "updatedAtMs"
  >
>;

const json = (sql: Queryable, v: unknown) => sql.json(storableText(v) as JSONValue);

/** `insert into thread_events ${eventRows(...)}`: the rows of `events` (their stored form). */
function eventRows(q: Queryable, threadId: string, events: StoredEvent[]) {
  const rows = events.map((e) => ({
    thread_id: threadId,
    seq: e.seq,
    method: e.method,
    params: json(q, e.stored?.params ?? e.params),
    emitted_at_ms: e.emittedAtMs,
    item_ids: e.stored && e.stored.itemIds.length ? e.stored.itemIds : null,
  }));
  return q(rows as never[]);
}

/** The threads a non-admin user sees: its own and those shared with it (docs/teams.md). */
function visibleTo(sql: Queryable, userId: string | null | undefined): Fragment {
  if (userId == null) return sql``;
  return sql`and (user_id = ${userId} or id in (select thread_id from thread_shares where user_id = ${userId}))`;
}

export class ThreadStore {
  /** `sideWrites`: small writes that commit with the next recording transaction (side-writes.ts). */
  constructor(
    readonly sql: Sql,
    readonly sideWrites: SideWrites | null = null,
  ) {}

  transaction<T>(fn: (tx: TransactionSql) => Promise<T>): Promise<T> {
    return this.sql.begin(fn) as Promise<T>;
  }

  /** `ownerId`/`leaseEpoch`: the creating process holds the new thread's lease (leases.ts). */
  async insertThread(q: Queryable, t: NewThread & { seqReserved: number; ownerId?: string | null; leaseEpoch?: number }): Promise<void> {
    await q`
      insert into threads (
        id, session_id, forked_from_id, fork_parent_id, fork_turn_count, fork_message_count, name, preview, ephemeral,
        model_provider, model, reasoning_effort, cwd, approval_policy, sandbox, sandbox_policy, base_instructions,
        developer_instructions, dynamic_tools, config, cli_version, source, seq_reserved, created_at_ms, updated_at_ms,
        owner_id, lease_epoch, user_id
      ) values (
        ${t.id}, ${t.sessionId}, ${t.forkedFromId}, ${t.forkParentId}, ${t.forkTurnCount}, ${t.forkMessageCount}, ${t.name ?? null},
        ${t.preview ?? ""}, ${t.ephemeral}, ${t.modelProvider}, ${t.model}, ${t.reasoningEffort}, ${t.cwd},
        ${json(q, t.approvalPolicy)}, ${t.sandbox}, ${t.sandboxPolicy === null ? null : json(q, t.sandboxPolicy)}, ${t.baseInstructions}, ${t.developerInstructions},
        ${json(q, t.dynamicTools)}, ${t.config === null ? null : json(q, t.config)}, ${t.cliVersion}, ${t.source},
        ${t.seqReserved}, ${t.createdAtMs}, ${t.updatedAtMs}, ${t.ownerId ?? null}, ${t.leaseEpoch ?? 0}, ${t.userId}
      )`;
  }

  async getThread(id: string, q: Queryable = this.sql): Promise<ThreadRecord | null> {
    const rows = await q<ThreadRecord[]>`select * from threads where id = ${id}`;
    return rows[0] ?? null;
  }

  async updateThread(q: Queryable, id: string, patch: ThreadPatch): Promise<boolean> {
    const cols: Record<string, unknown> = {};
    const map: Record<keyof ThreadPatch, string> = {
      name: "name",
      preview: "preview",
      archived: "archived",
      model: "model",
      modelProvider: "model_provider",
      reasoningEffort: "reasoning_effort",
      cwd: "cwd",
      approvalPolicy: "approval_policy",
      sandbox: "sandbox",
      sandboxPolicy: "sandbox_policy",
      config: "config",
      systemError: "system_error",
      tokenUsage: "token_usage",
      updatedAtMs: "updated_at_ms",
    };
    for (const [k, v] of Object.entries(patch) as [keyof ThreadPatch, unknown][]) {
      if (v === undefined) continue;
      cols[map[k]] = (k === "approvalPolicy" || k === "tokenUsage" || k === "sandboxPolicy" || k === "config") && v !== null ? json(q, v) : v;
    }
    if (Object.keys(cols).length === 0) return true;
    const rows = await q`update threads set ${q(cols as Record<string, never>)} where id = ${id} returning id`;
    return rows.length === 1;
  }

  /** Raises the persisted sequence reservation (never lowers it). */
  /** `q`: the transaction to do it in; the store's own connection pool when absent. */
  async reserveSeq(q: Queryable | null, id: string, upTo: number): Promise<void> {
    q ??= this.sql;
    await q`update threads set seq_reserved = greatest(seq_reserved, ${upTo}) where id = ${id}`;
  }

  /** `ifAbsent`: events already stored under the same seq (an earlier try that did commit) are kept, not inserted again. */
  async insertEvents(q: Queryable, threadId: string, events: StoredEvent[], opts: { ifAbsent?: boolean } = {}): Promise<void> {
    if (events.length === 0) return;
    if (opts.ifAbsent) await q`insert into thread_events ${eventRows(q, threadId, events)} on conflict (thread_id, seq) do nothing`;
    else await q`insert into thread_events ${eventRows(q, threadId, events)}`;
  }

  /** Stored events as notifications: references to item rows replaced by the rows' payloads (event-refs.ts). */
  private async replayed(rows: Promise<Array<StoredEvent & { items: Record<string, unknown> | null }>>): Promise<StoredEvent[]> {
    return (await rows).map(({ items, ...e }) => (items ? { ...e, params: resolveItemRefs(e.params, items) as Record<string, unknown> } : e));
  }

  /** The highest stored seq of a thread (0 when none). */
  async maxEventSeq(threadId: string): Promise<number> {
    const [row] = await this.sql<{ n: number | null }[]>`select max(seq) as n from thread_events where thread_id = ${threadId}`;
    return row?.n == null ? 0 : Number(row.n);
  }

  /** The highest stored seq of each thread (0 when none): one index probe per thread. */
  async maxEventSeqs(threadIds: string[]): Promise<Map<string, number>> {
    if (threadIds.length === 0) return new Map();
    const rows = await this.sql<{ id: string; n: number | null }[]>`
      select x.id, (select max(e.seq) from thread_events e where e.thread_id = x.id) as n from unnest(${threadIds}::text[]) as x(id)`;
    return new Map(rows.map((r) => [r.id, r.n == null ? 0 : Number(r.n)]));
  }

  /** Stored events with afterSeq < seq <= upTo, in order. */
  async eventsBetween(threadId: string, afterSeq: number, upTo: number): Promise<StoredEvent[]> {
    return this.eventsWhere(threadId, afterSeq, this.sql`and seq <= ${upTo} order by seq`);
  }

  async listEvents(threadId: string, afterSeq: number, limit: number): Promise<StoredEvent[]> {
    return this.eventsWhere(threadId, afterSeq, this.sql`order by seq limit ${limit}`);
  }

  /** A thread's events after afterSeq, with the payloads of the items they refer to (event-refs.ts). */
  private eventsWhere(threadId: string, afterSeq: number, rest: PendingQuery<Row[]>): Promise<StoredEvent[]> {
    return this.replayed(this.sql`
      select seq, method, params, emitted_at_ms,
        case when e.item_ids is null then null else
          (select jsonb_object_agg(i.id, i.payload) from items i where i.id = any(e.item_ids)) end as items
      from thread_events e
      where thread_id = ${threadId} and seq > ${afterSeq} ${rest}`);
  }

  /**
   * Input tokens of the thread's last model call as its event log tells (0 when a compaction came
   * after it, or when there was none): what auto-compaction looks at when a thread is loaded again.
   */
  async lastInputTokens(threadId: string): Promise<number> {
    const [row] = await this.sql<{ method: string; params: { tokenUsage?: { last?: { inputTokens?: number } } } }[]>`
      select method, params from thread_events
      where thread_id = ${threadId}
        and (method = 'thread/tokenUsage/updated' or (method = 'item/completed' and coalesce(
          params->'item'->>'type', (select type from items where id = params->'item'->>'$item')) = 'contextCompaction'))
      order by seq desc limit 1`;
    return row?.method === "thread/tokenUsage/updated" ? (row.params.tokenUsage?.last?.inputTokens ?? 0) : 0;
  }

  async listThreads(query: ThreadListQuery): Promise<ThreadListPage> {
    const sql = this.sql;
    // recency_at is the last activity; section_position falls back to it (no thread has a section).
    const byUpdate = query.sortKey !== "created_at";
    const col = byUpdate ? sql`updated_at_ms` : sql`created_at_ms`;
    const desc = query.direction === "desc";
    const c = query.cursor;
    const after = c
      ? desc
        ? c.inclusive
          ? sql`and (${col}, id) <= (${c.value}, ${c.id})`
          : sql`and (${col}, id) < (${c.value}, ${c.id})`
        : c.inclusive
          ? sql`and (${col}, id) >= (${c.value}, ${c.id})`
          : sql`and (${col}, id) > (${c.value}, ${c.id})`
      : sql``;
    const order = desc ? sql`order by ${col} desc, id desc` : sql`order by ${col} asc, id asc`;
    const filtered = (cols: Fragment, extra: Fragment, limit = query.limit + 1) => sql`
      select ${cols} from threads
      where archived = ${query.archived} and not ephemeral
        ${query.cwds ? sql`and cwd in ${sql(query.cwds)}` : sql``}
        ${query.modelProviders && query.modelProviders.length > 0 ? sql`and model_provider in ${sql(query.modelProviders)}` : sql``}
        ${query.sources ? sql`and source in ${sql(query.sources)}` : sql``}
        ${query.matchesNothing ? sql`and false` : sql``}
        ${query.includedIds ? (query.includedIds.length ? sql`and id in ${sql(query.includedIds)}` : sql`and false`) : sql``}
        ${query.excludedIds.length ? sql`and id not in ${sql(query.excludedIds)}` : sql``}
        ${visibleTo(sql, query.visibleTo)}
        ${extra}
        ${after}
      ${order}
      limit ${limit}`;
    // Substring of name/preview (Codex's semantics) or a phrase in any message: thread-search.ts.
    const rows = (
      query.searchTerm
        ? await searchedPage(sql, { kind: "substring", term: query.searchTerm }, filtered, query.limit + 1)
        : await filtered(sql`*`, sql``)
    ) as ThreadRecord[];
    const more = rows.length > query.limit;
    const page = more ? rows.slice(0, query.limit) : [...rows];
    const pos = (r: ThreadRecord, inclusive?: boolean): ThreadCursor => ({
      key: query.sortKey,
      value: byUpdate ? r.updatedAtMs : r.createdAtMs,
      id: r.id,
      ...(inclusive ? { inclusive } : {}),
    });
    return {
      rows: page,
      next: more ? pos(page[page.length - 1]!) : null,
      backwards: page.length ? pos(page[0]!, true) : null,
    };
  }

  /**
   * thread/search: threads whose name, preview or user/agent messages match `query` (web-search
   * syntax, whole words), newest activity first, each with a snippet of where it matched.
   */
  async searchThreads(query: ThreadSearchQuery): Promise<ThreadSearchPage> {
    const sql = this.sql;
    const match: SearchMatch = { kind: "words", query: query.query };
    const c = query.cursor;
    const filtered = (cols: Fragment, extra: Fragment, limit = query.limit + 1) => sql`
      select ${cols} from threads
      where archived = ${query.archived} and not ephemeral
        ${visibleTo(sql, query.visibleTo)}
        ${extra}
        ${c ? sql`and (updated_at_ms, id) < (${c.value}, ${c.id})` : sql``}
      order by updated_at_ms desc, id desc
      limit ${limit}`;
    const rows = (await searchedPage(sql, match, filtered, query.limit + 1)) as ThreadRecord[];
    const more = rows.length > query.limit;
    const page = more ? rows.slice(0, query.limit) : [...rows];
    const snippets = await snippetsFor(sql, match, page.map((r) => r.id));
    const last = page[page.length - 1];
    return {
      rows: page.map((r) => ({ record: r, snippet: snippets.get(r.id) ?? null })),
      next: more && last ? { value: last.updatedAtMs, id: last.id } : null,
    };
  }

  /**
   * Ephemeral threads are kept only while their process runs. `unlessOwnedBy`: not while another
   * process holds the thread's lease (it is running a turn there).
   */
  async deleteThreads(ids: string[], owner?: string): Promise<void> {
    if (ids.length === 0) return;
    if (owner) await this.sql`delete from threads where id in ${this.sql(ids)} and (owner_id is null or owner_id = ${owner})`;
    else await this.sql`delete from threads where id in ${this.sql(ids)}`;
  }
}
