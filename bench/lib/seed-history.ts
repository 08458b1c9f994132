/**
 * Seeds threads with stored history using set-based SQL (INSERT … SELECT generate_series), in
 * the shapes the server itself writes for a message-only turn (checked against rows a real turn
 * stored; columns of migrations/001_init.sql):
 *   - turns: one row per turn, completed, stop_reason finalAnswer;
 *   - items: 2 per turn (userMessage, agentMessage), payload = the ThreadItem as sent on the wire;
 *   - model_messages: the environment context, then user + assistant message per turn;
 *   - thread_events: thread/started, then 9 per turn (status active, turn/started, item
 *     started/completed × 2, tokenUsage, status idle, turn/completed); deltas are not stored.
 * threads.seq_reserved is set above the last seq, as the server would have persisted it.
 */
import { randomUUID } from "node:crypto";
import type { Sql } from "postgres";

export const EVENTS_PER_TURN = 9;

export interface SeededThread {
  id: string;
  turns: number;
  items: number;
  modelMessages: number;
  events: number;
  lastSeq: number;
}

export interface SeedOptions {
  turns: number;
  /** Bytes of each agent reply (default 400). */
  agentTextBytes?: number;
  /** Also write model_messages and thread_events (default true); false: turns + items only. */
  full?: boolean;
  /** Rows per INSERT statement (turns per chunk). */
  chunkTurns?: number;
}

const LOREM = "The change is in place: the store now pages with a keyset cursor, the tests pass, and the old offset query is gone. ";

