/**
 * Single sign-on (issue 28, item 1): bearer JWTs verified against the configured issuer, audience
 * and a JWKS served on loopback. Signs in a user added beforehand and provisions a new one from
 * the roots template; keeps working after the identity provider rotates its key; refuses a wrong
 * audience or issuer, an expired token, an unknown key, a token signed with a key the JWKS does
 * not hold, and a symmetric (HS256) token. The connection closes when the token expires.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { exportJWK, generateKeyPair, SignJWT, type JWK, type CryptoKey } from "jose";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { TestClient } from "../support/client.js";
import { eventually } from "../support/cluster.js";
import { BACKENDS } from "../support/db.js";
import { startTeamServer, type TeamServer } from "./support.js";

const backend = BACKENDS[BACKENDS.length - 1]!;
const ISSUER = "https://idp.example.test/";
const AUDIENCE = "agent-app-server";

interface SigningKey {
  kid: string;
  privateKey: CryptoKey;
  jwk: JWK;
}

async function newKey(kid: string): Promise<SigningKey> {
  const { privateKey, publicKey } = await generateKeyPair("ES256");
  return { kid, privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg: "ES256", use: "sig" } };
}

/** The identity provider's key set on loopback; `published` is what it serves now. */
async function startJwks(): Promise<{ url: string; published: JWK[]; fetches: number; close(): Promise<void> }> {
  const state = { published: [] as JWK[], fetches: 0 };
  const server = http.createServer((_req, res) => {
    state.fetches++;
    res.writeHead(200, { "content-type": "application/jwk-set+json" });
    res.end(JSON.stringify({ keys: state.published }));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return Object.assign(state, {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks.json`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  });
}

function sign(key: SigningKey, claims: { sub?: string; aud?: string; iss?: string; expiresIn?: string | number }): Promise<string> {
  const jwt = new SignJWT(claims.sub ? { sub: claims.sub } : {})
    .setProtectedHeader({ alg: "ES256", kid: key.kid })
    .setIssuedAt()
    .setIssuer(claims.iss ?? ISSUER)
    .setAudience(claims.aud ?? AUDIENCE)
    .setExpirationTime(claims.expiresIn ?? "10m");
  return jwt.sign(key.privateKey);
}

const connectWith = (url: string, token: string) => TestClient.connect(url, { headers: { authorization: `Bearer ${token}` } });

describe("single sign-on with JWTs", () => {
  let t: TeamServer;
  let jwks: Awaited<ReturnType<typeof startJwks>>;
  let key1: SigningKey;
  beforeEach(async () => {
    jwks = await startJwks();
    key1 = await newKey("key-1");
    jwks.published = [key1.jwk];
    t = await startTeamServer(backend, {
      team: {
        jwt: { issuer: ISSUER, audience: AUDIENCE, jwksUrl: jwks.url, userClaim: "sub", rootsTemplate: [`${process.env.TMPDIR ?? "/tmp"}/sso-{user}`], jwksCooldownMs: 0 },
      },
    });
  });
  afterEach(async () => {
    await t.close();
    await jwks.close();
  });

  it("signs in a user added beforehand, and adds a new one from the roots template on first sign-in", async () => {
    const alice = await connectWith(t.ts.url, await sign(key1, { sub: "alice" }));
    t.clients.push(alice);
    await alice.request("initialize", { clientInfo: { name: "sso", title: null, version: "1" }, capabilities: {} });
    expect((await alice.request("account/read", {})).user).toMatchObject({ userId: t.users.alice.record.id, name: "alice", roots: [t.users.alice.root], signIn: "jwt" });

    const frank = await connectWith(t.ts.url, await sign(key1, { sub: "frank" }));
    t.clients.push(frank);
    await frank.request("initialize", { clientInfo: { name: "sso", title: null, version: "1" }, capabilities: {} });
    const who = (await frank.request("account/read", {})).user;
    expect(who).toMatchObject({ name: "frank", admin: false, roots: [`${process.env.TMPDIR ?? "/tmp"}/sso-frank`], signIn: "jwt" });
    const row = await t.ts.server.app.team.users.byName("frank");
    expect(row).toMatchObject({ id: who.userId, tokenHash: null, roots: [`${process.env.TMPDIR ?? "/tmp"}/sso-frank`] });
  });

  it("keeps signing in after the identity provider rotates its key; refuses an unknown key and a key it no longer publishes", async () => {
    const before = await connectWith(t.ts.url, await sign(key1, { sub: "bob" }));
    await before.close();
    const key2 = await newKey("key-2");
    jwks.published = [key2.jwk];
    const fetchesBefore = jwks.fetches;
    const after = await connectWith(t.ts.url, await sign(key2, { sub: "bob" }));
    await after.close();
    expect(jwks.fetches).toBeGreaterThan(fetchesBefore); // the new key id made the server fetch the set again
    // key-1 was rotated out; key-3 was never published.
    await expect(connectWith(t.ts.url, await sign(key1, { sub: "bob" }))).rejects.toThrow(/401/);
    await expect(connectWith(t.ts.url, await sign(await newKey("key-3"), { sub: "bob" }))).rejects.toThrow(/401/);
    // A key with a published id but different material: the signature does not verify.
    const impostor = await newKey("key-2");
    await expect(connectWith(t.ts.url, await sign(impostor, { sub: "bob" }))).rejects.toThrow(/401/);
  });

  it("refuses a wrong audience, a wrong issuer, an expired token, a token naming no user, and an HS256 token", async () => {
    await expect(connectWith(t.ts.url, await sign(key1, { sub: "alice", aud: "someone-else" }))).rejects.toThrow(/401/);
    await expect(connectWith(t.ts.url, await sign(key1, { sub: "alice", iss: "https://evil.example/" }))).rejects.toThrow(/401/);
    await expect(connectWith(t.ts.url, await sign(key1, { sub: "alice", expiresIn: Math.floor(Date.now() / 1000) - 60 }))).rejects.toThrow(/401/);
    await expect(connectWith(t.ts.url, await sign(key1, {}))).rejects.toThrow(/401/);
    await expect(connectWith(t.ts.url, await sign(key1, { sub: "../../etc" }))).rejects.toThrow(/401/);
    const hs = await new SignJWT({ sub: "alice" }).setProtectedHeader({ alg: "HS256", kid: "key-1" }).setIssuer(ISSUER).setAudience(AUDIENCE).setExpirationTime("10m").sign(new TextEncoder().encode("a-shared-secret-of-32-bytes-long!"));
    await expect(connectWith(t.ts.url, hs)).rejects.toThrow(/401/);
    expect(await t.ts.server.app.team.users.byName("..")).toBeNull();
  });

  it("closes the connection when its token expires", async () => {
    const c = await connectWith(t.ts.url, await sign(key1, { sub: "alice", expiresIn: Math.floor(Date.now() / 1000) + 5 }));
    t.clients.push(c);
    await eventually(async () => c.closeCode !== null, 300, 50).catch(() => {
      throw new Error("the connection outlived its token");
    });
    expect(c.closeCode).toBe(1008);
    expect(c.closeReason).toBe("sign-in expired");
  });
});
