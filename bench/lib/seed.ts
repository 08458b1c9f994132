/**
 * Fast thread seeding with set-based SQL (INSERT … SELECT generate_series), matching the
 * `threads` columns of migrations/001_init.sql, plus EXPLAIN ANALYZE of the thread/list query
 * shapes that src/store/thread-store.ts generates.
 */
import type { Sql } from "postgres";

const DAY = 86_400_000;
const CHUNK = 20_000;

export const PREVIEWS = [
  "Fix the failing websocket reconnect test",
  "Refactor the thread store paging",
  "Add a CLI flag for the listen URL",
  "Explain how the migration runner locks",
  "Speed up cold start of the server",
  "Write docs for the runtime event log",
];
/** Matches 1 row in 6 (previews contain it). */
export const SEARCH_COMMON = "websocket";
/** Matches no row: the search has to look at every candidate row. */
export const SEARCH_NONE = "zz-no-such-thread";

/**
 * Inserts threads numbered from..to (1-based, inclusive). created_at_ms is spread uniformly over
 * the past year, updated_at_ms up to 3 days later; ids are UUIDv7-shaped (time prefix) like the
 * server's own; 1 in 20 is archived, 1 in 4 has a name; three providers, 25 cwds.
 */
export async function seedThreads(sql: Sql, from: number, to: number, nowMs = Date.now()): Promise<void> {
  const start = nowMs - 365 * DAY;
  const previews = `array[${PREVIEWS.map((p) => `'${p.replace(/'/g, "''")}'`).join(",")}]`;
  for (let lo = from; lo <= to; lo += CHUNK) {
    const hi = Math.min(to, lo + CHUNK - 1);
    await sql.unsafe(`
      insert into threads (
        id, session_id, name, preview, ephemeral, archived, model_provider, model, cwd,
        approval_policy, sandbox, dynamic_tools, cli_version, source, seq_reserved, created_at_ms, updated_at_ms
      )
      select id, id,
        case when g % 4 = 0 then 'Thread number ' || g end,
        (${previews})[1 + g % 6] || ' #' || g,
        false,
        g % 20 = 0,
        (array['openai','anthropic','openai-chat'])[1 + g % 3],
        'gpt-5',
        '/home/dev/project-' || (g % 25),
        '"on-request"'::jsonb,
        'workspace-write',
        '[]'::jsonb,
        '0.1.0',
        'appServer',
        0,
        c,
        least(${nowMs}::bigint, c + floor(random() * ${3 * DAY})::bigint)
      from (
        select g, c,
          substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-7' || substr(m, 1, 3) || '-8' || substr(m, 4, 3) || '-' || substr(m, 7, 12) as id
        from (
          select g, c, lpad(to_hex(c), 12, '0') as h, md5('bench-thread-' || g) as m
          from (select g, (${start}::bigint + floor(random() * ${365 * DAY})::bigint) as c from generate_series(${lo}, ${hi}) as g) s0
        ) s1
      ) s2`);
  }
}

export async function countThreads(sql: Sql): Promise<{ total: number; listable: number }> {
  const [r] = await sql.unsafe<{ total: string; listable: string }[]>(
    `select count(*)::text as total, count(*) filter (where not archived and not ephemeral)::text as listable from threads`,
  );
  return { total: Number(r!.total), listable: Number(r!.listable) };
}

/** A thread/list cursor positioned at the middle of the default listing (created_at desc). */
export async function middleCursor(sql: Sql): Promise<string> {
  const { listable } = await countThreads(sql);
  const [row] = await sql.unsafe<{ c: string; id: string }[]>(
    `select created_at_ms::text as c, id from threads where archived = false and not ephemeral
     order by created_at_ms desc, id desc offset ${Math.floor(listable / 2)} limit 1`,
  );
  // Same encoding as src/runtime/threads.ts encodeCursor (base64url of the keyset position JSON).
  return Buffer.from(JSON.stringify({ key: "created_at", value: Number(row!.c), id: row!.id })).toString("base64url");
}

export interface ExplainResult {
  name: string;
  plan: string;
  executionMs: number;
}

