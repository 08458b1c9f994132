/**
 * Search over thread names, previews and every user/agent message (migrations/004_full_text_search.sql;
 * a message is indexed by its first 100 000 characters, 007_search_text_bound.sql; since
 * 008_search_words_column.sql each message keeps its tsvector in `items.search_words`, which the
 * GIN index holds and a per-row test reads instead of recomputing it).
 *
 * A thread matches by its own name/preview or by its messages. The order of a page is always the
 * listing's (thread/search: newest activity first), whichever way it is found (searchedPage):
 * - walks, when the planner's statistics say the term is in many messages (messageHitEstimate; a
 *   rare or unknown word skips them): the newest WALK_FIRST threads of the listing are tested one
 *   by one (name/preview, then each message's stored words), stopping at a page; a word in many
 *   messages (1 in 8) fills it within a few dozen threads. When it found no page, either a second
 *   walk (≤ WALK_MORE threads, sized by the density seen), or — when reading the matching
 *   messages costs less than walking on would (a word in thousands of messages of few threads;
 *   FETCH_ROW_COST) — the hit queries, reading up to HIT_FETCH_MAX matching messages for their
 *   threads;
 * - otherwise, per branch, from how many rows match (the hit queries: ≤ HIT_LIMITS rows from the
 *   GIN indexes): few hits — fetch those thread ids, then sort just them (a term that matches
 *   nothing costs two index probes); many hits — walk the threads in listing order and test each
 *   one, which stops after a page because matches are dense.
 * What a search reads is bounded by the walks (≤ WALK_FIRST + WALK_MORE threads) and by the
 * matching messages (≤ HIT_FETCH_MAX rows) except in one case: a term the statistics put in more
 * than HIT_FETCH_MAX messages that the newest WALK_FIRST + WALK_MORE threads of the listing hardly
 * have (e.g. a word frequent a year ago only): the last per-row walk goes on until a page (or the
 * end of the listing).
 * Postgres alone picks badly here (a hashed subplan over every matching item, or a hash join that
 * reads all threads), so the choice is made with the hit queries' row counts.
 */
import type { PendingQuery, Row, Sql } from "postgres";

/**
 * Above this many matching rows the walk is cheaper than sorting the hits. A walk step costs an
 * ILIKE for names/previews and ~10 stored-tsvector tests for messages (before migration 008: ~10
 * to_tsvector calls, hence the two limits; kept as they were).
 */
export const HIT_LIMITS = { own: 600, messages: 2000 };

/**
 * `substring`: thread/list's searchTerm — Codex's case-insensitive substring match on name and
 * preview, plus the term as a phrase of whole words in any user/agent message.
 * `words`: thread/search's query — web-search syntax ("quoted phrase", or, -word) over words of
 * the name, preview and messages.
 */
export type SearchMatch = { kind: "substring"; term: string } | { kind: "words"; query: string };

type Fragment = PendingQuery<Row[]>;

/** Escapes LIKE wildcards so a search term matches literally. */
const likeLiteral = (s: string) => s.replace(/[\\%_]/g, (c) => `\\${c}`);

// The expressions below must stay textually identical to the index definitions of the migrations
// (004 for threads; items: the search_words column of 008), or the planner cannot use the indexes.
export function tsQuery(sql: Sql, m: SearchMatch): Fragment {
  return m.kind === "substring" ? sql`phraseto_tsquery('simple'::regconfig, ${m.term})` : sql`websearch_to_tsquery('simple'::regconfig, ${m.query})`;
}

/** Threads whose own text matches (unqualified columns of `threads`); `indexed`: with the trigram prefilter. */
export function threadCondition(sql: Sql, m: SearchMatch, indexed: boolean): Fragment {
  if (m.kind === "words") return sql`to_tsvector('simple'::regconfig, thread_search_text(name, preview)) @@ ${tsQuery(sql, m)}`;
  const like = "%" + likeLiteral(m.term) + "%";
  const ilike = sql`(name ilike ${like} or preview ilike ${like})`;
  // Shorter terms have no trigram: the index cannot narrow them (as with pg_trgm).
  // The trigrams of a prefix of the term are a subset of the term's: still a sound prefilter, and
  // text_trigrams is quadratic in the length of UTF-8 text (substr scans from the start).
  const prefix = Array.from(m.term).slice(0, TRIGRAM_PREFIX).join("");
  return indexed && m.term.length >= 3 ? sql`text_trigrams(lower(thread_search_text(name, preview))) @> text_trigrams(lower(${prefix})) and ${ilike}` : ilike;
}

