-- Each user/agent message keeps its tsvector in a stored column (issue 16: words frequent in messages).
--
-- With more matches than HIT_LIMITS.messages, search walks threads in listing order and tests each
-- thread's messages (src/store/thread-search.ts). With only the expression index of 004, every test
-- recomputed to_tsvector(item_search_text(…)) (~8 µs a message on this machine, ~10 messages a
-- thread): "deadlock" in 1 of 8 messages took 32 ms at 100 000 threads / 1M items, a query with
-- an AND and a NOT ("parser deadlock -timeout") ~100 ms on Postgres and ~150 ms on PGlite.
-- Reading the stored value is ~1 µs (that walk over 277 threads: 39 ms -> 3.3 ms, EXPLAIN ANALYZE).
--
-- A generated column: computed once when the item is inserted or its payload updated (the
-- expression index computed the same tsvector there), with the same text as before
-- (item_search_text, the first 100 000 characters of 007: every tsvector stays under 1 MiB), so
-- exactly the same messages match. Null for other item types. The GIN index moves onto the column
-- (same entries, same size); `select *` of items now carries the column, so the store's readers
-- of items name their columns (history-pages.ts, turn-store.ts).
--
-- Upgrade: adding a stored generated column rewrites `items` and its indexes under an exclusive
-- lock (no bloat, unlike a backfill UPDATE): every existing message gets its words here. Measured
-- on a 2-core machine at 1 000 000 items (100 000 threads of 10 messages): 36 s on PostgreSQL 15,
-- 60 s on PGlite (at open); the server starts serving only after it. Sizes there: items 425 ->
-- 696 MB, items with its indexes 751 -> 947 MB, the database 978 -> 1175 MB (+20 %; ~190 bytes
-- of tsvector per message). Writes: the tsvector is computed once per insert/update, as the
-- expression index did; WAL per message insert + update 3.0 -> 3.5 kB, latency unchanged within
-- noise (pgbench of an agentMessage insert + completion update: 0.71-0.76 -> 0.74-0.80 ms).
alter table items add column search_words tsvector generated always as (
  case when type in ('userMessage', 'agentMessage') then to_tsvector('simple'::regconfig, item_search_text(type, payload)) end
) stored;

drop index items_search_words;
create index items_search_words on items using gin (search_words) where type in ('userMessage', 'agentMessage');
-- As 005: a small pending list, so that no search reads megabytes of unmerged entries.
alter index items_search_words set (gin_pending_list_limit = 256);
