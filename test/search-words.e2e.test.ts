/**
 * Search on words frequent in messages (migrations/008_search_words_column.sql): the stored
 * per-message tsvector, the bounded walks that run before the hit queries (src/store/thread-search.ts
 * WALK_FIRST, WALK_MORE), and the upgrade of a database that has messages.
 */
import { describe, expect, it } from "vitest";
import type { Sql } from "postgres";
import { openDatabase } from "../src/store/database.js";
import { itemCondition, searchedPage, threadCondition, type ListingQuery, type SearchMatch } from "../src/store/thread-search.js";
import { runMigrations } from "../src/store/migrate.js";
import { itemColumns } from "../src/store/records.js";
import { ThreadStore } from "../src/store/thread-store.js";
import { BACKENDS, freshDatabase, withDatabaseBefore } from "./support/db.js";

/** 60 threads, each with a user and an agent message; "deadlock" in the messages of every other thread. */
async function seed(sql: Sql): Promise<void> {
  await sql.unsafe(`
    insert into threads (id, session_id, name, preview, archived, model_provider, model, cwd, approval_policy, sandbox, cli_version, source, created_at_ms, updated_at_ms)
    select 't' || g, 's', case when g % 5 = 0 then 'name 100% ' || g end, case when g % 3 = 0 then 'fix the websocket ' || g else 'other ' || g end,
      g % 11 = 0, 'openai', 'm', case when g % 4 = 0 then '/a' else '/b' end, '"never"', 'read-only', '0', 'vscode', g, 1000 - g
    from generate_series(1, 60) g;
    insert into turns (id, thread_id, ordinal, status, started_at_ms) select 'u' || g, 't' || g, 0, 'completed', g from generate_series(1, 60) g;
    insert into items (id, thread_id, turn_id, ordinal, type, status, payload, started_at_ms)
    select 'iu' || g, 't' || g, 'u' || g, 0, 'userMessage', 'completed',
      jsonb_build_object('type', 'userMessage', 'content', jsonb_build_array(
        jsonb_build_object('type', 'text', 'text', case when g % 2 = 0 then 'the parser has a deadlock' else 'the lexer times out' end),
        jsonb_build_object('type', 'text', 'text', 'second part'))), g
    from generate_series(1, 60) g
    union all
    select 'ia' || g, 't' || g, 'u' || g, 1, 'agentMessage', 'completed',
      jsonb_build_object('type', 'agentMessage', 'text', case when g % 7 = 0 then 'a timeout in the shared buffer' else 'fixed it' end), g
    from generate_series(1, 60) g
    union all
    select 'ic' || g, 't' || g, 'u' || g, 2, 'commandExecution', 'completed',
      jsonb_build_object('type', 'commandExecution', 'command', 'echo deadlock', 'aggregatedOutput', 'deadlock parser'), g
    from generate_series(1, 60, 3) g`);
}

