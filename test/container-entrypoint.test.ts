/**
 * The README's Docker commands, as far as this machine runs them. `cp .env.example .env` and the
 * secrets command run as written in a project directory of the test's; the secret files are then
 * given to another host uid (mode 600 stays), as a user other than uid 1000 makes them. `docker
 * compose up` has no Docker engine here, so the app-server container is simulated: the image's entry
 * point (scripts/container-entrypoint.sh) runs as root with only the capabilities docker-compose.yml
 * leaves it and no-new-privileges, hands the secrets to an unprivileged user and runs the server as
 * that user, with the container's environment (the image's ENV, compose's `environment:`
 * interpolated from that .env with the model key set). `docker compose ps` saying "healthy" is
 * compose's health check, /readyz; then a turn runs on the model.
 *
 * Needs root (to own files as another uid and to change user) and setpriv; skipped with the reason
 * printed elsewhere, mandatory with REQUIRE_ROOT=1 (.ci/run). The unprivileged user is `nobody`
 * (the image's is `node`, uid 1000, which this machine need not have).
 */
import { spawn, spawnSync } from "node:child_process";
import { chmodSync, chownSync, copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { parse as parseYaml } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TestClient } from "./support/client.js";
import { argsOf, envMap, interpolateTree, parseDockerfile, parseEnvFile } from "./support/compose.js";
import { TEST_DATABASE_URL } from "./support/db.js";
import { startMockModelServer, type MockModelServer } from "./support/mock-model-server.js";
import { CliProcess, cliArgv, postgresSchemaUrl, REPO_ROOT } from "./support/process.js";
import { readmeCommand } from "./support/readme.js";

const read = (file: string) => readFileSync(path.join(REPO_ROOT, file), "utf8");
const HOST_UID = 4242; // the host user who made the secret files: not the container's user
const USER = "nobody";

function unavailable(): string | null {
  if (process.platform !== "linux") return "not Linux";
  if (process.getuid?.() !== 0) return "not running as root (needed to own files as another uid and to change user)";
  if (spawnSync("setpriv", ["--version"]).status !== 0) return "setpriv (util-linux) is not installed";
  if (spawnSync("id", ["-u", USER]).status !== 0) return `no user ${USER}`;
  // The server it runs is this checkout's (in the image: root-owned files anyone may read).
  if (spawnSync("setpriv", [`--reuid=${USER}`, `--regid=${Number(spawnSync("id", ["-g", USER], { encoding: "utf8" }).stdout)}`, "--clear-groups", "--", "test", "-r", path.join(REPO_ROOT, "package.json")]).status !== 0)
    return `${USER} cannot read this checkout (${REPO_ROOT}): a directory above it is private`;
  return null;
}
const reason = unavailable();
if (reason) {
  if (process.env.REQUIRE_ROOT === "1") throw new Error(`REQUIRE_ROOT=1 but the container simulation cannot run: ${reason}`);
  console.warn(`[skipped] test/container-entrypoint.test.ts (the image's entry point against secret files of another uid): ${reason}`);
}

const compose = parseYaml(read("docker-compose.yml")) as Record<string, any>;
const service = compose.services["app-server"];
const runtime = parseDockerfile(read("Dockerfile")).at(-1)!;
/** compose's cap_drop: [ALL] + cap_add, as setpriv's bounding set. */
const boundingSet = `-all,${(service.cap_add as string[]).map((c) => `+${c.toLowerCase()}`).join(",")}`;

