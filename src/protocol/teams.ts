/**
 * Our extensions for a server a team shares (docs/teams.md): who a thread belongs to and whom it
 * is shared with (`thread/read`'s `access`, `thread/share`), the audit trail (`audit/list`,
 * admins only), and per-user token usage against the daily quota (`account/usage/read`, Codex's
 * method name and shape, plus our `quota`). Who is signed in is `account/read`'s `user`.
 */
import { z } from "zod";

const ThreadId = z.string().min(1, "threadId must not be empty");
const UserName = z.string().min(1).max(64);

export const ShareAccess = z.enum(["read", "write"]).meta({ id: "ShareAccess" });

export const UserRef = z.object({ userId: z.string(), name: z.string() }).meta({ id: "UserRef" });

/** The signed-in user (account/read `user`). */
export const SignedInUser = z
  .object({
    userId: z.string(),
    name: z.string(),
    admin: z.boolean(),
    /** Where this user's threads and commands may work; null: anywhere (admins, the local user). */
    roots: z.array(z.string()).nullable(),
    dangerFullAccess: z.boolean(),
    /** How the connection signed in: the server's own token or stdio (local), an API token, a JWT. */
    signIn: z.enum(["local", "stdio", "token", "jwt"]),
  })
  .meta({ id: "SignedInUser" });

/** thread/read's `access`: whose thread it is, whom it is shared with, and what the reader may do. */
export const ThreadAccess = z
  .object({
    owner: UserRef,
    sharedWith: z.array(UserRef.extend({ access: ShareAccess })),
    /** owner; write or read (shared with the reader); admin (another user's thread, read as an admin). */
    yours: z.enum(["owner", "write", "read", "admin"]),
  })
  .meta({ id: "ThreadAccess" });

export const ThreadShareParams = z
  .object({
    threadId: ThreadId,
    /** The user to share with, by name. */
    user: UserName,
    /** `none` takes the share back. */
    access: z.enum(["read", "write", "none"]),
  })
  .meta({ id: "ThreadShareParams" });
export const ThreadShareResponse = z.object({ access: ThreadAccess }).meta({ id: "ThreadShareResponse" });

// ---- audit/list ---------------------------------------------------------------------------------

export const AuditEntry = z
  .object({
    id: z.number().int(),
    atMs: z.number().int(),
    userId: z.string().nullable(),
    userName: z.string(),
    /** An admin acting on another user's thread. */
    admin: z.boolean(),
    action: z.string(),
    threadId: z.string().nullable(),
    connection: z.string().nullable(),
    remote: z.string().nullable(),
    client: z.string().nullable(),
    detail: z.record(z.string(), z.unknown()),
  })
  .meta({ id: "AuditEntry" });
export type AuditEntry = z.infer<typeof AuditEntry>;

export const AuditListParams = z
  .object({
    /** Only this user's rows (by name). */
    user: UserName.nullable().optional(),
    threadId: ThreadId.nullable().optional(),
    /** Only rows at or after this time (ms since the epoch). */
    sinceMs: z.number().int().nonnegative().nullable().optional(),
    /** Rows after this one (the previous page's nextCursor). */
    cursor: z.string().regex(/^\d{1,18}$/, "cursor is a cursor returned by audit/list").nullable().optional(),
    limit: z.number().int().min(1).max(1000).nullable().optional(),
  })
  .meta({ id: "AuditListParams" });
export const AuditListResponse = z.object({ data: z.array(AuditEntry), nextCursor: z.string().nullable() }).meta({ id: "AuditListResponse" });

// ---- account/usage/read -------------------------------------------------------------------------

/** Codex's GetAccountTokenUsageParams, plus `user` (admins: another user's usage, by name). */
export const GetAccountTokenUsageParams = z
  .object({ threadId: z.string().nullable().optional(), user: UserName.nullable().optional() })
  .optional()
  .meta({ id: "GetAccountTokenUsageParams" });

export const UserQuota = z
  .object({
    /** Model tokens (input, cached included, plus output) counted today (UTC) and the daily limit. */
    tokensToday: z.number().int(),
    tokensPerDay: z.number().int().nullable(),
    /** Turns running now on the user's threads (every process) and the limit. */
    activeTurns: z.number().int(),
    maxConcurrentTurns: z.number().int().nullable(),
    requestsPerSecond: z.number().int().nullable(),
  })
  .meta({ id: "UserQuota" });

export const GetAccountTokenUsageResponse = z
  .object({
    summary: z.object({
      lifetimeTokens: z.number().int().nullable(),
      peakDailyTokens: z.number().int().nullable(),
      longestRunningTurnSec: z.number().int().nullable(),
      currentStreakDays: z.number().int().nullable(),
      longestStreakDays: z.number().int().nullable(),
    }),
    /** The last 30 days with usage, oldest first (`startDate` YYYY-MM-DD, UTC). */
    dailyUsageBuckets: z.array(z.object({ startDate: z.string(), tokens: z.number().int() })).nullable(),
    threadUsage: z.null().optional(),
    user: UserRef,
    quota: UserQuota,
  })
  .meta({ id: "GetAccountTokenUsageResponse" });
