-- A server a team can share (issue 28): users and their API tokens, threads owned by users and
-- shared with others, per-user token usage and turn slots, and an append-only audit trail. All in
-- the database, so every process of a cluster shares them.
-- Must run unchanged on PostgreSQL 15 and on PGlite (PostgreSQL 18).

-- Named users. `local` is the implicit user of a one-user setup (the server's own token, stdio,
-- APP_SERVER_AUTH=none): it has no row; threads made before this migration belong to it.
create table users (
  id                 text primary key,
  name               text not null,
  admin              boolean not null default false,
  -- Directories this user's threads, commands and searches must stay inside (real paths are
  -- checked at use). Empty: none allowed unless admin (admins are not confined).
  roots              text[] not null default '{}',
  -- May use the danger-full-access sandbox (no OS sandbox at all).
  danger_full_access boolean not null default false,
  -- The API token: `aas_<token_id>_<secret>`; the secret is kept only as an scrypt hash
  -- (`scrypt$N$r$p$salt$hash`, base64url). Null: the user signs in only with a JWT.
  token_id           text unique,
  token_hash         text,
  created_at_ms      bigint not null,
  updated_at_ms      bigint not null,
  revoked_at_ms      bigint
);
-- A name is unique among users that are not revoked (a revoked name can be given out again; the
-- new user is someone else: the old one's threads stay the old one's).
create unique index users_active_name on users (name) where revoked_at_ms is null;

alter table threads add column user_id text not null default 'local';
create index threads_by_user on threads (user_id, archived, created_at_ms desc, id desc);

-- A thread shared with another user: `read` (read, resume, follow), or `write` (also turns,
-- steer, interrupt, approvals, rename, archive).
create table thread_shares (
  thread_id     text not null references threads (id) on delete cascade,
  user_id       text not null,
  access        text not null check (access in ('read', 'write')),
  created_at_ms bigint not null,
  primary key (thread_id, user_id)
);
create index thread_shares_by_user on thread_shares (user_id);

-- Saved approval rules belong to the user whose approval saved them: one person's
-- "don't ask again for rm" says nothing about another's threads.
alter table execpolicy_rules add column user_id text not null default 'local';
alter table execpolicy_rules drop constraint execpolicy_rules_pattern_key;
alter table execpolicy_rules add constraint execpolicy_rules_user_pattern_key unique (user_id, pattern);

-- Model tokens per user and UTC day (input, cached input included, plus output), from the
-- providers' usage reports.
create table user_token_usage (
  user_id       text not null,
  day           date not null,
  input_tokens  bigint not null default 0,
  output_tokens bigint not null default 0,
  primary key (user_id, day)
);

-- Per-user concurrent turns across every process: a turn holds one of the user's numbered slots
-- (the primary key makes two turns unable to hold the same one). A slot of a process that stopped
-- heartbeating (processes.expires_at) is free again.
create table user_turn_slots (
  user_id       text not null,
  slot          integer not null,
  process_id    text not null,
  turn_id       text,
  acquired_at_ms bigint not null,
  primary key (user_id, slot)
);

-- Who did what. Rows are only ever added (the trigger refuses updates, deletes and truncation).
create table audit_log (
  id            bigserial primary key,
  at_ms         bigint not null,
  -- Who: null for the command line (`app-server users …`), whose OS user is in user_name.
  user_id       text,
  user_name     text not null,
  -- The actor used admin rights on another user's thread.
  admin         boolean not null default false,
  action        text not null,
  thread_id     text,
  -- From which connection: this process's id and the connection's number, its address, its client.
  connection    text,
  remote        text,
  client        text,
  detail        jsonb not null default '{}'
);
create index audit_log_by_time on audit_log (at_ms, id);
create index audit_log_by_user on audit_log (user_id, at_ms);
create index audit_log_by_thread on audit_log (thread_id, at_ms);

create function audit_log_append_only() returns trigger language plpgsql as $$
begin
  raise exception 'audit_log is append-only';
end $$;
create trigger audit_log_no_update before update or delete on audit_log for each row execute function audit_log_append_only();
create trigger audit_log_no_truncate before truncate on audit_log for each statement execute function audit_log_append_only();
