-- The full sandbox policy of a thread (writableRoots, networkAccess, /tmp exclusions) as a
-- turn/start `sandboxPolicy` gave it; null means the defaults of the `sandbox` mode.
alter table threads add column sandbox_policy jsonb;
