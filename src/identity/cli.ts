/**
 * `app-server users add|list|revoke` and `app-server audit`: run against the server's database
 * directly (--database-url / DATABASE_URL, else the embedded one under --home), so they work on
 * any process of a cluster and while servers run — a revocation reaches running servers within
 * their users refresh (2 s by default). The embedded PGlite database belongs to one process: while
 * a server runs on it, stop it first (the command says so).
 */
import os from "node:os";
import { existsSync } from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import { ConfigError, resolveServeConfig } from "../config.js";
import { openDatabase, type Database } from "../store/database.js";
import { DirectoryLockedError } from "../store/dir-lock.js";
import { AuditStore } from "../store/audit-store.js";
import { SideWrites } from "../store/side-writes.js";
import { UserExistsError, UserStore, type UserRecord } from "../store/user-store.js";
import { AuditLog } from "./audit-log.js";
import { USER_NAME } from "./directory.js";
import { issueToken } from "./tokens.js";

export interface CliIo {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  env: NodeJS.ProcessEnv;
}

const processIo = (): CliIo => ({ stdout: process.stdout, stderr: process.stderr, env: process.env });

export const USERS_HELP = `Usage:
  app-server users add NAME [--admin] [--root DIR]… [--danger-full-access] [--no-token]
  app-server users list [--json]
  app-server users revoke NAME

Manages the users of a server (docs/teams.md). \`add\` prints the user's API token once, as its
last line (only its hash is kept); give it to that person: clients send it as
Authorization: Bearer TOKEN (app-server exec reads it from ~/.config/agent-app-server/token).
\`revoke\` ends the user's token and closes its connections on running servers within seconds.

Options:
  --admin                  sees and acts on every thread (marked in the audit trail)
  --root DIR               a directory the user's threads and commands must stay inside
                           (repeatable); the first one is where its threads start by default
  --danger-full-access     may run without the OS sandbox (danger-full-access)
  --no-token               no API token: the user signs in with single sign-on (JWT) only
  --json                   list: one user object per line
  --home DIR               the server's data directory (embedded database)  [APP_SERVER_HOME]
  --database-url URL       the server's PostgreSQL database                   [DATABASE_URL]
  -h, --help               this help
`;

export const AUDIT_HELP = `Usage: app-server audit [--user NAME] [--thread ID] [--since TIME] [--limit N]

Prints the audit trail (who did what: threads created, forked, archived and shared, turns started,
commands run, approvals decided, rules added and removed, configuration reloaded, admins' access
to other users' threads), oldest first, one JSON object per line.

Options:
  --user NAME              only this user's rows
  --thread ID              only rows about this thread
  --since TIME             only rows from TIME on: an ISO date or date-time (2026-12-01,
                           2026-12-01T09:00:00Z), or a duration back from now (30m, 12h, 7d)
  --limit N                at most N rows (default: all)
  --home DIR               the server's data directory (embedded database)  [APP_SERVER_HOME]
  --database-url URL       the server's PostgreSQL database                   [DATABASE_URL]
  -h, --help               this help
`;

class UsageError extends Error {}

/** The database `serve` with the same --home/--database-url would use (migrated). */
async function openServerDatabase(values: { home?: string; "database-url"?: string }, env: NodeJS.ProcessEnv): Promise<Database> {
  const args = ["--listen", "stdio://"];
  if (values.home) args.push("--home", values.home);
  if (values["database-url"]) args.push("--database-url", values["database-url"]);
  let config;
  try {
    config = resolveServeConfig(args, env);
  } catch (err) {
    if (err instanceof ConfigError) throw new UsageError(err.message);
    throw err;
  }
  try {
    return await openDatabase({
      databaseUrl: config.databaseUrl,
      dataDir: path.join(config.home, "pglite"),
      maxConnections: 2,
      ...(config.databaseSchema ? { schema: config.databaseSchema } : {}),
    });
  } catch (err) {
    if (err instanceof DirectoryLockedError)
      throw new Error(`${err.message}: a server is running on this home's embedded database; stop it to manage users, or run the server on PostgreSQL (--database-url), where this works while it runs`);
    throw err;
  }
}

function osUser(): string {
  try {
    return os.userInfo().username;
  } catch {
    return "unknown";
  }
}

/** `15m`, `12h`, `7d` back from now, or an ISO date(-time); ms since the epoch. */
export function parseSince(text: string, now = Date.now()): number {
  const rel = /^(\d+)\s*(s|m|h|d)$/.exec(text.trim());
  if (rel) return now - Number(rel[1]) * { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 }[rel[2] as "s" | "m" | "h" | "d"];
  const ms = /^\d{4}-\d{2}-\d{2}/.test(text) ? Date.parse(text) : Number.NaN;
  if (Number.isNaN(ms)) throw new UsageError(`--since: expected an ISO date or date-time (2026-12-01T09:00:00Z) or a duration such as 30m, 12h, 7d (got ${text})`);
  return ms;
}

const COMMON = { home: { type: "string" }, "database-url": { type: "string" }, help: { type: "boolean", short: "h" } } as const;

async function withDatabase(values: { home?: string; "database-url"?: string }, io: CliIo, run: (db: Database) => Promise<number>): Promise<number> {
  let db: Database;
  try {
    db = await openServerDatabase(values, io.env);
  } catch (err) {
    io.stderr.write(`app-server: ${(err as Error).message}\n`);
    return err instanceof UsageError ? 2 : 1;
  }
  try {
    return await run(db);
  } finally {
    await db.close();
  }
}

