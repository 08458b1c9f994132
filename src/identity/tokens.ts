/**
 * Named users' API tokens: `aas_<id>_<secret>`. The id (public, 12 random bytes) finds the user's
 * row; the secret (32 random bytes) is stored only as an scrypt hash with its own salt, and a
 * presented secret is hashed the same way and compared in constant time. scrypt is slow on
 * purpose (about 50 ms with N=2^15 on the machines we measured): a copied database does not give
 * the tokens back by brute force. The cost is paid once per token per cache lifetime, never per
 * request (directory.ts caches a verified token for a few seconds).
 */
import { randomBytes, scrypt as scryptCb, timingSafeEqual, type ScryptOptions } from "node:crypto";

export const TOKEN_PREFIX = "aas_";

/** scrypt parameters of new hashes (old hashes keep theirs: the parameters are stored with them). */
export const SCRYPT_PARAMS = { N: 1 << 15, r: 8, p: 1 } as const;
const KEY_BYTES = 32;

function scrypt(secret: string, salt: Buffer, params: { N: number; r: number; p: number }): Promise<Buffer> {
  // maxmem: scrypt needs 128·N·r bytes; node's default cap (32 MiB) is exactly that at N=2^15, r=8.
  const options: ScryptOptions = { ...params, maxmem: 256 * params.N * params.r };
  return new Promise((resolve, reject) => scryptCb(secret, salt, KEY_BYTES, options, (err, key) => (err ? reject(err) : resolve(key))));
}

export interface IssuedToken {
  /** Shown once to the person it is for; never stored. */
  token: string;
  tokenId: string;
  /** What is stored: `scrypt$N$r$p$<salt>$<hash>`. */
  hash: string;
}

export async function issueToken(): Promise<IssuedToken> {
  const tokenId = randomBytes(12).toString("base64url");
  const secret = randomBytes(32).toString("base64url");
  return { token: `${TOKEN_PREFIX}${tokenId}_${secret}`, tokenId, hash: await hashSecret(secret) };
}

export async function hashSecret(secret: string): Promise<string> {
  const salt = randomBytes(16);
  const { N, r, p } = SCRYPT_PARAMS;
  const key = await scrypt(secret, salt, SCRYPT_PARAMS);
  return `scrypt$${N}$${r}$${p}$${salt.toString("base64url")}$${key.toString("base64url")}`;
}

/** `aas_<id>_<secret>` split, or null for anything else (the server's own token, a JWT). */
export function parseToken(token: string): { tokenId: string; secret: string } | null {
  const m = /^aas_([A-Za-z0-9_-]{16})_([A-Za-z0-9_-]{43})$/.exec(token);
  return m ? { tokenId: m[1]!, secret: m[2]! } : null;
}

/** Whether `secret` hashes to `stored` (constant-time comparison of the hashes). */
export async function secretMatches(secret: string, stored: string): Promise<boolean> {
  const parts = stored.split("$");
  if (parts.length !== 6 || parts[0] !== "scrypt") return false;
  const [N, r, p] = parts.slice(1, 4).map(Number) as [number, number, number];
  if (![N, r, p].every((n) => Number.isSafeInteger(n) && n > 0)) return false;
  const expected = Buffer.from(parts[5]!, "base64url");
  const key = await scrypt(secret, Buffer.from(parts[4]!, "base64url"), { N, r, p });
  return key.length === expected.length && timingSafeEqual(key, expected);
}
