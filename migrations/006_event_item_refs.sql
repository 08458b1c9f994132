-- Events that announce an item refer to its row instead of repeating its payload (issue 16:
-- store each text once). `params` then holds {"$item": id, ...overrides} where the item was;
-- replay reads the rows named here and puts their payloads back (src/store/event-refs.ts).
-- Null: params are complete as stored (every row written before this migration).
alter table thread_events add column item_ids text[];