function describe(u: UserRecord): string {
  const roots = u.roots.length ? u.roots.join(", ") : "(none)";
  const flags = [u.admin ? "admin" : null, u.dangerFullAccess ? "danger-full-access" : null, u.tokenHash ? "token" : "sso only"].filter(Boolean).join(", ");
  const state = u.revokedAtMs !== null ? `revoked ${new Date(u.revokedAtMs).toISOString()}` : `since ${new Date(u.createdAtMs).toISOString()}`;
  return `${u.name}  ${flags}  roots: ${roots}  ${state}`;
}

export async function runUsers(args: string[], io: CliIo = processIo()): Promise<number> {
  const [sub, ...rest] = args;
  if (sub === undefined || sub === "--help" || sub === "-h" || rest.includes("--help") || rest.includes("-h")) {
    io.stdout.write(USERS_HELP);
    return sub === undefined ? 2 : 0;
  }
  const options = { ...COMMON, admin: { type: "boolean" }, root: { type: "string", multiple: true }, "danger-full-access": { type: "boolean" }, "no-token": { type: "boolean" }, json: { type: "boolean" } } as const;
  let parsed;
  try {
    parsed = parseArgs({ args: rest, options, allowPositionals: true, strict: true });
    if (!["add", "list", "revoke"].includes(sub)) throw new UsageError(`unknown users command: ${sub} (expected add, list or revoke)`);
    const want = sub === "list" ? 0 : 1;
    if (parsed.positionals.length !== want) throw new UsageError(want ? `users ${sub} needs exactly one NAME` : "users list takes no NAME");
    if (want && !USER_NAME.test(parsed.positionals[0]!)) throw new UsageError(`invalid user name ${JSON.stringify(parsed.positionals[0])}: letters, digits and . _ @ + - (at most 64, starting with a letter or digit)`);
    if (sub !== "add" && (parsed.values.admin || parsed.values.root || parsed.values["danger-full-access"] || parsed.values["no-token"])) throw new UsageError(`--admin, --root, --danger-full-access and --no-token are options of users add`);
  } catch (err) {
    io.stderr.write(`app-server users: ${(err as Error).message}\n`);
    return 2;
  }
  const { values, positionals } = parsed;
  const name = positionals[0]!;
  return withDatabase(values, io, async (db) => {
    const users = new UserStore(db.sql);
    const audit = new AuditLog(new AuditStore(db.sql), new SideWrites(db.sql, 0), { error: () => {} });
    if (sub === "list") {
      for (const u of await users.list()) {
        if (values.json) {
          const { tokenHash: _hash, tokenId: _id, ...shown } = u;
          io.stdout.write(`${JSON.stringify({ ...shown, hasToken: u.tokenHash !== null })}\n`);
        } else io.stdout.write(`${describe(u)}\n`);
      }
      return 0;
    }
    if (sub === "revoke") {
      const revoked = await users.revoke(name);
      if (!revoked) {
        io.stderr.write(`app-server users: no active user named ${name}\n`);
        return 1;
      }
      await audit.recordCli(osUser(), "user.revoked", { user: name, userId: revoked.id });
      io.stdout.write(`revoked ${name}: its token no longer works; running servers close its connections within seconds\n`);
      return 0;
    }
    const roots = (values.root ?? []).map((r) => path.resolve(r));
    for (const r of roots) if (!existsSync(r)) io.stderr.write(`app-server users: warning: root ${r} does not exist (yet)\n`);
    const issued = values["no-token"] ? null : await issueToken();
    try {
      const user = await users.add({ name, admin: values.admin ?? false, roots, dangerFullAccess: values["danger-full-access"] ?? false, tokenId: issued?.tokenId ?? null, tokenHash: issued?.hash ?? null });
      await audit.recordCli(osUser(), "user.added", { user: name, userId: user.id, admin: user.admin, roots, dangerFullAccess: user.dangerFullAccess, token: issued !== null });
      io.stdout.write(`added ${describe(user)}\n`);
      if (issued) io.stdout.write(`${issued.token}\n`);
      return 0;
    } catch (err) {
      if (err instanceof UserExistsError) {
        io.stderr.write(`app-server users: ${err.message} (revoke it first to give the name out again)\n`);
        return 1;
      }
      throw err;
    }
  });
}

export async function runAudit(args: string[], io: CliIo = processIo()): Promise<number> {
  const options = { ...COMMON, user: { type: "string" }, thread: { type: "string" }, since: { type: "string" }, limit: { type: "string" } } as const;
  let values;
  let sinceMs: number | null = null;
  let limit = Infinity;
  try {
    ({ values } = parseArgs({ args, options, allowPositionals: false, strict: true }));
    if (values.help) {
      io.stdout.write(AUDIT_HELP);
      return 0;
    }
    if (values.since !== undefined) sinceMs = parseSince(values.since);
    if (values.limit !== undefined) {
      limit = Number(values.limit);
      if (!Number.isSafeInteger(limit) || limit < 1) throw new UsageError(`--limit must be a positive whole number (got ${values.limit})`);
    }
  } catch (err) {
    io.stderr.write(`app-server audit: ${(err as Error).message}\n`);
    return 2;
  }
  return withDatabase(values, io, async (db) => {
    const store = new AuditStore(db.sql);
    let afterId: number | null = null;
    let printed = 0;
    for (;;) {
      const page = await store.list({ userName: values.user ?? null, threadId: values.thread ?? null, sinceMs, afterId, limit: Math.min(500, limit - printed) });
      for (const row of page) io.stdout.write(`${JSON.stringify({ ...row, at: new Date(row.atMs).toISOString() })}\n`);
      printed += page.length;
      if (page.length === 0 || printed >= limit) return 0;
      afterId = page[page.length - 1]!.id;
    }
  });
}