/** The plan's node lines (the first line and every "->" line), outermost first, without details. */
function planNodes(lines: string[], max = 4): string {
  return lines
    .filter((l, i) => i === 0 || l.trim().startsWith("->"))
    .map((l) => l.trim().replace(/^->\s*/, "").replace(/\s*\(actual.*$/, ""))
    .slice(0, max)
    .join(" > ");
}

/** EXPLAIN ANALYZE of the thread/list shapes (literals instead of parameters). */
export async function explainList(sql: Sql, cursor: string): Promise<ExplainResult[]> {
  const c = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8")) as { value: number; id: string };
  const base = `select * from threads where archived = false and not ephemeral`;
  const tail = `order by created_at_ms desc, id desc limit 26`;
  // Mirrors ThreadStore.listThreads (src/store/thread-store.ts); keep in step when it changes.
  // Since migrations/004_full_text_search.sql a search first collects the matching ids from the
  // indexes (src/store/thread-search.ts, few hits) and walks the listing only for many hits; since
  // 008 the messages' words are the stored column items.search_words (and a first bounded walk
  // runs before these hit queries).
  const hits = (t: string) =>
    `select id from threads where text_trigrams(lower(thread_search_text(name, preview))) @> text_trigrams(lower('${t}')) and (name ilike '%${t}%' or preview ilike '%${t}%')
     union all select i.thread_id from items i where i.type in ('userMessage', 'agentMessage')
       and i.search_words @@ phraseto_tsquery('simple'::regconfig, '${t}') limit 2001`;
  const shapes: [string, string][] = [
    ["first page", `${base} ${tail}`],
    ["deep page", `${base} and (created_at_ms, id) < (${c.value}, '${c.id}') ${tail}`],
    [`search "${SEARCH_COMMON}": matching ids`, hits(SEARCH_COMMON)],
    [`search (no match): matching ids`, hits(SEARCH_NONE)],
    [`search "${SEARCH_TRANSCRIPT}": matching ids`, hits(SEARCH_TRANSCRIPT)],
  ];
  const out: ExplainResult[] = [];
  for (const [name, q] of shapes) {
    let rows: Record<string, string>[];
    try {
      rows = await sql.unsafe<Record<string, string>[]>(`explain (analyze, costs off) ${q}`);
    } catch (err) {
      out.push({ name, plan: `failed: ${(err as Error).message}`, executionMs: NaN });
      continue;
    }
    const lines = rows.map((r) => Object.values(r)[0]!);
    const exec = /Execution Time: ([\d.]+) ms/.exec(lines.join("\n"));
    out.push({ name, plan: planNodes(lines), executionMs: exec ? Number(exec[1]) : NaN });
  }
  return out;
}

/**
 * Gives every thread `perThread` completed turns (turns columns of migrations/001_init.sql), one
 * statement per ordinal. Used to see whether start-up work grows with the stored history.
 */
export async function seedTurns(sql: Sql, perThread: number, firstOrdinal = 0): Promise<void> {
  for (let k = firstOrdinal; k < firstOrdinal + perThread; k++) {
    await sql.unsafe(`
      insert into turns (id, thread_id, ordinal, status, started_at_ms, completed_at_ms)
      select md5(id || '/turn/${k}')::uuid::text, id, ${k}, 'completed', created_at_ms + ${k * 60_000}, created_at_ms + ${k * 60_000 + 30_000}
      from threads`);
  }
}

/** EXPLAIN ANALYZE of the start-up recovery query (src/runtime/recovery.ts). */
export async function explainRecovery(sql: Sql): Promise<ExplainResult> {
  const rows = await sql.unsafe<Record<string, string>[]>(
    `explain (analyze, costs off) select * from turns where status = 'inProgress' order by thread_id, ordinal`,
  );
  const lines = rows.map((r) => Object.values(r)[0]!);
  const exec = /Execution Time: ([\d.]+) ms/.exec(lines.join("\n"));
  return { name: "start-up recovery: turns where status = 'inProgress'", plan: planNodes(lines), executionMs: exec ? Number(exec[1]) : NaN };
}

/** Words of the seeded transcripts; item k of thread g uses a few of them (see seedTranscripts). */
const TOPICS = ["parser", "lexer", "scheduler", "migration", "renderer", "allocator", "tokenizer", "router", "watcher", "resolver", "compiler", "sandbox"];
const FAULTS = ["deadlock", "overflow", "regression", "timeout", "leak", "panic", "race", "crash"];
/** In the transcripts of about 1 thread in 100 (a rarer word, found only in messages). */
export const SEARCH_TRANSCRIPT = "kumquat";
/** In exactly one thread's transcript: `SEARCH_ONE_PREFIX` + its number. */
export const SEARCH_ONE_PREFIX = "ticket";

/**
 * Gives every thread `turnsPerThread` completed turns with a userMessage and an agentMessage each
 * (turns/items columns of migrations/001_init.sql, payloads shaped like the wire items), so
 * 100 000 threads × 5 turns = 1 000 000 items. Set-based, one statement per turn ordinal.
 */
export const TRANSCRIPT_TURNS = 5;
export async function seedTranscripts(sql: Sql, turnsPerThread = TRANSCRIPT_TURNS): Promise<void> {
  const arr = (xs: string[]) => `array[${xs.map((x) => `'${x}'`).join(",")}]`;
  // Only threads without turns yet (sizes are topped up: 10k, then to 100k).
  await sql.unsafe(`drop table if exists bench_transcript_targets`);
  await sql.unsafe(`create table bench_transcript_targets as select id, created_at_ms from threads t where not exists (select 1 from turns where thread_id = t.id)`);
  for (let k = 0; k < turnsPerThread; k++) {
    await sql.unsafe(`
      insert into turns (id, thread_id, ordinal, status, started_at_ms, completed_at_ms)
      select md5(id || '/turn/${k}')::uuid::text, id, ${k}, 'completed', created_at_ms + ${k * 60_000}, created_at_ms + ${k * 60_000 + 30_000}
      from bench_transcript_targets`);
    await sql.unsafe(`
      with t as (
        select id as thread_id, md5(id || '/turn/${k}')::uuid::text as turn_id, created_at_ms + ${k * 60_000} as at,
          ('x' || substr(md5(id || '${k}'), 1, 8))::bit(32)::int & 2147483647 as h,
          ('x' || substr(md5(id), 1, 8))::bit(32)::int & 2147483647 as g
        from bench_transcript_targets
      ), w as (
        select *, (${arr(TOPICS)})[1 + h % ${TOPICS.length}] as topic, (${arr(FAULTS)})[1 + (h / 16) % ${FAULTS.length}] as fault,
          case when g % 100 = 0 and ${k} = 0 then ' ${SEARCH_TRANSCRIPT}' else '' end as rare,
          case when ${k} = 0 then ' ${SEARCH_ONE_PREFIX}' || (g % 1000003) else '' end as one
        from t
      )
      insert into items (id, thread_id, turn_id, ordinal, type, status, payload, started_at_ms, completed_at_ms)
      select md5(turn_id || '/u')::uuid::text, thread_id, turn_id, 0, 'userMessage', 'completed',
        jsonb_build_object('type', 'userMessage', 'id', md5(turn_id || '/u')::uuid::text, 'content', jsonb_build_array(jsonb_build_object(
          'type', 'text', 'text', 'Please look at the ' || topic || ' module: there is a ' || fault || ' when it runs twice' || rare || one, 'text_elements', '[]'::jsonb))),
        at, at
      from w
      union all
      select md5(turn_id || '/a')::uuid::text, thread_id, turn_id, 1, 'agentMessage', 'completed',
        jsonb_build_object('type', 'agentMessage', 'id', md5(turn_id || '/a')::uuid::text, 'text',
          'I read the ' || topic || ' code. The ' || fault || ' comes from a shared buffer that is reused before the previous call finished; I changed it to copy the buffer and added a test.'),
        at + 1000, at + 30000
      from w`);
  }
  await sql.unsafe(`drop table bench_transcript_targets`);
}

/** The GIN indexes of search (migrations 004, 005, 008), which make a bulk insert slow. */
const SEARCH_INDEXES = ["items_search_words", "threads_search_words", "threads_search_trigrams"];

/**
 * Runs `fill` with the search indexes dropped, then creates them again exactly as they were
 * (pg_indexes.indexdef carries the expression, the predicate and gin_pending_list_limit). With a
 * 256 kB pending list every ~1 000 inserted messages merge into the GIN index: seeding 1M messages
 * took ~5 min on Postgres and ~30 min on PGlite; a build at the end is one sort.
 */
export async function withSearchIndexesDropped<T>(sql: Sql, fill: () => Promise<T>): Promise<T> {
  const defs = await sql.unsafe<{ name: string; def: string }[]>(
    `select indexname as name, indexdef as def from pg_indexes where schemaname = current_schema() and indexname in (${SEARCH_INDEXES.map((n) => `'${n}'`).join(",")})`,
  );
  for (const d of defs) await sql.unsafe(`drop index ${d.name}`);
  try {
    return await fill();
  } finally {
    for (const d of defs) await sql.unsafe(d.def);
  }
}

/** The number of the thread whose transcript has `SEARCH_ONE_PREFIX` + n (n of the newest thread). */
export async function oneThreadTerm(sql: Sql): Promise<string> {
  const [r] = await sql.unsafe<{ n: string }[]>(
    `select ((('x' || substr(md5(id), 1, 8))::bit(32)::int & 2147483647) % 1000003)::text as n from threads order by created_at_ms desc limit 1`,
  );
  return `${SEARCH_ONE_PREFIX}${r!.n}`;
}