/** Characters of a searchTerm whose trigrams narrow the candidates. */
const TRIGRAM_PREFIX = 64;
/** Longer searchTerms are not looked for in messages (a phrase of hundreds of words is no search). */
export const MESSAGE_TERM_MAX = 1000;

/** Message items that match, on a table aliased `alias`. */
export function itemCondition(sql: Sql, m: SearchMatch, alias: string): Fragment {
  if (m.kind === "substring" && m.term.length > MESSAGE_TERM_MAX) return sql`false`;
  const a = sql.unsafe(alias);
  // search_words: the message's stored tsvector (migration 008), what the GIN index holds.
  return sql`${a}.type in ('userMessage', 'agentMessage') and ${a}.search_words @@ ${tsQuery(sql, m)}`;
}

/**
 * The same test as itemCondition in a form no index can answer (`is true` around the match), for
 * testing the messages of given threads: otherwise Postgres may AND the thread's rows with the GIN
 * bitmap of every matching message (~30 ms for a word in 1 of 8 of 1M messages, where reading a
 * thread's ~10 rows through items_by_thread costs µs).
 */
export function itemTest(sql: Sql, m: SearchMatch, alias: string): Fragment {
  if (m.kind === "substring" && m.term.length > MESSAGE_TERM_MAX) return sql`false`;
  const a = sql.unsafe(alias);
  return sql`${a}.type in ('userMessage', 'agentMessage') and (${a}.search_words @@ ${tsQuery(sql, m)}) is true`;
}

/**
 * The ways a thread can match, each as a condition to add to `select … from threads where …`:
 * its own name/preview, or its messages. Each is either the ids of its few matching threads or a
 * per-row test (many matches: the walk in listing order stops after a page). Two branches rather
 * than one OR, so that a term frequent in previews does not test every thread's messages per row.
 * `ids`: when every branch is a list of ids, their union (one query can then fetch the page).
 */
export async function searchBranches(sql: Sql, m: SearchMatch, limits = HIT_LIMITS): Promise<{ branches: Fragment[]; ids: string[] | null }> {
  // Distinct ids and the number of rows read, in one row: up to HIT_FETCH_MAX message rows may
  // be read (a word in thousands of messages of few threads), and only their threads come back.
  const hits = (rows: Fragment) => sql<{ ids: string[] | null; n: number }[]>`select array_agg(distinct id) as ids, count(*)::int as n from (${rows}) h`;
  // (Wrapped: a fragment is thenable, and an async function would run it as a query.)
  const [[own], [inMessages]] = await Promise.all([
    hits(sql`select id from threads where ${threadCondition(sql, m, true)} limit ${limits.own + 1}`),
    hits(sql`select i.thread_id as id from items i where ${itemCondition(sql, m, "i")} limit ${limits.messages + 1}`),
  ]);
  const listed = (hit: { ids: string[] | null; n: number } | undefined, limit: number) => (!hit || hit.n === 0 || !hit.ids ? [] : hit.n <= limit ? hit.ids : null);
  const ownIds = listed(own, limits.own);
  const messageIds = listed(inMessages, limits.messages);
  const branch = (ids: string[] | null, perRow: () => Fragment): Fragment[] =>
    ids === null ? [perRow()] : ids.length === 0 ? [] : [sql`and id = any(${sql.array(ids)}::text[])`];
  return {
    // Every branch a list (or none): their union, which holds the page.
    ids: ownIds && messageIds ? [...new Set([...ownIds, ...messageIds])] : null,
    branches: [
      ...branch(ownIds, () => sql`and ${threadCondition(sql, m, false)}`),
      // `offset 0` keeps the subquery per row: otherwise Postgres hashes every matching item first.
      ...branch(messageIds, () => sql`and exists (select 1 from items i where i.thread_id = threads.id and ${itemTest(sql, m, "i")} offset 0)`),
    ],
  };
}

