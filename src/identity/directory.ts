/**
 * The users this server knows, as every process of a cluster sees them: the `users` table, read
 * again every `refreshMs` (default 2 s), so `app-server users revoke NAME` — run anywhere against
 * the same database — takes effect on running servers within that time: the revoked user's
 * token stops admitting connections and its open connections are closed (onRevoked).
 *
 * A presented API token costs one scrypt hash the first time; the verified token is then
 * remembered (by its SHA-256) and checked against the refreshed users only, so neither requests
 * nor reconnects pay the hash again, and a revocation still ends it.
 */
import { createHash } from "node:crypto";
import type { Logger } from "../log.js";
import { UserExistsError, type UserRecord, type UserStore } from "../store/user-store.js";
import { JwtRejected, JwtVerifier } from "./jwt.js";
import { userPrincipal, type Principal } from "./principal.js";
import { parseToken, secretMatches } from "./tokens.js";

export const DEFAULT_USERS_REFRESH_MS = 2_000;

/** User names: what `users add` accepts and what a JWT claim may name (emails included). */
export const USER_NAME = /^[A-Za-z0-9][A-Za-z0-9._@+-]{0,63}$/;

export type Authenticated = { ok: true; principal: Principal } | { ok: false; reason: string };

const digest = (token: string) => createHash("sha256").update(token).digest("base64url");

export class UserDirectory {
  private users = new Map<string, UserRecord>();
  /** SHA-256 of a verified API token → the user id it belongs to. */
  private readonly verified = new Map<string, string>();
  private readonly revokedListeners: Array<(userId: string) => void> = [];
  private readonly refreshedListeners: Array<() => Promise<void>> = [];
  private timer: NodeJS.Timeout | null = null;
  private refreshing: Promise<void> | null = null;

  constructor(
    readonly store: UserStore,
    private readonly jwt: JwtVerifier | null,
    private readonly log: Pick<Logger, "info" | "warn">,
    private readonly refreshMs = DEFAULT_USERS_REFRESH_MS,
  ) {}

  async start(): Promise<void> {
    await this.refresh();
    this.timer = setInterval(() => void this.refresh().catch((err) => this.log.warn({ err }, "could not refresh the users")), this.refreshMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** Called with the id of every user revoked since the last refresh (close its connections). */
  onRevoked(listener: (userId: string) => void): void {
    this.revokedListeners.push(listener);
  }

  /** Called after every refresh (re-checking what connections were granted, team.ts). */
  onRefreshed(listener: () => Promise<void>): void {
    this.refreshedListeners.push(listener);
  }

  /** Reads the users again; users that were active and are revoked now are announced. */
  refresh(): Promise<void> {
    return (this.refreshing ??= (async () => {
      try {
        const rows = await this.store.list();
        const next = new Map(rows.map((u) => [u.id, u]));
        const revoked = [...this.users.values()].filter((u) => u.revokedAtMs === null && next.get(u.id)?.revokedAtMs != null).map((u) => u.id);
        this.users = next;
        for (const [hash, id] of this.verified) if (!this.active(id)) this.verified.delete(hash);
        for (const id of revoked) {
          this.log.info({ user: next.get(id)!.name }, "user revoked: closing its connections");
          for (const l of this.revokedListeners) l(id);
        }
        for (const l of this.refreshedListeners) await l();
      } finally {
        this.refreshing = null;
      }
    })());
  }

  /** The user if it exists and is not revoked (as of the last refresh). */
  active(id: string): UserRecord | null {
    const u = this.users.get(id);
    return u && u.revokedAtMs === null ? u : null;
  }

  /** Every user known at the last refresh, revoked ones included. */
  all(): UserRecord[] {
    return [...this.users.values()];
  }

  byName(name: string): UserRecord | null {
    for (const u of this.users.values()) if (u.name === name && u.revokedAtMs === null) return u;
    return null;
  }

  nameOf(id: string): string | null {
    return this.users.get(id)?.name ?? null;
  }

  /** Whether `token` is for this directory: an API token (`aas_…`) or, when configured, a JWT. */
  handles(token: string): boolean {
    return parseToken(token) !== null || (this.jwt !== null && JwtVerifier.looksLike(token));
  }

  /** The principal of an API token or JWT; the reason is for the log, never for the client. */
  async authenticate(token: string): Promise<Authenticated> {
    const api = parseToken(token);
    if (api) return this.apiToken(token, api.tokenId, api.secret);
    if (this.jwt && JwtVerifier.looksLike(token)) return this.jwtToken(token, this.jwt);
    return { ok: false, reason: "not a token of this server" };
  }

  private async apiToken(token: string, tokenId: string, secret: string): Promise<Authenticated> {
    const key = digest(token);
    const known = this.verified.get(key);
    const cached = known ? this.active(known) : null;
    if (cached && cached.tokenId === tokenId) return { ok: true, principal: userPrincipal(cached, "token") };
    // The database, not the cache: a user added a moment ago (on another process) signs in at once.
    const row = await this.store.byTokenId(tokenId);
    if (!row || row.revokedAtMs !== null || !row.tokenHash) return { ok: false, reason: row ? "the token was revoked" : "unknown token" };
    if (!(await secretMatches(secret, row.tokenHash))) return { ok: false, reason: "wrong token secret" };
    this.users.set(row.id, row);
    this.verified.set(key, row.id);
    return { ok: true, principal: userPrincipal(row, "token") };
  }

  private async jwtToken(token: string, jwt: JwtVerifier): Promise<Authenticated> {
    let verified;
    try {
      verified = await jwt.verify(token);
    } catch (err) {
      if (err instanceof JwtRejected) return { ok: false, reason: `JWT refused: ${err.message}` };
      throw err;
    }
    if (!USER_NAME.test(verified.user)) return { ok: false, reason: `JWT names a user the server cannot take: ${JSON.stringify(verified.user.slice(0, 80))}` };
    let row = this.byName(verified.user) ?? (await this.store.byName(verified.user));
    if (!row) {
      const roots = jwt.rootsFor(verified.user);
      if (roots === null) return { ok: false, reason: `no user named ${verified.user} on this server (add it with app-server users add, or set APP_SERVER_JWT_ROOTS)` };
      row = await this.provision(verified.user, roots);
    }
    this.users.set(row.id, row);
    return { ok: true, principal: userPrincipal(row, "jwt", verified.expiresAtMs) };
  }

  /** A user named by a JWT signs in for the first time: added with the template's roots, no token. */
  private async provision(name: string, roots: string[]): Promise<UserRecord> {
    try {
      const row = await this.store.add({ name, admin: false, roots, dangerFullAccess: false, tokenId: null, tokenHash: null });
      this.log.info({ user: name, roots }, "added a user on its first single sign-on");
      return row;
    } catch (err) {
      // Another process provisioned it at the same moment.
      if (err instanceof UserExistsError) return (await this.store.byName(name))!;
      throw err;
    }
  }
}
