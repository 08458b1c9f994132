/**
 * Clients of a shared server (issue 28, item 6) and the token primitives: `app-server threads`
 * (like exec) signs in with the user's token file (~/.config/agent-app-server/token, or
 * APP_SERVER_TOKEN_FILE) and so sees that user's threads only; --token wins over it. API tokens
 * are `aas_<id>_<secret>`, stored as a salted scrypt hash that only the right secret matches.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { PassThrough } from "node:stream";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { runThreads } from "../../src/client/threads.js";
import { hashSecret, issueToken, parseToken, secretMatches } from "../../src/identity/tokens.js";
import { parseSince } from "../../src/identity/cli.js";
import { BACKENDS } from "../support/db.js";
import { startTeamServer, type TeamServer } from "./support.js";

const backend = BACKENDS[BACKENDS.length - 1]!;

function io(env: NodeJS.ProcessEnv) {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let out = "";
  let err = "";
  stdout.on("data", (d) => (out += String(d)));
  stderr.on("data", (d) => (err += String(d)));
  return { io: { stdin: new PassThrough(), stdout, stderr, env, onInterrupt: () => () => {} }, out: () => out, err: () => err };
}

describe("clients read the user's token", () => {
  let t: TeamServer;
  let config: string;
  beforeEach(async () => {
    t = await startTeamServer(backend);
    config = mkdtempSync(path.join(os.tmpdir(), "aas-xdg-"));
  });
  afterEach(async () => {
    await t.close();
    rmSync(config, { recursive: true, force: true });
  });

  it("from ~/.config/agent-app-server/token (XDG_CONFIG_HOME), APP_SERVER_TOKEN_FILE, and --token first", async () => {
    const [alice, bob] = [await t.as(t.users.alice), await t.as(t.users.bob)];
    const hers = (await alice.request("thread/start", {})).thread.id;
    const his = (await bob.request("thread/start", {})).thread.id;
    mkdirSync(path.join(config, "agent-app-server"));
    writeFileSync(path.join(config, "agent-app-server", "token"), `${t.users.alice.token}\n`, { mode: 0o600 });
    const listed = async (env: NodeJS.ProcessEnv, extra: string[] = []) => {
      const c = io(env);
      expect(await runThreads(["--url", t.ts.url, "--json", ...extra], c.io as never), c.err()).toBe(0);
      return c.out().trim().split("\n").filter(Boolean).map((l) => JSON.parse(l).id);
    };
    expect(await listed({ XDG_CONFIG_HOME: config })).toEqual([hers]);
    const bobsFile = path.join(config, "bob-token");
    writeFileSync(bobsFile, t.users.bob.token, { mode: 0o600 });
    expect(await listed({ XDG_CONFIG_HOME: config, APP_SERVER_TOKEN_FILE: bobsFile })).toEqual([his]);
    expect(await listed({ XDG_CONFIG_HOME: config }, ["--token", t.users.bob.token])).toEqual([his]);
    // No token at all: the server refuses (it requires one).
    const none = io({ XDG_CONFIG_HOME: path.join(config, "empty") });
    expect(await runThreads(["--url", t.ts.url], none.io as never)).toBe(1);
    expect(none.err()).toMatch(/401/);
  });
});

describe("API tokens and times", () => {
  it("issues aas_<id>_<secret> tokens stored only as a salted scrypt hash that only the right secret matches", async () => {
    const a = await issueToken();
    const b = await issueToken();
    const pa = parseToken(a.token)!;
    expect(pa.tokenId).toBe(a.tokenId);
    expect(a.hash).toMatch(/^scrypt\$32768\$8\$1\$[A-Za-z0-9_-]{22}\$[A-Za-z0-9_-]{43}$/);
    expect(a.hash).not.toContain(pa.secret);
    expect(await secretMatches(pa.secret, a.hash)).toBe(true);
    expect(await secretMatches(parseToken(b.token)!.secret, a.hash)).toBe(false);
    // The same secret hashes differently each time (its own salt), and still matches.
    const again = await hashSecret(pa.secret);
    expect(again).not.toBe(a.hash);
    expect(await secretMatches(pa.secret, again)).toBe(true);
    for (const bad of ["", "scrypt$x$8$1$salt$hash", "bcrypt$1$2$3$4$5", a.hash.slice(0, -2)]) expect(await secretMatches(pa.secret, bad), bad).toBe(false);
    for (const notOurs of ["server-token-0123456789abcdef", `aas_${"a".repeat(16)}_short`, `${a.token}x`, "a.b.c"]) expect(parseToken(notOurs), notOurs).toBeNull();
  });

  it("reads --since as an ISO date or a duration back from now", () => {
    const now = Date.parse("2026-12-02T12:00:00Z");
    expect(parseSince("30m", now)).toBe(now - 30 * 60_000);
    expect(parseSince("7d", now)).toBe(now - 7 * 86_400_000);
    expect(parseSince("2026-12-01", now)).toBe(Date.parse("2026-12-01"));
    expect(parseSince("2026-12-01T09:00:00Z", now)).toBe(Date.parse("2026-12-01T09:00:00Z"));
    for (const bad of ["yesterday", "10", "-5m", "2026-13-45"]) expect(() => parseSince(bad, now), bad).toThrow(/--since/);
  });
});
