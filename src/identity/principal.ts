/**
 * Who a connection acts for (docs/teams.md, "Identity model"). Every connection carries exactly
 * one principal, resolved once when it is admitted:
 *
 *   a named user      an API token from `app-server users add` (`aas_<id>_<secret>`), or a JWT
 *                     whose subject names a user (or is provisioned from the JWT settings)
 *   the local user    the one user of a one-user setup: the server's own token (`<home>/auth-token`
 *                     or --auth-token-file), APP_SERVER_AUTH=none without a token, and stdio (the
 *                     user who spawned the server). An admin, not confined to roots. Threads made
 *                     before users existed belong to it.
 */

/** The implicit user's id (threads.user_id default, migrations/016_users_audit.sql). */
export const LOCAL_USER_ID = "local";

export type SignIn = "local" | "stdio" | "token" | "jwt";

export interface Principal {
  /** Stable id: `local`, or a users.id. */
  readonly id: string;
  /** Shown in the playground, audit rows and thread/read. */
  readonly name: string;
  /** Sees and acts on every thread (marked in the audit when it is another user's). */
  readonly admin: boolean;
  /**
   * Real directories the user's threads, commands and file searches must stay inside; null: not
   * confined (the local user, admins).
   */
  readonly roots: readonly string[] | null;
  /** May use danger-full-access (no OS sandbox). */
  readonly dangerFullAccess: boolean;
  readonly signIn: SignIn;
  /** When the credential stops being valid (a JWT's `exp`), in ms; the connection closes then. */
  readonly expiresAtMs?: number;
}

/** The implicit user of a one-user setup (`name`: what to call it, e.g. the OS user's name). */
export function localPrincipal(signIn: "local" | "stdio", name = "local"): Principal {
  return { id: LOCAL_USER_ID, name, admin: true, roots: null, dangerFullAccess: true, signIn };
}

/** A stored user as a principal (roots as configured; admins are never confined). */
export function userPrincipal(
  user: { id: string; name: string; admin: boolean; roots: readonly string[]; dangerFullAccess: boolean },
  signIn: "token" | "jwt" | "stdio",
  expiresAtMs?: number,
): Principal {
  return {
    id: user.id,
    name: user.name,
    admin: user.admin,
    roots: user.admin ? null : [...user.roots],
    dangerFullAccess: user.admin || user.dangerFullAccess,
    signIn,
    ...(expiresAtMs !== undefined ? { expiresAtMs } : {}),
  };
}
