-- Full-text search over thread names, previews and every user/agent message (issue 16).
-- Core Postgres only (no pg_trgm): runs unchanged on PostgreSQL 15 and on PGlite.
--
-- Indexes on expressions, not stored columns: `select *` of threads/items stays as it was and
-- nothing is read back that only search needs. 'simple' keeps every word as written (lower-cased,
-- no stemming, no stop words): code identifiers and any language match as typed.

-- The words of a user or agent message item (the ThreadItem JSON as sent on the wire).
create function item_search_text(item_type text, payload jsonb) returns text
language sql immutable parallel safe as $$
  select case item_type
    when 'agentMessage' then coalesce(payload->>'text', '')
    when 'userMessage' then coalesce(
      (select string_agg(e->>'text', ' ') from jsonb_array_elements(
        case when jsonb_typeof(payload->'content') = 'array' then payload->'content' else '[]'::jsonb end) e),
      '')
  end
$$;

create function thread_search_text(name text, preview text) returns text
language sql immutable parallel safe as $$ select coalesce(name, '') || chr(10) || coalesce(preview, '') $$;

-- The distinct 3-character substrings of a text: with a GIN index over them, an ILIKE '%term%'
-- (thread/list searchTerm keeps Codex's substring semantics on names and previews) first narrows
-- to the rows holding every trigram of the term, like pg_trgm but in core SQL.
create function text_trigrams(t text) returns text[]
language sql immutable strict parallel safe as $$
  select coalesce(array_agg(distinct substr(t, i, 3)), '{}') from generate_series(1, length(t) - 2) as i
$$;

create index threads_search_words on threads using gin (to_tsvector('simple'::regconfig, thread_search_text(name, preview)));
create index threads_search_trigrams on threads using gin (text_trigrams(lower(thread_search_text(name, preview))));
create index items_search_words on items using gin (to_tsvector('simple'::regconfig, item_search_text(type, payload)))
  where type in ('userMessage', 'agentMessage');
