-- The words of a message are indexed from its first 100 000 characters.
--
-- A tsvector holds at most 1 MiB, and the items_search_words index computes one for every message
-- it stores: a ~900 KB message of distinct words (a pasted lock file, a list of hashes — under the
-- default input limit) made "string is too long for tsvector", so the user message's insert failed
-- its turn/start, and an agent reply like it failed its turn. Text costs at most ~6 bytes of
-- tsvector per character (one 4-byte letter per word and a space: the letter, its 4-byte entry,
-- a position count and a position), so 100 000 characters stay under the limit whatever they
-- are. Positions past 16383 are already all the same to Postgres (phrase search is exact only that
-- far), so little is lost.
create or replace function item_search_text(item_type text, payload jsonb) returns text
language sql immutable parallel safe as $$
  select left(case item_type
    when 'agentMessage' then coalesce(payload->>'text', '')
    when 'userMessage' then coalesce(
      (select string_agg(e->>'text', ' ') from jsonb_array_elements(
        case when jsonb_typeof(payload->'content') = 'array' then payload->'content' else '[]'::jsonb end) e),
      '')
  end, 100000)
$$;

-- The index still holds the words of longer messages as the old definition saw them: rebuild it
-- when such a message exists (its JSON is then over 100 000 bytes), so that the index and a
-- per-row test agree.
do $$
begin
  if exists (select 1 from items where type in ('userMessage', 'agentMessage') and octet_length(payload::text) > 100000) then
    reindex index items_search_words;
  end if;
end
$$;
