/**
 * Single sign-on: bearer JWTs verified with `jose` against the configured issuer, audience and
 * JWKS URL. jose's remote key set fetches the keys once and keeps them (cacheMaxAge); a token
 * signed with a key id it does not know makes it fetch the set again (at most once per
 * cooldown), so a rotated key is picked up on first use and an unknown key is refused after one
 * re-fetch. Only asymmetric algorithms are accepted (a JWKS holds public keys).
 */
import { createRemoteJWKSet, errors, jwtVerify, type JWTPayload } from "jose";

export interface JwtSettings {
  issuer: string;
  audience: string;
  jwksUrl: string;
  /** The claim naming the user (default `sub`). */
  userClaim: string;
  /**
   * Roots of a user the JWT names who has no row yet, with `{user}` standing for the name (e.g.
   * `/srv/work/{user}`): such a user is added on first sign-in. Absent: only users added with
   * `app-server users add` may sign in.
   */
  rootsTemplate: string[] | null;
  /**
   * How long after a fetch of the key set an unknown key id is refused without fetching again
   * (default 30 s: a flood of tokens with made-up key ids cannot make the server hammer the IdP).
   */
  jwksCooldownMs?: number;
}

export const JWT_ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"];

/** A verified token: who it names and until when it is valid. */
export interface VerifiedJwt {
  user: string;
  expiresAtMs: number | undefined;
}

export class JwtRejected extends Error {}

export class JwtVerifier {
  private readonly keys: ReturnType<typeof createRemoteJWKSet>;

  constructor(readonly settings: JwtSettings) {
    this.keys = createRemoteJWKSet(new URL(settings.jwksUrl), { cacheMaxAge: 10 * 60_000, cooldownDuration: settings.jwksCooldownMs ?? 30_000, timeoutDuration: 5_000 });
  }

  /** Whether `token` looks like a JWT (three base64url parts) rather than an API token. */
  static looksLike(token: string): boolean {
    return /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/.test(token);
  }

  /** Verifies signature, issuer, audience and lifetime; JwtRejected says why not (for the log, not the client). */
  async verify(token: string): Promise<VerifiedJwt> {
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, this.keys, { issuer: this.settings.issuer, audience: this.settings.audience, algorithms: JWT_ALGORITHMS }));
    } catch (err) {
      if (err instanceof errors.JOSEError) throw new JwtRejected(`${err.code}: ${err.message}`);
      throw err;
    }
    const user = payload[this.settings.userClaim];
    if (typeof user !== "string" || user.trim() === "") throw new JwtRejected(`the token has no ${this.settings.userClaim} claim naming a user`);
    return { user: user.trim(), expiresAtMs: typeof payload.exp === "number" ? payload.exp * 1000 : undefined };
  }

  /** The roots a first sign-in of `user` is given, or null when users are not provisioned. */
  rootsFor(user: string): string[] | null {
    return this.settings.rootsTemplate?.map((t) => t.replaceAll("{user}", user)) ?? null;
  }
}
