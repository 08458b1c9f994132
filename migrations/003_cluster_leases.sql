-- Several server processes on one Postgres (issue 12, DESIGN.md §7): a registry of live processes
-- (heartbeats) and, on each thread, the lease a process holds while it writes the thread's facts.
-- A lease is (owner_id, lease_epoch): taking it bumps the epoch, and every write of the thread's
-- facts checks both (fencing), so a process that lost its lease cannot write.
create table processes (
  id          text primary key,
  -- The home directory's identity: a restarted process on the same home expires its predecessor at
  -- once instead of waiting for the TTL (the predecessor is dead: the home is locked while in use).
  node_id     text not null,
  started_at  timestamptz not null default now(),
  -- Database time, so clocks of different hosts never matter.
  expires_at  timestamptz not null
);

alter table threads add column owner_id text;
alter table threads add column lease_epoch bigint not null default 0;
