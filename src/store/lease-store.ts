/**
 * SQL of the process registry and thread leases (migrations/003_cluster_leases.sql). Liveness is
 * judged by the database clock (`now()`), never by a process's own clock.
 */
import type { Sql } from "postgres";
import type { ThreadRecord } from "./records.js";
import type { Queryable } from "./thread-store.js";
import { failedCheck } from "./transaction.js";

/** A thread row as a lease acquisition returns it (the caller's caches are refreshed from it). */
export type LeasedRow = ThreadRecord & { leaseEpoch: number };

/**
 * The `application_name` of a process's database sessions: how another process finds the sessions
 * of one it has taken for dead (endSessionsOfDead).
 */
export function sessionNameOf(processId: string): string {
  return `agent-app-server ${processId}`;
}

/** `owner` is a live process (its heartbeat has not expired). */
const alive = (q: Queryable, owner: ReturnType<Queryable>) =>
  q`exists (select 1 from processes p where p.id = ${owner} and p.expires_at > now())`;

export class LeaseStore {
  constructor(readonly sql: Sql) {}

  /** Registers this process; expires earlier incarnations of the same node (they are dead). */
  async register(id: string, nodeId: string | null, ttlMs: number): Promise<void> {
    await this.sql`
      insert into processes (id, node_id, expires_at) values (${id}, ${nodeId ?? id}, now() + ${ttlMs} * interval '1 millisecond')
      on conflict (id) do update set expires_at = excluded.expires_at`;
    if (nodeId) await this.sql`update processes set expires_at = now() - interval '1 millisecond' where node_id = ${nodeId} and id <> ${id}`;
  }

  /** Extends this process's liveness; re-registers if its row was cleaned away. */
  async heartbeat(id: string, ttlMs: number): Promise<void> {
    await this.sql`
      insert into processes (id, node_id, expires_at) values (${id}, ${id}, now() + ${ttlMs} * interval '1 millisecond')
      on conflict (id) do update set expires_at = excluded.expires_at`;
  }

  /** Ids of the other live processes (their registrations have not expired). */
  async liveOthers(id: string): Promise<string[]> {
    const rows = await this.sql<{ id: string }[]>`select id from processes where id <> ${id} and expires_at > now()`;
    return rows.map((r) => r.id);
  }

  /** A clean exit: leases this process still holds become free at once. */
  async unregister(id: string): Promise<void> {
    await this.sql`delete from processes where id = ${id}`;
  }

  /** Old rows of dead processes no thread points at any more. */
  async forgetDead(): Promise<void> {
    await this.sql`
      delete from processes p where p.expires_at < now() - interval '1 hour'
        and not exists (select 1 from threads t where t.owner_id = p.id)`;
  }

  /**
   * Takes the lease of a thread that is free (no owner, a dead owner, or us) and has no turn in
   * progress; bumps the epoch and reserves a fresh block of seq numbers from the row. "busy" when a
   * live process holds it or a turn is in progress (a dead owner's turn is the sweeper's job);
   * "unregistered" when `me` itself reads dead (its registration expired during an outage): others
   * may be sweeping its threads, so it takes nothing until it has renewed its registration.
   */
  async acquire(threadId: string, me: string): Promise<LeasedRow | "busy" | "missing" | "unregistered"> {
    const sql = this.sql;
    const rows = await sql<LeasedRow[]>`
      update threads t set owner_id = ${me}, lease_epoch = t.lease_epoch + 1
      where t.id = ${threadId}
        and ${alive(sql, sql`${me}`)}
        and (t.owner_id is null or t.owner_id = ${me} or not ${alive(sql, sql`t.owner_id`)})
        and not exists (select 1 from turns u where u.thread_id = t.id and u.status = 'inProgress')
      returning t.*`;
    if (rows[0]) return rows[0];
    const [row] = await sql<{ meAlive: boolean }[]>`select ${alive(sql, sql`${me}`)} as me_alive from threads where id = ${threadId}`;
    if (!row) return "missing";
    return row.meAlive ? "busy" : "unregistered";
  }

  /**
   * The fence: inside a transaction that records a thread's facts, checks that this process still
   * holds the lease at `epoch` (row-locking it until commit, so a takeover waits for the write or
   * the write sees the takeover) and raises the seq reservation. False: the lease is lost.
   */
  async fence(tx: Queryable, threadId: string, me: string, epoch: number, seqUpTo: number): Promise<boolean> {
    // A lost lease fails the statement, so the transaction aborts in the database even when its
    // COMMIT was sent with the statements (a pipelined transaction, transaction.ts failedCheck).
    try {
      await tx`
        with fenced as (
          update threads set seq_reserved = greatest(seq_reserved, ${seqUpTo})
          where id = ${threadId} and owner_id = ${me} and lease_epoch = ${epoch} returning 1)
        select (case when count(*) = 1 then '1' else 'aas: lease lost' end)::int as ok from fenced`;
      return true;
    } catch (err) {
      if (failedCheck(err, "aas: lease lost")) return false;
      throw err;
    }
  }

