/**
 * Who may connect, on a real `app-server serve`: by default a token generated at first start into
 * <home>/auth-token (mode 0600) is required on every WebSocket and /metrics request (Bearer or
 * ?token=), /healthz and /readyz stay open, and a loopback client must run as the server's own
 * user — another local user is refused with or without the token (the attack: an unprivileged
 * user's client ran command/exec with dangerFullAccess and got uid=0). `app-server threads`/`exec`
 * find the home's token for a loopback --url. APP_SERVER_AUTH=none restores open loopback.
 */
import { execFileSync, spawn } from "node:child_process";
import { chmodSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { TestClient } from "./support/client.js";
import { removeSeed, runCli, seededHome, spawnCli, type CliProcess, type TestHome } from "./support/process.js";

/** A raw WebSocket upgrade; prints the response's status code. Runs as any user (no modules). */
const UPGRADE = String.raw`
const [port, token, host] = process.argv.slice(1);
const s = require("net").connect(Number(port), "127.0.0.1", () => s.write(
  "GET / HTTP/1.1\r\nHost: " + (host || "127.0.0.1:" + port) + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
  "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n" + (token ? "Authorization: Bearer " + token + "\r\n" : "") + "\r\n"));
s.on("data", (d) => { process.stdout.write(d.toString().split("\r\n")[0].split(" ")[1]); s.destroy(); });
s.on("error", (e) => { process.stdout.write("error " + e.message); });
`;

function upgradeStatus(port: number, token = "", asUser?: { uid: number; gid: number }, host = ""): Promise<string> {
  const argv = [process.execPath, "-e", UPGRADE, String(port), token, host];
  const [file, args] = asUser ? ["setpriv", [`--reuid=${asUser.uid}`, `--regid=${asUser.gid}`, "--clear-groups", ...argv]] : [argv[0]!, argv.slice(1)];
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { cwd: "/", stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.on("data", (b: Buffer) => (out += b.toString()));
    child.stderr.on("data", (b: Buffer) => (err += b.toString()));
    child.on("error", reject);
    child.on("close", () => (out ? resolve(out) : reject(new Error(`no answer: ${err}`))));
  });
}

let home: TestHome;
let proc: CliProcess | null = null;
beforeAll(async () => {
  home = await seededHome();
});
afterAll(async () => {
  await home.cleanup();
  await removeSeed();
});
afterEach(async () => {
  await proc?.kill();
  proc = null;
});

/** `serve` with the default admission (APP_SERVER_AUTH unset: the test support sets none otherwise). */
async function serve(env: Record<string, string> = {}) {
  proc = spawnCli(["serve", "--listen", "ws://127.0.0.1:0", "--home", home.home], { env: { APP_SERVER_AUTH: "", ...env } });
  const url = await proc.listening();
  return { url, port: Number(new URL(url).port), http: url.replace(/^ws:/, "http:") };
}

const homeToken = () => readFileSync(path.join(home.home, "auth-token"), "utf8").trim();