describe.each(BACKENDS)("search on frequent words (%s)", (backend) => {
  it("the bounded walks and the branch queries give the same pages, for any filter, order and page size", async () => {
    const test = await freshDatabase(backend);
    const db = await openDatabase({ ...test.options });
    try {
      const sql = db.sql as Sql;
      await seed(sql);
      const matches: SearchMatch[] = [
        { kind: "substring", term: "deadlock" },
        { kind: "substring", term: "websocket" },
        { kind: "substring", term: "parser has" },
        { kind: "substring", term: "has parser" },
        { kind: "substring", term: "timeout" },
        { kind: "substring", term: "part second" },
        { kind: "substring", term: "nothing-like-this" },
        { kind: "words", query: "deadlock" },
        { kind: "words", query: "parser deadlock -timeout" },
        { kind: "words", query: '"second part"' },
        { kind: "words", query: "websocket or timeout" },
        { kind: "words", query: "parser -deadlock" },
        { kind: "words", query: "echo" }, // only in tool items: never matches
        { kind: "words", query: "zebra" },
      ];
      const listings: [string, (limit: number) => ListingQuery][] = [
        ["created desc", (n) => (cols, extra, limit = n) => sql`select ${cols} from threads where archived = false and not ephemeral ${extra} order by created_at_ms desc, id desc limit ${limit}`],
        ["updated desc, cwd /a", (n) => (cols, extra, limit = n) => sql`select ${cols} from threads where archived = false and cwd = '/a' ${extra} order by updated_at_ms desc, id desc limit ${limit}`],
        ["created asc, archived", (n) => (cols, extra, limit = n) => sql`select ${cols} from threads where archived = true ${extra} order by created_at_ms asc, id asc limit ${limit}`],
      ];
      let early = 0;
      for (const m of matches)
        for (const [name, listing] of listings)
          for (const pageRows of [1, 3, 6, 26]) {
            const ids = async (walkFirst: number, walkMore: number) =>
              ((await searchedPage(sql, m, listing(pageRows), pageRows, { walkFirst, walkMore, always: true })) as { id: string }[]).map((r) => r.id);
            const reference = await ids(0, 0); // the branch queries only
            // …which is the listing filtered by the two conditions in one plain query.
            const plain = await listing(pageRows)(sql`id`, sql`and (${threadCondition(sql, m, false)} or exists (select 1 from items i where i.thread_id = threads.id and ${itemCondition(sql, m, "i")}))`);
            expect(reference, `${JSON.stringify(m)} ${name} ${pageRows} rows`).toEqual(plain.map((r) => r.id));
            // As the store calls it: the planner's estimate decides whether the walks run.
            expect(((await searchedPage(sql, m, listing(pageRows), pageRows)) as { id: string }[]).map((r) => r.id)).toEqual(reference);
            // Walks that fill the page early (large bounds), ones that need the second walk, and
            // ones that never do (bound 1, no second walk).
            for (const [walkFirst, walkMore] of [[1, 0], [2, 1024], [4, 64], [8, 20], [256, 1024]] as const)
              expect(await ids(walkFirst, walkMore), `${JSON.stringify(m)} ${name} ${pageRows} rows, walks ${walkFirst}/${walkMore}`).toEqual(reference);
            // The other ways, chosen by the estimate: after a short walk, the matching messages'
            // threads fetched from the index (few hits estimated), or a second walk (too many);
            // and with a fetch bound of 1 row, the per-row test over the listing instead.
            for (const [estimate, hitFetchMax] of [
              [{ hits: 1, many: true }, undefined],
              [{ hits: 1e9, many: true }, undefined],
              [{ hits: 1, many: false }, 1],
              [{ hits: 1, many: true }, 1],
            ] as const) {
              if (pageRows !== 6) continue; // (one size: walks of 2 and 4 threads do not fill it, the rest of the loop bounded in time)
              const got = await searchedPage(sql, m, listing(pageRows), pageRows, { walkFirst: 2, walkMore: 4, estimate, hitFetchMax });
              expect((got as { id: string }[]).map((r) => r.id), `${JSON.stringify(m)} ${name} ${pageRows} rows, ${JSON.stringify(estimate)} ${hitFetchMax}`).toEqual(reference);
            }
            if (reference.length === pageRows) early++;
          }
      expect(early).toBeGreaterThan(20); // not vacuous: many of these pages are full
    } finally {
      await db.close();
      await test.cleanup();
    }
  }, 180_000); // ~170 searches × 12 ways: a minute on PGlite when the machine is busy

  it("thread/search pages (store): every matching thread once, newest activity first, archived apart", async () => {
    const test = await freshDatabase(backend);
    const db = await openDatabase({ ...test.options });
    try {
      const sql = db.sql as Sql;
      await seed(sql);
      const store = new ThreadStore(sql);
      for (const archived of [false, true])
        for (const query of ["deadlock", "parser deadlock -timeout", '"parser has"', "timeout", "websocket or timeout", "second", "zebra"]) {
          const m: SearchMatch = { kind: "words", query };
          const expected = (
            await sql<{ id: string }[]>`select id from threads where archived = ${archived} and not ephemeral
              and (${threadCondition(sql, m, false)} or exists (select 1 from items i where i.thread_id = threads.id and ${itemCondition(sql, m, "i")}))
              order by updated_at_ms desc, id desc`
          ).map((r) => r.id);
          const got: string[] = [];
          let cursor: { value: number; id: string } | null = null;
          for (let pages = 0; pages < 100; pages++) {
            const page = await store.searchThreads({ query, limit: 4, cursor, archived });
            got.push(...page.rows.map((r) => r.record.id));
            for (const r of page.rows) expect(r.snippet, `${query}: ${r.record.id}`).not.toBeNull();
            cursor = page.next;
            if (!cursor) break;
          }
          expect(got, `${query}, archived ${archived}`).toEqual(expected);
          if (query === "deadlock") expect(got.length).toBe(archived ? 2 : 28); // not vacuous: pages of 4
        }
    } finally {
      await db.close();
      await test.cleanup();
    }
  });

  it("new and updated messages get their stored words; other items have none", async () => {
    const test = await freshDatabase(backend);
    const db = await openDatabase({ ...test.options });
    try {
      const sql = db.sql as Sql;
      await seed(sql);
      await sql`update items set payload = ${sql.json({ type: "agentMessage", text: "now about a pangolin" })} where id = 'ia1'`;
      const found = async (query: string) =>
        (await sql<{ id: string }[]>`select i.id from items i where ${itemCondition(sql, { kind: "words", query }, "i")} order by i.id`).map((r) => r.id);
      expect(await found("pangolin")).toEqual(["ia1"]);
      expect(await found("fixed")).not.toContain("ia1");
      expect(await found("second")).toHaveLength(60); // the user message's text parts, joined
      const [{ tools }] = await sql<{ tools: number }[]>`select count(*)::int as tools from items where type = 'commandExecution' and search_words is not null`;
      expect(tools).toBe(0);
      // `select *` carries the column; the store's readers name theirs and do not get it.
      expect((await sql<Record<string, unknown>[]>`select * from items where id = 'ia1'`)[0]).toHaveProperty("searchWords");
      const [row] = await sql<Record<string, unknown>[]>`select ${sql.unsafe(itemColumns())} from items where id = 'ia1'`;
      expect(row).not.toHaveProperty("searchWords");
      expect(Object.keys(row!).length).toBe(Object.keys((await sql<Record<string, unknown>[]>`select * from items where id = 'ia1'`)[0]!).length - 1);
    } finally {
      await db.close();
      await test.cleanup();
    }
  });
});

