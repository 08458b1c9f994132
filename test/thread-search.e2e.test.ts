/** Full-text search (migrations/004_full_text_search.sql, bounded by 007_search_text_bound.sql): thread/search and thread/list searchTerm over messages. */
import { describe, expect, it } from "vitest";
import type { Sql } from "postgres";
import { openDatabase } from "../src/store/database.js";
import { itemCondition, searchBranches, type SearchMatch } from "../src/store/thread-search.js";
import { runMigrations } from "../src/store/migrate.js";
import { BACKENDS, freshDatabase, withDatabaseBefore } from "./support/db.js";
import { useTurnSession } from "./support/durability.js";
import { text, turnCompleted } from "./support/turns.js";

type Thread = Record<string, any>;
type SearchResult = { thread: Thread; snippet: { text: string; highlights: { start: number; end: number }[]; source: string; itemId: string | null } | null };

describe.each(BACKENDS)("thread/search (%s)", (backend) => {
  const { ctx, turn, read } = useTurnSession(backend);
  const search = async (params: Record<string, unknown>): Promise<{ data: SearchResult[]; nextCursor: string | null }> =>
    ctx.client.request("thread/search", params);
  const start = async () => (await ctx.client.request("thread/start", {})).thread.id as string;
  const highlighted = (r: SearchResult) => r.snippet!.highlights.map((h) => r.snippet!.text.slice(h.start, h.end));

  it("finds threads by words of their messages, name and preview, newest first, with snippets", async () => {
    const fruit = await start();
    await turn(fruit, "tell me about the kumquat harvest", "Kumquats ripen in winter.");
    const animal = await start();
    await turn(animal, "which animal smiles", "The quokka is a small marsupial that looks like it smiles.");
    const named = await start();
    await ctx.client.request("thread/name/set", { threadId: named, name: "Kumquat recipes" });
    const other = await start();
    await turn(other, "nothing to see", "indeed nothing");

    const kumquat = await search({ query: "kumquat" });
    expect(kumquat.data.map((r) => r.thread.id)).toEqual([named, fruit]); // newest activity first
    expect(kumquat.data[0]!.snippet).toMatchObject({ source: "thread", itemId: null });
    expect(highlighted(kumquat.data[0]!)).toEqual(["Kumquat"]);
    expect(kumquat.nextCursor).toBeNull();

    // A word only the agent said: the snippet comes from that message, with the match marked.
    const [hit, ...none] = (await search({ query: "QUOKKA" })).data;
    expect(none).toEqual([]);
    expect(hit!.thread.id).toBe(animal);
    const agentItem = (await read(animal)).turns[0].items.find((i: Thread) => i.type === "agentMessage");
    expect(hit!.snippet).toMatchObject({ source: "message", itemId: agentItem.id });
    expect(hit!.snippet!.text).toContain("quokka is a small marsupial");
    expect(highlighted(hit!)).toEqual(["quokka"]);

    // Web-search syntax: exclusion, or, quoted phrases.
    expect((await search({ query: "kumquat -recipes" })).data.map((r) => r.thread.id)).toEqual([fruit]);
    expect((await search({ query: "quokka or recipes" })).data.map((r) => r.thread.id)).toEqual([named, animal]);
    expect((await search({ query: '"small marsupial"' })).data.map((r) => r.thread.id)).toEqual([animal]);
    expect((await search({ query: '"marsupial small"' })).data).toEqual([]);
    // No words at all, or words nobody wrote: nothing, not an error.
    expect((await search({ query: "!!! ..." })).data).toEqual([]);
    expect((await search({ query: "zebra" })).data).toEqual([]);
    // Whole words, not substrings.
    expect((await search({ query: "quokk" })).data).toEqual([]);

    // thread/list searchTerm: substrings of name/preview as before, plus phrases in messages.
    const list = async (searchTerm: string) => (await ctx.client.request("thread/list", { searchTerm })).data.map((t: Thread) => t.id);
    expect(await list("marsupial")).toEqual([animal]);
    expect(await list("small marsupial")).toEqual([animal]);
    expect(await list("marsupial small")).toEqual([]);
    expect((await list("umqua")).sort()).toEqual([named, fruit].sort()); // substring of the name, and of the preview
    expect(await list("Ripen")).toEqual([fruit]);
  });

  it("pages with nextCursor and keeps archived threads apart", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const id = await start();
      await turn(id, `pangolin number ${i}`);
      ids.push(id);
    }
    const seen: string[] = [];
    let cursor: string | null = null;
    for (let guard = 0; guard < 10; guard++) {
      const page: { data: SearchResult[]; nextCursor: string | null } = await search({ query: "pangolin", limit: 2, cursor });
      expect(page.data.length).toBeLessThanOrEqual(2);
      seen.push(...page.data.map((r) => r.thread.id));
      cursor = page.nextCursor;
      if (!cursor) break;
    }
    expect(seen).toEqual([...ids].reverse());

    await ctx.client.request("thread/archive", { threadId: ids[0] });
    expect((await search({ query: "pangolin" })).data.map((r) => r.thread.id)).toEqual(ids.slice(1).reverse());
    expect((await search({ query: "pangolin", archived: true })).data.map((r) => r.thread.id)).toEqual([ids[0]]);

    await expect(search({ query: "pangolin", cursor: "not-a-cursor" })).rejects.toMatchObject({ code: -32602 });
  });

  it("Codex's form (searchTerm, as the TUI's @ task mentions send it) is answered in Codex's shape", async () => {
    const fruit = await start();
    await turn(fruit, "tell me about the kumquat harvest", "Kumquats ripen in winter.");
    // Exactly the params codex 0.171's TUI sends while the user types `@kumquat`.
    const codexParams = { currentAccountOnly: true, cursor: null, limit: 50, sortKey: "recency_at", sortDirection: "desc", sourceKinds: [], archived: false };
    const found = await ctx.client.request("thread/search", { ...codexParams, searchTerm: "kumquat" });
    expect(found).toEqual({ data: [{ thread: expect.objectContaining({ id: fruit }), snippet: expect.stringContaining("kumquat") }], nextCursor: null, backwardsCursor: null });
    expect(await ctx.client.request("thread/search", { ...codexParams, searchTerm: "zebra" })).toEqual({ data: [], nextCursor: null, backwardsCursor: null });
    // One of the two forms, not both or neither.
    await expect(ctx.client.request("thread/search", { query: "kumquat", searchTerm: "kumquat" })).rejects.toMatchObject({ code: -32602 });
    await expect(ctx.client.request("thread/search", {})).rejects.toMatchObject({ code: -32602 });
  });

  it("a message of more distinct words than a tsvector holds is stored whole and searchable by its first 100 000 characters", async () => {
    // ~900 KB of distinct words, under the default input limit: their tsvector would be ~1.9 MB
    // (Postgres' maximum is 1 MiB), which failed the item's insert and with it the turn.
    const words = (tag: string) => Array.from({ length: 150_000 }, (_, i) => tag + i.toString(36)).join(" ");
    const input = `aardwolffirst ${words("u")} aardwolflast`;
    const reply = `okapifirst ${words("a")} okapilast`;
    expect(Buffer.byteLength(input)).toBeLessThan(1024 * 1024 - 16 * 1024);
    const id = await start();
    ctx.h.mock.enqueue({ text: [reply.slice(0, 300_000), reply.slice(300_000, 600_000), reply.slice(600_000)] });
    const { turn: t } = await ctx.client.request("turn/start", { threadId: id, input: text(input) });
    expect((await turnCompleted(ctx.client, t.id, 60_000)).params.turn).toMatchObject({ status: "completed", error: null });

    const items = (await read(id)).turns[0].items;
    expect(items.find((i: Thread) => i.type === "userMessage").content[0].text).toBe(input);
    expect(items.find((i: Thread) => i.type === "agentMessage").text).toBe(reply);
    // Words at the start of either message are found; words past the first 100 000 characters are not.
    for (const word of ["aardwolffirst", "okapifirst", "u2s", "a2s"]) expect((await search({ query: word })).data.map((r) => r.thread.id)).toEqual([id]);
    for (const word of ["aardwolflast", "okapilast"]) expect((await search({ query: word })).data).toEqual([]);
    expect((await ctx.client.request("thread/list", { searchTerm: "okapifirst" })).data.map((t: Thread) => t.id)).toEqual([id]);
    // The thread goes on: a next turn is recorded as usual.
    await turn(id, "and now something short");
  });
});

