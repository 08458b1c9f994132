/**
 * Search over thread names, previews and every user/agent message (migrations/004_full_text_search.sql;
 * a message is indexed by its first 100 000 characters, 007_search_text_bound.sql; since
 * 008_search_words_column.sql each message keeps its tsvector in `items.search_words`, which the
 * GIN index holds and a per-row test reads instead of recomputing it).
 *
 * A thread matches by its own name/preview or by its messages. A page is found in up to two steps:
 * - first walk, when the planner's statistics say the term is in many messages (manyMessageHits;
 *   a rare or unknown word skips it): the newest WALK_FIRST threads of the listing are tested one by one (name/preview,
 *   then each message's stored words), stopping at a page; a word in many messages (1 in 8)
 *   fills it within a few dozen threads, without the hit queries below. When it found no page, a
 *   second walk (≤ WALK_MORE threads, sized by the density seen);
 * - otherwise, per branch, from how many rows match (the hit queries: ≤ HIT_LIMITS rows from the
 *   GIN indexes): few hits — fetch those thread ids, then sort just them (a term that matches
 *   nothing costs two index probes); many hits — walk the threads in listing order and test each
 *   one, which stops after a page because matches are dense.
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
 */
export async function searchBranches(sql: Sql, m: SearchMatch, limits = HIT_LIMITS): Promise<{ branches: Fragment[] }> {
  // (Wrapped: a fragment is thenable, and an async function would run it as a query.)
  const [own, inMessages] = await Promise.all([
    sql<{ id: string }[]>`select id from threads where ${threadCondition(sql, m, true)} limit ${limits.own + 1}`,
    sql<{ id: string }[]>`select i.thread_id as id from items i where ${itemCondition(sql, m, "i")} limit ${limits.messages + 1}`,
  ]);
  const branch = (hits: { id: string }[], limit: number, perRow: () => Fragment): Fragment[] =>
    hits.length === 0 ? [] : hits.length <= limit ? [sql`and id = any(${sql.array([...new Set(hits.map((h) => h.id))])}::text[])`] : [perRow()];
  return {
    branches: [
      ...branch(own, limits.own, () => sql`and ${threadCondition(sql, m, false)}`),
      // `offset 0` keeps the subquery per row: otherwise Postgres hashes every matching item first.
      ...branch(inMessages, limits.messages, () => sql`and exists (select 1 from items i where i.thread_id = threads.id and ${itemTest(sql, m, "i")} offset 0)`),
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
 * Whether the planner expects the term in many messages: more than HIT_LIMITS.messages rows and
 * more than it assumes for a word it has no statistics of (0.5 % of the rows: a word outside the
 * column's most common elements, or any word before the first ANALYZE). EXPLAIN with the query's
 * value, ~0.3 ms. The walks run first only then: on PGlite (16 MB of buffers) walking 128 threads'
 * scattered messages before the hit queries cost a word of 1 000 messages (1 thread in 100) ~10 ms
 * more. Only an order of work: both ways give the same page.
 */
async function manyMessageHits(sql: Sql, m: SearchMatch): Promise<boolean> {
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
  return hits > HIT_LIMITS.messages && hits > 0.0051 * messages;
}

/**
 * `select cols from threads where <the caller's filters> extra <cursor> order by <listing order>
 * limit n` (n defaults to the page size + 1).
 */
export type ListingQuery = (cols: Fragment, extra: Fragment, limit?: number) => Fragment;

/**
 * One page of matching threads, as `listing(*)` rows in listing order (at most `pageRows`).
 * When many messages may match (`always`: regardless), first the newest WALK_FIRST threads are
 * tested (both ways of matching in one walk; then maybe up to WALK_MORE); when at least a page of
 * them matches, that holds the page. Otherwise: the page of
 * each branch (ids only, same filters, order and limit), then the rows of their union in that
 * order and limit — the union of each branch's first page holds the first page of the union.
 */
export async function searchedPage(
  sql: Sql,
  m: SearchMatch,
  listing: ListingQuery,
  pageRows: number,
  { walkFirst = WALK_FIRST, walkMore = WALK_MORE, always = false }: { walkFirst?: number; walkMore?: number; always?: boolean } = {},
): Promise<Row[]> {
  const rowsOf = async (ids: string[]) => (await listing(sql`*`, sql`and id = any(${sql.array(ids)}::text[])`, pageRows)) as Row[];
  // The subquery's order stays (a LIMIT subquery is not flattened; the filter keeps the order).
  const walk = async (threads: number) =>
    (
      (await sql<{ id: string }[]>`
        select w.id from (${listing(sql`id, name, preview`, sql``, threads)}) w
        where ${threadCondition(sql, m, false)}
          or exists (select 1 from items i where i.thread_id = w.id and ${itemTest(sql, m, "i")} offset 0)
        limit ${pageRows}`) as { id: string }[]
    ).map((r) => r.id);
  if (walkFirst > 0 && (always || (await manyMessageHits(sql, m)))) {
    const early = await walk(walkFirst);
    if (early.length >= pageRows) return rowsOf(early);
    // At the density seen, twice the threads a page needs; as far as WALK_MORE when none was seen.
    const more = Math.min(walkMore, early.length > 0 ? Math.ceil((2 * walkFirst * pageRows) / early.length) : walkMore);
    if (more > walkFirst) {
      const later = await walk(more);
      if (later.length >= pageRows) return rowsOf(later);
    }
  }
  const { branches } = await searchBranches(sql, m);
  if (branches.length === 0) return [];
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
  const own = await sql<{ id: string; h: string }[]>`
    select id, ts_headline('simple'::regconfig, thread_search_text(name, preview), ${q}, ${HEADLINE}) as h
    from threads where id = any(${sql.array(threadIds)}::text[]) and ${threadCondition(sql, m, false)}`;
  for (const r of own) out.set(r.id, { ...parseHeadline(r.h), source: "thread", itemId: null });
  const rest = threadIds.filter((id) => !out.has(id));
  if (rest.length === 0) return out;
  // A frequent word: the threads' own rows (itemTest); a rare one: its few rows from the index.
  const test = (await manyMessageHits(sql, m)) ? itemTest(sql, m, "i") : itemCondition(sql, m, "i");
  const msgs = await sql<{ threadId: string; id: string; h: string }[]>`
    select thread_id, id, ts_headline('simple'::regconfig, item_search_text(type, payload), ${q}, ${HEADLINE}) as h
    from (
      select distinct on (i.thread_id) i.thread_id, i.id, i.type, i.payload from items i
      where i.thread_id = any(${sql.array(rest)}::text[]) and ${test}
      order by i.thread_id, i.started_at_ms desc, i.ordinal desc
    ) newest`;
  for (const r of msgs) out.set(r.threadId, { ...parseHeadline(r.h), source: "message", itemId: r.id });
  return out;
}
