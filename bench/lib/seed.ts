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
  const search = (t: string) => `and (name ilike '%${t}%' or preview ilike '%${t}%')`;
  const shapes: [string, string][] = [
    ["first page", `${base} ${tail}`],
    ["deep page", `${base} and (created_at_ms, id) < (${c.value}, '${c.id}') ${tail}`],
    [`search "${SEARCH_COMMON}"`, `${base} ${search(SEARCH_COMMON)} ${tail}`],
    [`search (no match)`, `${base} ${search(SEARCH_NONE)} ${tail}`],
  ];
  const out: ExplainResult[] = [];
  for (const [name, q] of shapes) {
    const rows = await sql.unsafe<Record<string, string>[]>(`explain (analyze, costs off) ${q}`);
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
export async function seedTurns(sql: Sql, perThread: number): Promise<void> {
  for (let k = 0; k < perThread; k++) {
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