/**
 * How many threads of the listing the first walk tests before the hit queries run. A word in many
 * messages fills a page within a few dozen threads, and then the hit queries are the dearest part:
 * a GIN bitmap of every matching message (125 000 for "deadlock" at 1M items) is built before any
 * row comes out (~9 ms). A term that does not fill the page this early pays this walk (~1 µs a
 * message with the stored tsvector) on top of the hit queries.
 */
export const WALK_FIRST = 128;
/**
 * When the first walk found no page, a second walk over up to this many threads (twice what a page
 * needs at the density seen): an AND of two frequent words ("parser deadlock -timeout", 1 thread
 * in 11) needs ~280 threads, and the hit query's GIN AND of two long posting lists alone took
 * ~10 ms. Bounded: a term frequent in messages but not in the newest threads of this listing
 * costs at most this walk (~10 ms on Postgres) before the hit queries.
 */
export const WALK_MORE = 1024;

/**
 * Above this many matching messages their threads are not fetched from the index, whatever the
 * walks saw: each matching message is a read of its row (its thread id), so this bounds that
 * work (~20 000 rows: ~20 ms on Postgres with the rows cached). Between HIT_LIMITS.messages and
 * this, the ids are fetched when that costs less than walking on would (searchedPage).
 */
export const HIT_FETCH_MAX = 20_000;
/**
 * Message rows a walk reads per thread tested, for comparing a walk with fetching the matching
 * messages' threads (10 in the bench's data; one index descent plus the thread's messages).
 */
const WALK_ROWS_PER_THREAD = 10;
/**
 * What one fetched matching message costs in rows of a walk. A walk reads the newest threads'
 * rows, which every search reads and the buffers keep; the matching messages of a word lie on
 * pages of their own all over the table, mostly not in the buffers. At 1M messages on Postgres
 * (EXPLAIN ANALYZE, BUFFERS): a walk of 609 threads 8 800 buffers, nearly all hits; a fetch of
 * 10 180 matching messages 9 800 buffers, nearly all reads, and several times slower.
 */
const FETCH_ROW_COST = 4;

/** What the planner expects of a term in messages (planner statistics only, nothing is read). */
export interface MessageHitEstimate {
  /** Matching messages. */
  hits: number;
  /**
   * More than HIT_LIMITS.messages and more than the planner assumes for a word it has no
   * statistics of (0.5 % of the messages: a word outside the column's most common elements, or
   * any word before the first ANALYZE). The walks run first only then: on PGlite (16 MB of
   * buffers) walking 128 threads' scattered messages before the hit queries cost a word of 1 000
   * messages (1 thread in 100) ~10 ms more.
   */
  many: boolean;
}

/**
 * Estimates kept for a while, by query: EXPLAIN costs ~0.3–2 ms and a round trip, and a search
 * asks twice (its page, then its snippets), a client paging or typing asks again. They change
 * only with the statistics (ANALYZE); a stale one only changes the order of work, never a result.
 */
const ESTIMATE_TTL_MS = 30_000;
const ESTIMATES_KEPT = 256;
const estimates = new WeakMap<Sql, Map<string, { at: number; value: Promise<MessageHitEstimate> }>>();

/**
 * The planner's estimate of the term's matching messages (EXPLAIN with the query's value, and of
 * all messages); cached per database handle for ESTIMATE_TTL_MS.
 */
export function messageHitEstimate(sql: Sql, m: SearchMatch): Promise<MessageHitEstimate> {
  let byQuery = estimates.get(sql);
  if (!byQuery) estimates.set(sql, (byQuery = new Map()));
  const key = `${m.kind}\u0000${m.kind === "words" ? m.query : m.term}`;
  const now = Date.now();
  const kept = byQuery.get(key);
  if (kept && now - kept.at < ESTIMATE_TTL_MS) return kept.value;
  const value = estimateMessageHits(sql, m);
  byQuery.delete(key);
  byQuery.set(key, { at: now, value });
  // A failed EXPLAIN is not kept.
  value.catch(() => byQuery.get(key)?.value === value && byQuery.delete(key));
  // Oldest first in a Map's order: drop beyond the bound.
  for (const k of byQuery.keys()) {
    if (byQuery.size <= ESTIMATES_KEPT) break;
    byQuery.delete(k);
  }
  return value;
}

