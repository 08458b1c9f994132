/**
 * The team methods (docs/teams.md): thread/share, audit/list (admins), account/usage/read, and the
 * helpers other handlers use to show a thread's owner and to keep lists to what a user may see.
 * Who may call them is the request guard's business (src/identity/method-rules.ts).
 */
import type { AppContext } from "../../app-context.js";
import { LOCAL_USER_ID, type Principal } from "../../identity/principal.js";
import { utcDay } from "../../identity/quotas.js";
import type { Connection } from "../connection.js";
import { invalidParams, threadNotFound } from "../errors.js";

/** Threads a principal sees in lists: null (every thread) for admins, else its own and those shared with it. */
export function visibleTo(who: Principal): string | null {
  return who.admin ? null : who.id;
}

/** The ids of `ids` the principal may see. */
export async function visibleIds(app: AppContext, who: Principal, ids: string[]): Promise<string[]> {
  if (who.admin) return ids;
  const access = await app.team.users.threadsAccess(ids, who.id);
  return ids.filter((id) => {
    const a = access.get(id);
    return a !== undefined && (a.ownerId === who.id || a.shared !== null);
  });
}

function nameOf(app: AppContext, userId: string, local: Principal): string {
  if (userId === LOCAL_USER_ID) return local.id === LOCAL_USER_ID ? local.name : "local";
  return app.team.directory.nameOf(userId) ?? userId;
}

/** thread/read's and thread/share's `access`: owner, shares and the reader's own level. */
export async function threadAccessView(app: AppContext, conn: Connection, threadId: string) {
  const who = conn.principal;
  const row = await app.team.users.threadAccess(threadId, who.id);
  if (!row) return undefined;
  const shares = await app.team.users.sharesOf(threadId);
  const yours = row.ownerId === who.id ? "owner" : (row.shared ?? "admin");
  return {
    owner: { userId: row.ownerId, name: nameOf(app, row.ownerId, who) },
    sharedWith: shares.map((s) => ({ userId: s.userId, name: s.name, access: s.access })),
    yours,
  } as const;
}

const DAYS_SHOWN = 30;

export function registerTeamHandlers(conn: Connection, app: AppContext): void {
  const { team } = app;

  conn.handle("thread/share", async (p, { connection }) => {
    // The thread first: an unknown thread answers the same whoever is named (the guard has let
    // only the owner or an admin through for a thread that exists).
    const owner = (await team.users.threadAccess(p.threadId, connection.principal.id))?.ownerId;
    if (owner === undefined) throw threadNotFound(p.threadId);
    const user = team.directory.byName(p.user) ?? (await team.users.byName(p.user));
    if (!user) throw invalidParams(`Invalid params: no user named ${p.user}`);
    if (owner === user.id) throw invalidParams(`Invalid params: ${p.user} owns thread ${p.threadId}`);
    await team.users.share(p.threadId, user.id, p.access === "none" ? null : p.access);
    if (p.access !== "write") {
      // Taken back (or down to read): this process's connections of that user stop being asked
      // questions for it at once, and stop following it when the share is gone (other processes:
      // within their users refresh, team.ts).
      for (const c of team.connectionsOf(user.id)) {
        if (p.access === "read" && team.guard.levelOn(c, p.threadId) === "write") team.guard.regrant(c, p.threadId, "read");
        if (p.access === "none") {
          team.guard.revoke(c, p.threadId);
          app.runtime.unsubscribe(p.threadId, c);
        }
      }
    }
    return { access: (await threadAccessView(app, connection, p.threadId))! };
  });

  conn.handle("audit/list", async (p) => {
    await team.audit.settled(); // this process's rows still being written
    const limit = p.limit ?? 200;
    const data = await team.auditStore.list({ userName: p.user ?? null, threadId: p.threadId ?? null, sinceMs: p.sinceMs ?? null, afterId: p.cursor ? Number(p.cursor) : null, limit });
    return { data, nextCursor: data.length === limit ? String(data[data.length - 1]!.id) : null };
  });

  conn.handle("account/usage/read", async (p, { connection }) => {
    const who = connection.principal;
    let target = { userId: who.id, name: who.name };
    if (p?.user && p.user !== who.name) {
      if (!who.admin) throw invalidParams("Invalid params: only admins can read another user's usage");
      const user = team.directory.byName(p.user) ?? (await team.users.byName(p.user));
      if (!user) throw invalidParams(`Invalid params: no user named ${p.user}`);
      target = { userId: user.id, name: user.name };
    }
    const from = utcDay(Date.now() - (DAYS_SHOWN - 1) * 86_400_000);
    await team.quotas.flush(); // this process's counts still waiting for a transaction
    const [usage, today, running] = await Promise.all([
      team.quotaStore.usage(target.userId, from),
      team.quotaStore.tokensOn(target.userId, utcDay()),
      team.quotaStore.runningTurns(target.userId),
    ]);
    const limits = team.quotas.limits;
    return {
      summary: { lifetimeTokens: usage.lifetime, peakDailyTokens: usage.peak, longestRunningTurnSec: null, currentStreakDays: null, longestStreakDays: null },
      dailyUsageBuckets: usage.days.map((d) => ({ startDate: d.day, tokens: d.tokens })),
      threadUsage: null,
      user: target,
      quota: {
        tokensToday: today,
        tokensPerDay: limits.tokensPerDay ?? null,
        activeTurns: running,
        maxConcurrentTurns: limits.maxConcurrentTurns ?? null,
        requestsPerSecond: limits.requestsPerSecond ?? null,
      },
    };
  });
}
