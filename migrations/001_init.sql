-- Threads, turns, items, model-level history and the per-thread event log.
-- Must run unchanged on PostgreSQL 15 and on PGlite (PostgreSQL 18): plain SQL, no extensions.

create table threads (
  id                     text primary key,
  session_id             text not null,
  -- A fork points at its parent and the fork point instead of copying history (DESIGN.md §6).
  forked_from_id         text references threads (id),   -- the thread the client forked
  -- Whose history log the fork reads (the owner of the fork point: forked_from_id, or one of its
  -- ancestors when forking at an inherited turn).
  fork_parent_id         text references threads (id),
  fork_turn_count        integer,          -- parent turns visible to the fork
  fork_message_count     integer,          -- parent model messages visible to the fork
  name                   text,
  preview                text not null default '',
  ephemeral              boolean not null default false,
  archived               boolean not null default false,
  model_provider         text not null,
  model                  text not null,
  reasoning_effort       text,
  cwd                    text not null,
  approval_policy        jsonb not null,
  sandbox                text not null,
  base_instructions      text,
  developer_instructions text,
  dynamic_tools          jsonb not null default '[]',
  config                 jsonb,
  cli_version            text not null,
  source                 text not null,
  -- Set while the last turn failed: the thread reports `systemError` until its next turn.
  system_error           boolean not null default false,
  -- Running token totals of the thread (thread/tokenUsage/updated `total`).
  token_usage            jsonb,
  -- Highest event sequence number handed out (persisted in blocks, see src/runtime/seq.ts).
  seq_reserved           bigint not null default 0,
  created_at_ms          bigint not null,
  updated_at_ms          bigint not null
);

-- thread/list: keyset pagination over (sort key, id) within the archived filter.
create index threads_by_created on threads (archived, created_at_ms desc, id desc);
create index threads_by_updated on threads (archived, updated_at_ms desc, id desc);

create table turns (
  id                     text primary key,
  thread_id              text not null references threads (id) on delete cascade,
  ordinal                integer not null,  -- 0-based position in its thread
  status                 text not null,     -- inProgress | completed | interrupted | failed
  stop_reason            text,
  error                  jsonb,
  client_user_message_id text,
  started_at_ms          bigint not null,
  completed_at_ms        bigint,
  unique (thread_id, ordinal)
);
create unique index turns_client_message on turns (thread_id, client_user_message_id) where client_user_message_id is not null;
-- Start-up recovery looks for turns a dead process left running; this keeps that lookup O(running).
create index turns_in_progress on turns (thread_id, ordinal) where status = 'inProgress';

create table items (
  id              text primary key,
  thread_id       text not null references threads (id) on delete cascade,
  turn_id         text not null references turns (id) on delete cascade,
  ordinal         integer not null,       -- position within the turn
  type            text not null,
  status          text,                   -- item lifecycle: inProgress until item/completed
  payload         jsonb not null,         -- the ThreadItem as sent on the wire
  started_at_ms   bigint not null,
  completed_at_ms bigint,
  -- The model's tool-call id for tool items: how a restarted process matches items to calls.
  call_id         text,
  -- The server request (approval) this item waits on, if any: {method, params}. A process
  -- restarted while it waits restores the turn and asks again instead of failing it.
  pending_request jsonb,
  unique (turn_id, ordinal)
);
-- Reading a thread's turns fetches its items by thread (thread/read, resume, fork).
create index items_by_thread on items (thread_id, turn_id, ordinal);

-- Exactly what the model saw: internal messages (with provider ids and reasoning signatures),
-- so a resumed thread sends the same bytes as a process that never stopped (DESIGN.md §6).
-- Append-only. Rollback and compaction are markers in this log, never deletes or rewrites: the
-- model context is computed by replaying it (src/runtime/history.ts), and a fork reads its
-- parent's log up to the fork point, so later changes to the parent never reach the fork.
create table model_messages (
  thread_id    text not null references threads (id) on delete cascade,
  ordinal      integer not null,          -- position in the thread's own log
  turn_id      text references turns (id) on delete cascade,
  turn_ordinal integer,                   -- the turn the message belongs to (null: thread-level settings)
  kind         text not null default 'message',  -- message | rollback | compaction
  message      jsonb not null,            -- a Message, or the marker's payload
  primary key (thread_id, ordinal)
);

-- Every thread-scoped notification except */delta ones, stored with the fact it announces.
create table thread_events (
  thread_id     text not null references threads (id) on delete cascade,
  seq           bigint not null,
  method        text not null,
  params        jsonb not null,
  emitted_at_ms bigint not null,
  primary key (thread_id, seq)
);