async function estimateMessageHits(sql: Sql, m: SearchMatch): Promise<MessageHitEstimate> {
  const planRows = async (q: Fragment): Promise<number> => {
    const [row] = await sql`explain (format json) ${q}`;
    let plan = row ? Object.values(row)[0] : null;
    if (typeof plan === "string") plan = JSON.parse(plan);
    const n = (plan as { Plan?: { "Plan Rows"?: number } }[] | null)?.[0]?.Plan?.["Plan Rows"];
    return typeof n === "number" ? n : 0;
  };
  const [hits, messages] = await Promise.all([
    planRows(sql`select 1 from items i where ${itemCondition(sql, m, "i")}`),
    planRows(sql`select 1 from items i where i.type in ('userMessage', 'agentMessage')`),
  ]);
  return { hits, many: hits > HIT_LIMITS.messages && hits > 0.0051 * messages };
}

/**
 * `select cols from threads where <the caller's filters> extra <cursor> order by <listing order>
 * limit n` (n defaults to the page size + 1).
 */
export type ListingQuery = (cols: Fragment, extra: Fragment, limit?: number) => Fragment;

/**
 * One page of matching threads, as `listing(*)` rows in listing order (at most `pageRows`). The
 * same page whichever way it is found; the ways differ in what they read:
 * - a walk: the newest threads of the listing tested one by one (name/preview, then each message's
 *   stored words via items_by_thread), as one query returning the page's rows. It runs first when
 *   many messages may match (`always`: regardless): WALK_FIRST threads, then, when that found no
 *   page, either a second walk (≤ WALK_MORE threads, sized by the density seen) or, when fetching
 *   the matching messages' threads costs less than walking on would (a word in thousands of
 *   messages of few threads), straight to the hit queries with up to HIT_FETCH_MAX message rows;
 * - the hit queries (searchBranches): per way of matching, the matching threads' ids from the GIN
 *   indexes, or a per-row test when there are too many. When every branch is a list of ids, the
 *   page is one query over their union; otherwise the page of each branch (ids only, same filters,
 *   order and limit), then the rows of their union in that order and limit — the union of each
 *   branch's first page holds the first page of the union.
 * `estimate`: instead of messageHitEstimate's (tests choose the ways with it).
 */
export async function searchedPage(
  sql: Sql,
  m: SearchMatch,
  listing: ListingQuery,
  pageRows: number,
  {
    walkFirst = WALK_FIRST,
    walkMore = WALK_MORE,
    always = false,
    hitFetchMax = HIT_FETCH_MAX,
    estimate: given,
  }: { walkFirst?: number; walkMore?: number; always?: boolean; hitFetchMax?: number; estimate?: MessageHitEstimate } = {},
): Promise<Row[]> {
  const rowsOf = async (ids: string[]) => (await listing(sql`*`, sql`and id = any(${sql.array(ids)}::text[])`, pageRows)) as Row[];
  // The subquery's order stays (a LIMIT subquery is not flattened; the filter keeps the order).
  const walk = async (threads: number) =>
    (await sql`
        select w.* from (${listing(sql`*`, sql``, threads)}) w
        where ${threadCondition(sql, m, false)}
          or exists (select 1 from items i where i.thread_id = w.id and ${itemTest(sql, m, "i")} offset 0)
        limit ${pageRows}`) as Row[];
  const estimate = given ?? (await messageHitEstimate(sql, m));
  // Without walks (a term the statistics put in few messages): rather read its matching messages
  // (≤ HIT_FETCH_MAX) than test threads one by one, which is unbounded when they are far apart.
  let messageLimit = hitFetchMax;
  // Fetching every matching message's thread reads `estimate.hits` rows; walking on reads the
  // threads still needed for a page at the density seen (`found` of `walked`).
  const fetchIsCheaper = (found: number, walked: number) =>
    estimate.hits <= hitFetchMax && estimate.hits * FETCH_ROW_COST < (found > 0 ? (walked * (pageRows - found)) / found : Infinity) * WALK_ROWS_PER_THREAD;
  if (walkFirst > 0 && (always || estimate.many)) {
    const early = await walk(walkFirst);
    if (early.length >= pageRows) return early;
    messageLimit = HIT_LIMITS.messages;
    if (fetchIsCheaper(early.length, walkFirst)) messageLimit = hitFetchMax;
    else {
      // At the density seen, twice the threads a page needs; as far as WALK_MORE when none was seen.
      const more = Math.min(walkMore, early.length > 0 ? Math.ceil((2 * walkFirst * pageRows) / early.length) : walkMore);
      if (more > walkFirst) {
        const later = await walk(more);
        if (later.length >= pageRows) return later;
        if (fetchIsCheaper(later.length, more)) messageLimit = hitFetchMax;
      }
    }
  }
  const { branches, ids: listed } = await searchBranches(sql, m, { ...HIT_LIMITS, messages: messageLimit });
  if (branches.length === 0) return [];
  if (listed) return rowsOf(listed);
  const pages = await Promise.all(branches.map((b) => listing(sql`id`, b, pageRows)));
  // Their one column: threads.id, text (a row's columns are `any` to postgres.js).
  const ids = [...new Set(pages.flat().map((r): string => r.id))];
  if (ids.length === 0) return [];
  return rowsOf(ids);
}