describe.each(BACKENDS)("search strategies (%s)", (backend) => {
  it("the few-hits path (ids first) and the many-hits path (walk) find the same threads", async () => {
    const test = await freshDatabase(backend);
    const db = await openDatabase({ ...test.options });
    try {
      const sql = db.sql as Sql;
      await seed(sql);
      const matches: SearchMatch[] = [
        { kind: "substring", term: "websocket" },
        { kind: "substring", term: "ock" },
        { kind: "substring", term: "%" },
        { kind: "substring", term: "deadlock" },
        { kind: "substring", term: "shared buffer" },
        { kind: "substring", term: "nothing-like-this" },
        { kind: "words", query: "deadlock" },
        { kind: "words", query: "websocket or timeout" },
        { kind: "words", query: "parser -deadlock" },
        { kind: "words", query: "zebra" },
      ];
      for (const m of matches) {
        const run = async (hitLimit: number) => {
          const { branches } = await searchBranches(sql, m, { own: hitLimit, messages: hitLimit });
          const ids = new Set<string>();
          for (const b of branches) for (const r of await sql<{ id: string }[]>`select id from threads where true ${b}`) ids.add(r.id);
          return [...ids].sort();
        };
        const few = await run(1_000_000);
        const many = await run(0);
        expect(many, JSON.stringify(m)).toEqual(few);
      }
      // And the cases are not vacuous: some match, some do not.
      const count = async (m: SearchMatch) => {
        const { branches } = await searchBranches(sql, m);
        const ids = new Set<string>();
        for (const b of branches) for (const r of await sql<{ id: string }[]>`select id from threads where true ${b}`) ids.add(r.id);
        return ids.size;
      };
      expect(await count(matches[0]!)).toBe(10);
      expect(await count(matches[3]!)).toBe(15);
      expect(await count(matches[7]!)).toBe(13); // "websocket" in 10 previews (g % 3 = 0), "timeout" in 4 agent messages (g % 7 = 0), thread 21 has both
    } finally {
      await db.close();
      await test.cleanup();
    }
  });
});