describe("by default, a generated token", () => {
  it("is made at first start (0600, never logged), required on every connection but /healthz and /readyz, and kept across restarts", async () => {
    const s = await serve();
    const token = homeToken();
    expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(statSync(path.join(home.home, "auth-token")).mode & 0o777).toBe(0o600);
    expect(await upgradeStatus(s.port)).toBe("401");
    expect(await upgradeStatus(s.port, "wrong-token-wrong-token")).toBe("401");
    expect(await upgradeStatus(s.port, token)).toBe("101");
    expect((await fetch(`${s.http}/healthz`)).status).toBe(200);
    expect((await fetch(`${s.http}/readyz`)).status).toBe(200);
    expect((await fetch(`${s.http}/metrics`)).status).toBe(401);
    expect((await fetch(`${s.http}/metrics`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
    // Browsers: ?token= on the socket URL.
    const browser = await TestClient.initialized(`${s.url}/?token=${encodeURIComponent(token)}`);
    expect((await browser.request("thread/list", {})).data).toEqual([]);
    await browser.close();
    expect(proc!.stderr).not.toContain(token);

    await proc!.kill();
    const again = await serve();
    expect(homeToken()).toBe(token);
    expect(await upgradeStatus(again.port, token)).toBe("101");
    expect(proc!.stderr).not.toContain(token);
  });

  it("a token file others could read is replaced (the old token may be known)", async () => {
    await serve();
    const old = homeToken();
    await proc!.kill();
    chmodSync(path.join(home.home, "auth-token"), 0o644);
    const s = await serve();
    expect(homeToken()).not.toBe(old);
    expect(statSync(path.join(home.home, "auth-token")).mode & 0o777).toBe(0o600);
    expect(await upgradeStatus(s.port, old)).toBe("401");
    expect(await proc!.waitForLog("replaced the auth token: the old one may have been read by others")).toMatchObject({ reason: expect.stringMatching(/mode 644/) });
  });

  it("app-server threads finds the home's token for a loopback --url; another home's is not this server's", async () => {
    const s = await serve();
    const listed = await runCli(["threads", "--url", s.url, "--json"], { env: { APP_SERVER_HOME: home.home } });
    expect(listed.exit.code).toBe(0);
    const elsewhere = await runCli(["threads", "--url", s.url, "--json"], { env: { APP_SERVER_HOME: path.join(home.home, "no-such-home") } });
    expect(elsewhere.exit.code).toBe(1);
    expect(elsewhere.stderr).toMatch(/401|token/);
  });

  it("APP_SERVER_AUTH=none: open loopback, the Host check still on", async () => {
    const s = await serve({ APP_SERVER_AUTH: "none" });
    expect(await upgradeStatus(s.port)).toBe("101");
    expect(await upgradeStatus(s.port, "", undefined, `evil.example:${s.port}`)).toBe("403");
  });
});

const isRoot = typeof process.getuid === "function" && process.getuid() === 0;
let haveUseradd = false;
try {
  execFileSync("sh", ["-c", "command -v useradd && command -v userdel && command -v setpriv"], { stdio: "ignore" });
  haveUseradd = true;
} catch {
  /* reported below */
}
if (!isRoot || !haveUseradd) console.warn(`[skipped] the other-local-user test: ${!isRoot ? "it needs root to create a user" : "useradd, userdel or setpriv is missing"}`);

describe.skipIf(!isRoot || !haveUseradd)("another local user", () => {
  const name = `aas-other-${process.pid % 100000}`;
  let user: { uid: number; gid: number };
  beforeAll(() => {
    execFileSync("useradd", ["--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name]);
    user = { uid: Number(execFileSync("id", ["-u", name]).toString().trim()), gid: Number(execFileSync("id", ["-g", name]).toString().trim()) };
  });
  afterAll(() => {
    execFileSync("userdel", [name]);
  });

  it("is refused: without the token (it cannot read it), and even with it (loopback peers must be the server's user)", async () => {
    const s = await serve();
    const token = homeToken();
    expect(() => execFileSync("setpriv", [`--reuid=${user.uid}`, `--regid=${user.gid}`, "--clear-groups", "cat", path.join(home.home, "auth-token")], { stdio: "pipe" })).toThrow();
    expect(await upgradeStatus(s.port, "", user)).toBe("401");
    expect(await upgradeStatus(s.port, token, user)).toBe("403");
    expect(await upgradeStatus(s.port, token)).toBe("101"); // the server's own user, same request
    expect(await proc!.waitForLog("refused a loopback connection of another user")).toMatchObject({ peerUid: user.uid });
  });

  it("token-any-user admits another user that has the token, still not one without it", async () => {
    const s = await serve({ APP_SERVER_AUTH: "token-any-user" });
    expect(await upgradeStatus(s.port, "", user)).toBe("401");
    expect(await upgradeStatus(s.port, homeToken(), user)).toBe("101");
  });
});