describe.skipIf(reason !== null)("the image's entry point with secret files of another host uid", () => {
  let dir: string;
  let mock: MockModelServer;
  let db: { url: string; cleanup(): Promise<void> } | undefined;
  let token: string;
  /** The container's environment with /run/secrets, /data and /workspace mapped into `dir`. */
  let containerEnv: Record<string, string>;
  const running: CliProcess[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "aas-container-"));
    chmodSync(dir, 0o755);
    // The user's project directory: the README's commands, as written.
    const project = path.join(dir, "project");
    mkdirSync(project);
    copyFileSync(path.join(REPO_ROOT, ".env.example"), path.join(project, ".env.example"));
    for (const command of [readmeCommand("cp .env.example .env"), readmeCommand("mkdir -p secrets && openssl rand -hex 24 > secrets/postgres_password && openssl rand -hex 32 > secrets/app_server_token && chmod 600 secrets/*")]) {
      const r = spawnSync("bash", ["-c", command], { cwd: project, encoding: "utf8" });
      expect(r.status, `${command}: ${r.stderr}`).toBe(0);
    }
    const secrets = path.join(project, "secrets");
    token = readFileSync(path.join(secrets, "app_server_token"), "utf8").trim();
    expect(token).toMatch(/^[0-9a-f]{64}$/);
    expect(readFileSync(path.join(secrets, "postgres_password"), "utf8")).toMatch(/^[0-9a-f]{48}\n$/);
    // Made by a host user who is not uid 1000: compose mounts them with that owner and mode.
    for (const name of ["app_server_token", "postgres_password"]) {
      expect(statSync(path.join(secrets, name)).mode & 0o777).toBe(0o600);
      chownSync(path.join(secrets, name), HOST_UID, HOST_UID);
    }
    const uid = Number(spawnSync("id", ["-u", USER], { encoding: "utf8" }).stdout);
    const gid = Number(spawnSync("id", ["-g", USER], { encoding: "utf8" }).stdout);
    for (const volume of ["data", "workspace"]) {
      mkdirSync(path.join(dir, volume));
      chownSync(path.join(dir, volume), uid, gid);
    }
    mkdirSync(path.join(dir, "shm"));
    chmodSync(path.join(dir, "shm"), 0o1777);

    mock = await startMockModelServer();
    // The user's .env: the copy, with the model key set as the README says (and the model
    // pointed at the mock: no network here).
    const dotEnv = { ...parseEnvFile(readFileSync(path.join(project, ".env"), "utf8")), OPENAI_API_KEY: "sk-from-dot-env-0123", OPENAI_BASE_URL: mock.openaiBaseUrl, APP_SERVER_MODEL: "mock-model" };
    const imageEnv = Object.fromEntries(argsOf(runtime, "ENV").flatMap((a) => [...a.matchAll(/([A-Za-z_][A-Za-z0-9_]*)=(\S+)/g)].map((m) => [m[1]!, m[2]!])));
    const environment = envMap((interpolateTree(service, dotEnv) as { environment: unknown }).environment);
    const inHere = (v: string) => v.replace(/^\/run\/secrets\//, `${secrets}/`).replace(/^\/data$/, path.join(dir, "data")).replace(/^\/workspace$/, path.join(dir, "workspace"));
    containerEnv = Object.fromEntries(Object.entries({ ...imageEnv, ...environment }).map(([k, v]) => [k, inHere(v)]));
    // The database: the machine's Postgres in a schema of its own (it trusts any password, but the
    // server must still read the password file), else the embedded one on the /data volume.
    if (TEST_DATABASE_URL) {
      db = await postgresSchemaUrl();
      containerEnv.DATABASE_URL = db.url;
    } else {
      delete containerEnv.DATABASE_URL;
      delete containerEnv.DATABASE_PASSWORD_FILE;
    }
  });
  afterAll(async () => {
    for (const p of running) await p.kill();
    await mock?.close();
    await db?.cleanup();
    rmSync(dir, { recursive: true, force: true });
  });

  /** The image's CMD, but on a free loopback port, with this run's build of the server. */
  const serve = () => [process.execPath, ...cliArgv(), "serve", "--listen", "ws://127.0.0.1:0"];
  const start = (argv: string[]) => {
    const env = { PATH: process.env.PATH!, ...containerEnv, APP_SERVER_RUN_AS: USER, APP_SERVER_SECRETS_DIR: path.join(dir, "shm", "app-server-secrets") };
    const p = new CliProcess(spawn(argv[0]!, argv.slice(1), { cwd: "/", env, stdio: ["pipe", "pipe", "pipe"] }));
    running.push(p);
    return p;
  };

  it("without the entry point (the image's user reading the files itself) the server cannot start: the bug compose users hit", async () => {
    const gid = spawnSync("id", ["-g", USER], { encoding: "utf8" }).stdout.trim();
    const p = start(["setpriv", `--reuid=${USER}`, `--regid=${gid}`, "--clear-groups", "--", ...serve()]);
    expect((await p.exited).code).toBe(2);
    expect(p.stderr).toMatch(/^app-server: cannot read (auth token file \S+app_server_token|DATABASE_PASSWORD_FILE \S+postgres_password): EACCES$/m);
  });

  it("docker compose up, simulated: through the entry point with compose's capabilities only, the server runs as that user, healthy (docker compose ps), and a turn runs on the model", async () => {
    // No Docker engine: what these start is what the steps below stand in for.
    readmeCommand("docker compose up -d --build");
    readmeCommand("docker compose ps");
    const p = start(["setpriv", "--no-new-privs", `--bounding-set=${boundingSet}`, "--", "sh", path.join(REPO_ROOT, "scripts", "container-entrypoint.sh"), ...serve()]);
    const url = await p.listening();
    // As the unprivileged user, holding no capability.
    const status = readFileSync(`/proc/${p.child.pid}/status`, "utf8");
    expect(/^Uid:\s+(\d+)/m.exec(status)![1]).toBe(spawnSync("id", ["-u", USER], { encoding: "utf8" }).stdout.trim());
    expect(/^CapEff:\s+(\w+)/m.exec(status)![1]).toMatch(/^0+$/);
    // Compose's health check.
    expect((await fetch(`${url.replace(/^ws:/, "http:")}/readyz`)).status).toBe(200);
    // The token it read is the one clients send; the model key from .env works.
    const c = await TestClient.connect(url, { headers: { authorization: `Bearer ${token}` } });
    try {
      await c.request("initialize", { clientInfo: { name: "test", title: null, version: "0.0.1" } });
      c.notify("initialized", {});
      const { thread } = await c.request("thread/start", {});
      expect(thread.cwd).toBe(path.join(dir, "workspace"));
      mock.enqueue({ text: "hello from the container" });
      const { turn } = await c.request("turn/start", { threadId: thread.id, input: [{ type: "text", text: "hi", text_elements: [] }] });
      const done = await c.waitForNotification("turn/completed", (x) => x.turn.id === turn.id, 30_000);
      expect(done.params.turn.status).toBe("completed");
      expect(mock.requests.at(-1)?.headers.authorization).toBe("Bearer sk-from-dot-env-0123");
    } finally {
      await c.close();
    }
    p.child.kill("SIGTERM");
    expect(await p.exited).toEqual({ code: 0, signal: null });
  });
});
