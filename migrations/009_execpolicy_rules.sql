-- Saved approval rules (issue 25): command prefixes the user approved with "Yes, and don't ask
-- again for commands that start with …" (`acceptWithExecpolicyAmendment`). Codex appends them to
-- <CODEX_HOME>/rules/default.rules; here they live in the database, which every process of one
-- server shares (several processes on one Postgres share nothing else, so a rule accepted through
-- one of them applies to a turn another one runs), and which a PGlite server keeps under its home.
-- The rules apply server-wide, as Codex's apply to everything under its home; `thread_id` only
-- says where a rule was accepted (not a reference: the rule outlives the thread).
create table execpolicy_rules (
  id            text primary key,
  pattern       text[] not null,
  decision      text not null default 'allow' check (decision = 'allow'),
  thread_id     text,
  created_at_ms bigint not null,
  constraint execpolicy_rules_pattern_key unique (pattern),
  constraint execpolicy_rules_pattern_nonempty check (cardinality(pattern) > 0)
);