export async function seedHistoryThread(sql: Sql, o: SeedOptions): Promise<SeededThread> {
  const id = randomUUID();
  const full = o.full ?? true;
  const T = o.turns;
  const textBytes = o.agentTextBytes ?? 400;
  const agentText = LOREM.repeat(Math.ceil(textBytes / LOREM.length)).slice(0, textBytes);
  const now = Date.now();
  const t0 = now - T * 60_000 - 60_000;
  const lastSeq = full ? 1 + T * EVENTS_PER_TURN : 0;
  const cwd = "/home/dev/project-bench";
  const envText = `<environment_context>\n  <cwd>${cwd}</cwd>\n  <approval_policy>on-request</approval_policy>\n  <sandbox_mode>workspace-write</sandbox_mode>\n  <shell>bash</shell>\n</environment_context>`;

  await sql.unsafe(
    `insert into threads (id, session_id, name, preview, ephemeral, archived, model_provider, model, cwd, approval_policy, sandbox,
       dynamic_tools, cli_version, source, seq_reserved, created_at_ms, updated_at_ms, token_usage)
     values ($1, $1, null, $2, false, false, 'openai', 'mock-model', $3, '"on-request"'::jsonb, 'workspace-write', '[]'::jsonb, '0.1.0',
       'appServer', $4, $5, $6, '{"inputTokens":10,"totalTokens":15,"outputTokens":5,"cachedInputTokens":0,"cacheWriteInputTokens":0,"reasoningOutputTokens":0}'::jsonb)`,
    [id, `Seeded thread with ${T} turns`, cwd, lastSeq + 1024, t0, now],
  );

  const chunk = o.chunkTurns ?? 5000;
  // Per-turn values shared by the statements below ($1 thread id, $2 base time, k = turn ordinal).
  const turnCols = `
    md5($1::text || '/turn/' || k)::uuid::text as turn_id,
    md5($1::text || '/u/' || k)::uuid::text as user_id,
    md5($1::text || '/a/' || k)::uuid::text as agent_id,
    ($2::bigint + k::bigint * 60000) as s,
    ($2::bigint + k::bigint * 60000 + 30000) as c,
    'Please look at step ' || k || ' of the refactoring and fix what is left.' as utext`;
  for (let lo = 0; lo < T; lo += chunk) {
    const hi = Math.min(T, lo + chunk) - 1;
    const series = `(select ${turnCols}, k from generate_series(${lo}, ${hi}) as k) g`;
    await sql.unsafe(
      `insert into turns (id, thread_id, ordinal, status, stop_reason, started_at_ms, completed_at_ms)
       select turn_id, $1::text, k, 'completed', 'finalAnswer', s, c from ${series}`,
      [id, t0],
    );
    await sql.unsafe(
      `insert into items (id, thread_id, turn_id, ordinal, type, status, payload, started_at_ms, completed_at_ms)
       select user_id, $1::text, turn_id, 0, 'userMessage', 'completed',
         jsonb_build_object('type', 'userMessage', 'id', user_id, 'clientId', null,
           'content', jsonb_build_array(jsonb_build_object('type', 'text', 'text', utext, 'text_elements', '[]'::jsonb)),
           'startedAtMs', s, 'completedAtMs', s), s, s
       from ${series}
       union all
       select agent_id, $1::text, turn_id, 1, 'agentMessage', 'completed',
         jsonb_build_object('type', 'agentMessage', 'id', agent_id, 'text', $3::text, 'phase', null, 'moderation', null,
           'memoryCitation', null, 'delivery', null, 'questions', null, 'startedAtMs', s + 1000, 'completedAtMs', c), s + 1000, c
       from ${series}`,
      [id, t0, agentText],
    );
    if (!full) continue;
    await sql.unsafe(
      `insert into model_messages (thread_id, ordinal, turn_id, turn_ordinal, kind, message)
       select $1::text, 1 + 2 * k, turn_id, k, 'message',
         jsonb_build_object('role', 'user', 'content', jsonb_build_array(jsonb_build_object('type', 'text', 'text', utext)))
       from ${series}
       union all
       select $1::text, 2 + 2 * k, turn_id, k, 'message',
         jsonb_build_object('role', 'assistant', 'content', jsonb_build_array(jsonb_build_object('type', 'text', 'text', $3::text)),
           'providerItemId', 'msg_seed_' || k, 'providerMessageId', 'resp_seed_' || k)
       from ${series}`,
      [id, t0, agentText],
    );
    // Events: seq = 2 + 9k + e.
    await sql.unsafe(
      `insert into thread_events (thread_id, seq, method, params, emitted_at_ms)
       select $1::text, 2 + 9 * k + e, m, p || jsonb_build_object('seq', 2 + 9 * k + e), case when e < 4 then s else c end
       from (
         select k, s, c, e,
           (array['thread/status/changed','turn/started','item/started','item/completed','item/started','item/completed',
                  'thread/tokenUsage/updated','thread/status/changed','turn/completed'])[e + 1] as m,
           case e
             when 0 then jsonb_build_object('threadId', $1::text, 'status', jsonb_build_object('type', 'active', 'activeFlags', '[]'::jsonb))
             when 1 then jsonb_build_object('threadId', $1::text, 'turn', jsonb_build_object('id', turn_id, 'rootTurnId', turn_id, 'items', '[]'::jsonb,
               'itemsView', 'notLoaded', 'status', 'inProgress', 'error', null, 'startedAt', s / 1000, 'completedAt', null, 'durationMs', null, 'stopReason', null))
             when 2 then jsonb_build_object('threadId', $1::text, 'turnId', turn_id, 'startedAtMs', s, 'item', jsonb_build_object('type', 'userMessage',
               'id', user_id, 'clientId', null, 'content', jsonb_build_array(jsonb_build_object('type', 'text', 'text', utext, 'text_elements', '[]'::jsonb)),
               'startedAtMs', s, 'completedAtMs', null))
             when 3 then jsonb_build_object('threadId', $1::text, 'turnId', turn_id, 'completedAtMs', s, 'item', jsonb_build_object('type', 'userMessage',
               'id', user_id, 'clientId', null, 'content', jsonb_build_array(jsonb_build_object('type', 'text', 'text', utext, 'text_elements', '[]'::jsonb)),
               'startedAtMs', s, 'completedAtMs', s))
             when 4 then jsonb_build_object('threadId', $1::text, 'turnId', turn_id, 'startedAtMs', s + 1000, 'item', jsonb_build_object('type', 'agentMessage',
               'id', agent_id, 'text', '', 'phase', null, 'moderation', null, 'memoryCitation', null, 'delivery', null, 'questions', null,
               'startedAtMs', s + 1000, 'completedAtMs', null))
             when 5 then jsonb_build_object('threadId', $1::text, 'turnId', turn_id, 'completedAtMs', c, 'item', jsonb_build_object('type', 'agentMessage',
               'id', agent_id, 'text', $3::text, 'phase', null, 'moderation', null, 'memoryCitation', null, 'delivery', null, 'questions', null,
               'startedAtMs', s + 1000, 'completedAtMs', c))
             when 6 then jsonb_build_object('threadId', $1::text, 'turnId', turn_id, 'tokenUsage', jsonb_build_object(
               'total', jsonb_build_object('totalTokens', 15 * (k + 1), 'inputTokens', 10 * (k + 1), 'cachedInputTokens', 0, 'cacheWriteInputTokens', 0, 'outputTokens', 5 * (k + 1), 'reasoningOutputTokens', 0),
               'last', jsonb_build_object('totalTokens', 15, 'inputTokens', 10, 'cachedInputTokens', 0, 'cacheWriteInputTokens', 0, 'outputTokens', 5, 'reasoningOutputTokens', 0),
               'modelContextWindow', null))
             when 7 then jsonb_build_object('threadId', $1::text, 'status', jsonb_build_object('type', 'idle'))
             else jsonb_build_object('threadId', $1::text, 'turn', jsonb_build_object('id', turn_id, 'rootTurnId', turn_id, 'items', '[]'::jsonb,
               'itemsView', 'notLoaded', 'status', 'completed', 'error', null, 'startedAt', s / 1000, 'completedAt', c / 1000, 'durationMs', 30000,
               'stopReason', 'finalAnswer'))
           end as p
         from ${series} cross join generate_series(0, 8) as e
       ) ev`,
      [id, t0, agentText],
    );
  }
  if (full) {
    await sql.unsafe(
      `insert into model_messages (thread_id, ordinal, turn_id, turn_ordinal, kind, message)
       values ($1, 0, case when $2::int > 0 then md5($1::text || '/turn/0')::uuid::text end, null, 'message',
         jsonb_build_object('role', 'developer', 'content', jsonb_build_array(jsonb_build_object('type', 'text', 'text', $3::text))))`,
      [id, T, envText],
    );
    await sql.unsafe(
      `insert into thread_events (thread_id, seq, method, params, emitted_at_ms)
       values ($1, 1, 'thread/started', jsonb_build_object('seq', 1, 'thread', jsonb_build_object('id', $1::text, 'sessionId', $1::text, 'cwd', $2::text,
         'status', jsonb_build_object('type', 'idle'), 'turns', '[]'::jsonb, 'modelProvider', 'openai', 'model', 'mock-model', 'preview', '',
         'ephemeral', false, 'source', 'appServer', 'cliVersion', '0.1.0', 'createdAt', $3::bigint / 1000, 'updatedAt', $3::bigint / 1000)), $3)`,
      [id, cwd, t0],
    );
  }
  return { id, turns: T, items: 2 * T, modelMessages: full ? 1 + 2 * T : 0, events: full ? 1 + EVENTS_PER_TURN * T : 0, lastSeq };
}