  /** Gives back the leases `me` holds on `threadIds` (a stopping process, whatever their epochs). */
  async releaseMany(threadIds: string[], me: string): Promise<void> {
    if (threadIds.length > 0) await this.sql`update threads set owner_id = null where id = any(${threadIds}) and owner_id = ${me}`;
  }

  async release(threadId: string, me: string, epoch: number): Promise<void> {
    await this.sql`update threads set owner_id = null where id = ${threadId} and owner_id = ${me} and lease_epoch = ${epoch}`;
  }

  /** The live process holding a thread's lease, if it is not `me`. */
  async liveOwner(threadId: string, me: string): Promise<string | null> {
    const sql = this.sql;
    const [row] = await sql<{ ownerId: string }[]>`
      select t.owner_id from threads t where t.id = ${threadId} and t.owner_id <> ${me} and ${alive(sql, sql`t.owner_id`)}`;
    return row?.ownerId ?? null;
  }

  /** Threads with a turn in progress whose owner is gone (or that never had one: older data). */
  async orphanedThreads(): Promise<Array<{ id: string; ownerId: string | null }>> {
    const sql = this.sql;
    return sql<{ id: string; ownerId: string | null }[]>`
      select distinct u.thread_id as id, t.owner_id from turns u join threads t on t.id = u.thread_id
      where u.status = 'inProgress' and (t.owner_id is null or not ${alive(sql, sql`t.owner_id`)})`;
  }

  /**
   * Ends the database sessions of `owner` if it still reads dead (its registration expired): a
   * process frozen, or cut off by a network path that hangs, in the middle of a transaction keeps
   * that transaction's row locks (a thread's fence) for as long as TCP keeps the path open, and no
   * server timeout covers a session stuck inside a pipelined statement. Its leases are gone
   * already; ending its sessions frees its locks and fences off anything it still had in flight.
   * The number of sessions ended (0 when none, or when the owner is alive after all).
   */
  async endSessionsOfDead(owner: string): Promise<number> {
    const sql = this.sql;
    const [row] = await sql<{ ended: number }[]>`
      select count(*) filter (where pg_terminate_backend(a.pid))::int as ended from pg_stat_activity a
      where a.application_name = ${sessionNameOf(owner)} and a.pid <> pg_backend_pid()
        and not ${alive(sql, sql`${owner}`)}`;
    return row?.ended ?? 0;
  }

  /**
   * Inside the sweeper's transaction: locks an orphaned thread for this process (`skip locked`: a
   * thread another sweeper is on is skipped — exactly one process wins) and takes its lease.
   */
  async claimOrphan(tx: Queryable, threadId: string, me: string): Promise<{ epoch: number; seqReserved: number } | null> {
    const [row] = await tx<{ leaseEpoch: number; seqReserved: number }[]>`
      select lease_epoch, seq_reserved from threads t
      where t.id = ${threadId} and (t.owner_id is null or not ${alive(tx, tx`t.owner_id`)})
      for update skip locked`;
    if (!row) return null;
    await tx`update threads set owner_id = ${me}, lease_epoch = lease_epoch + 1 where id = ${threadId}`;
    return { epoch: row.leaseEpoch + 1, seqReserved: row.seqReserved };
  }

  /** Thread ids among `ids` with a turn in progress, and whether one waits on an approval. */
  async runningStatus(ids: string[]): Promise<Map<string, { waitingOnApproval: boolean }>> {
    const out = new Map<string, { waitingOnApproval: boolean }>();
    if (ids.length === 0) return out;
    const sql = this.sql;
    const rows = await sql<{ threadId: string; waiting: boolean }[]>`
      select u.thread_id, exists (select 1 from items i where i.turn_id = u.id and i.pending_request is not null and i.completed_at_ms is null) as waiting
      from turns u where u.status = 'inProgress' and u.thread_id in ${sql(ids)}`;
    for (const r of rows) out.set(r.threadId, { waitingOnApproval: r.waiting || (out.get(r.threadId)?.waitingOnApproval ?? false) });
    return out;
  }

  /** Items of a thread waiting on an approval (cross-process mirroring of server requests). */
  async pendingRequests(threadId: string): Promise<Array<{ id: string; pendingRequest: { method: string; params: Record<string, unknown> } }>> {
    return this.sql`
      select id, pending_request from items where thread_id = ${threadId} and pending_request is not null and completed_at_ms is null order by id`;
  }
}
