-- The search indexes of 004_full_text_search.sql take new entries into GIN's pending list (cheap
-- inserts on the turn's commit path) until the list is merged. Every search reads the whole list,
-- and only VACUUM or a full list merges it: with the default 4 MB, a search that finds nothing
-- took ~40 ms on Postgres after a bulk load instead of 0.04 ms, and PGlite has no autovacuum.
-- 256 kB keeps inserts cheap and bounds what each search has to read.
alter index threads_search_words set (gin_pending_list_limit = 256);
alter index threads_search_trigrams set (gin_pending_list_limit = 256);
alter index items_search_words set (gin_pending_list_limit = 256);