describe.each(BACKENDS)("search words column, upgrade (%s)", (backend) => {
  it("migration 008 fills the column of every existing message from the bounded text, and the index agrees with it", async () => {
    await withDatabaseBefore(backend, "008_search_words_column.sql", async (sql, pending) => {
      await seed(sql);
      // Longer than the 100 000-character bound of 007: its last word is not searchable.
      await sql`insert into items (id, thread_id, turn_id, ordinal, type, status, payload, started_at_ms)
        values ('ilong', 't1', 'u1', 3, 'agentMessage', 'completed',
          ${sql.json({ type: "agentMessage", text: `okapifirst ${"filler ".repeat(20_000)}okapilast` })}, 1)`;
      const oldIds = async (query: string) =>
        (await sql<{ id: string }[]>`select i.id from items i where i.type in ('userMessage', 'agentMessage')
          and to_tsvector('simple'::regconfig, item_search_text(i.type, i.payload)) @@ websearch_to_tsquery('simple'::regconfig, ${query}) order by i.id`).map((r) => r.id);
      const queries = ["deadlock", "parser deadlock -timeout", '"second part"', "okapifirst", "okapilast", "zebra"];
      const expected = await Promise.all(queries.map(oldIds));

      expect(await runMigrations(sql)).toEqual(pending);
      const [{ differ }] = await sql<{ differ: number }[]>`
        select count(*)::int as differ from items
        where search_words is distinct from case when type in ('userMessage', 'agentMessage') then to_tsvector('simple'::regconfig, item_search_text(type, payload)) end`;
      expect(differ).toBe(0);
      const viaIndex = (query: string) =>
        sql.begin(async (tx) => {
          await tx`set local enable_seqscan = off`;
          return (await tx<{ id: string }[]>`select i.id from items i where ${itemCondition(tx as unknown as Sql, { kind: "words", query }, "i")} order by i.id`).map((r) => r.id);
        });
      const perRow = async (query: string) =>
        (await sql<{ id: string }[]>`select i.id from items i where ${itemCondition(sql, { kind: "words", query }, "i")} offset 0`).map((r) => r.id).sort();
      for (const [k, q] of queries.entries()) {
        expect(await viaIndex(q), q).toEqual(expected[k]);
        expect(await perRow(q), q).toEqual(expected[k]);
      }
      expect(expected[0]!.length).toBe(30);
      expect(expected[3]).toEqual(["ilong"]);
      expect(expected[4]).toEqual([]);
    });
  });
});