describe.each(BACKENDS)("search text bound, upgrade (%s)", (backend) => {
  it("a database with a message longer than the bound gets its index rebuilt by migration 007: index and per-row test agree", async () => {
    await withDatabaseBefore(backend, "007_search_text_bound.sql", async (sql, pending) => {
      await seed(sql);
      // 140 000 characters of few distinct words: indexed whole by the old definition.
      await sql`insert into items (id, thread_id, turn_id, ordinal, type, status, payload, started_at_ms)
        values ('ilong', 't1', 'u1', 2, 'agentMessage', 'completed',
          ${sql.json({ type: "agentMessage", text: `okapifirst ${"filler ".repeat(20_000)}okapilast` })}, 1)`;
      expect(await runMigrations(sql)).toEqual(pending);
      const viaIndex = (query: string) =>
        sql.begin(async (tx) => {
          await tx`set local enable_seqscan = off`;
          return (await tx<{ id: string }[]>`select i.id from items i where ${itemCondition(tx as unknown as Sql, { kind: "words", query }, "i")}`).map((r) => r.id);
        });
      expect(await viaIndex("okapifirst")).toEqual(["ilong"]);
      expect(await viaIndex("okapilast")).toEqual([]); // past the bound: the rebuilt index no longer has it
      const [{ perRow }] = await sql<{ perRow: number }[]>`select count(*)::int as "perRow" from items i where ${itemCondition(sql, { kind: "words", query: "okapilast" }, "i")} offset 0`;
      expect(perRow).toBe(0);
    });
  });
});

/** 30 threads (1 in 3 with "websocket" in the preview), each with a user and an agent message. */
async function seed(sql: Sql): Promise<void> {
  await sql.unsafe(`
    insert into threads (id, session_id, name, preview, model_provider, model, cwd, approval_policy, sandbox, cli_version, source, created_at_ms, updated_at_ms)
    select 't' || g, 's', case when g % 5 = 0 then 'name 100% ' || g end, case when g % 3 = 0 then 'fix the websocket ' || g else 'other ' || g end,
      'openai', 'm', '/', '"never"', 'read-only', '0', 'vscode', g, g
    from generate_series(1, 30) g;
    insert into turns (id, thread_id, ordinal, status, started_at_ms) select 'u' || g, 't' || g, 0, 'completed', g from generate_series(1, 30) g;
    insert into items (id, thread_id, turn_id, ordinal, type, status, payload, started_at_ms)
    select 'iu' || g, 't' || g, 'u' || g, 0, 'userMessage', 'completed',
      jsonb_build_object('type', 'userMessage', 'content', jsonb_build_array(jsonb_build_object('type', 'text', 'text', case when g % 2 = 0 then 'the parser has a deadlock' else 'the lexer times out' end))), g
    from generate_series(1, 30) g
    union all
    select 'ia' || g, 't' || g, 'u' || g, 1, 'agentMessage', 'completed',
      jsonb_build_object('type', 'agentMessage', 'text', case when g % 7 = 0 then 'a timeout in the shared buffer' else 'fixed it' end), g
    from generate_series(1, 30) g`);
}