/** Snippet delimiters inside ts_headline output: control characters that stored text hardly has. */
const START = "\u0002";
const STOP = "\u0003";
const HEADLINE = `StartSel=${START}, StopSel=${STOP}, MaxWords=24, MinWords=10`;

export interface SearchSnippet {
  text: string;
  /** [start, end) UTF-16 offsets of the matched words in `text`. */
  highlights: { start: number; end: number }[];
  /** Where the snippet comes from: the thread's name/preview, or a message item. */
  source: "thread" | "message";
  itemId: string | null;
}

/** Turns ts_headline output with START/STOP markers into text plus ranges. */
export function parseHeadline(marked: string): { text: string; highlights: { start: number; end: number }[] } {
  let text = "";
  const highlights: { start: number; end: number }[] = [];
  let open = -1;
  for (const ch of marked) {
    if (ch === START) open = text.length;
    else if (ch === STOP) {
      if (open >= 0 && text.length > open) highlights.push({ start: open, end: text.length });
      open = -1;
    } else text += ch;
  }
  return { text, highlights };
}

/**
 * One snippet per thread of a page: from the name/preview when they match, else from the
 * newest matching message.
 */
export async function snippetsFor(sql: Sql, m: SearchMatch, threadIds: string[]): Promise<Map<string, SearchSnippet>> {
  const out = new Map<string, SearchSnippet>();
  if (threadIds.length === 0) return out;
  const q = tsQuery(sql, m);
  // A frequent word: the threads' own rows (itemTest); a rare one: its few rows from the index.
  // (The estimate is the one the page's search just made, kept by messageHitEstimate.)
  const test = (await messageHitEstimate(sql, m)).many ? itemTest(sql, m, "i") : itemCondition(sql, m, "i");
  // Both at once: a message's snippet is used only for a thread whose name/preview do not match.
  const [own, msgs] = await Promise.all([
    sql<{ id: string; h: string }[]>`
      select id, ts_headline('simple'::regconfig, thread_search_text(name, preview), ${q}, ${HEADLINE}) as h
      from threads where id = any(${sql.array(threadIds)}::text[]) and ${threadCondition(sql, m, false)}`,
    sql<{ threadId: string; id: string; h: string }[]>`
      select thread_id, id, ts_headline('simple'::regconfig, item_search_text(type, payload), ${q}, ${HEADLINE}) as h
      from (
        select distinct on (i.thread_id) i.thread_id, i.id, i.type, i.payload from items i
        where i.thread_id = any(${sql.array(threadIds)}::text[]) and ${test}
        order by i.thread_id, i.started_at_ms desc, i.ordinal desc
      ) newest`,
  ]);
  for (const r of own) out.set(r.id, { ...parseHeadline(r.h), source: "thread", itemId: null });
  for (const r of msgs) if (!out.has(r.threadId)) out.set(r.threadId, { ...parseHeadline(r.h), source: "message", itemId: r.id });
  return out;
}
