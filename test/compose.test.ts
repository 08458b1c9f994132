/**
 * The container files (Dockerfile, docker-compose.yml, .env.example, .dockerignore), checked
 * statically: no Docker engine or `docker compose` runs here, so these tests stand in for
 * `docker compose config` and a build. Compose's ${VAR} substitution is reproduced, and the
 * environment the container would get is fed to the server's own config resolution.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { DEFAULT_MODELS, resolveServeConfig } from "../src/config.js";
import { argsOf, envMap, healthcheckCommand, interpolate, interpolateTree, parseDockerfile, parseEnvFile, referencedVariables, strings, type Env } from "./support/compose.js";
import { REPO_ROOT } from "./support/process.js";

const read = (file: string) => readFileSync(path.join(REPO_ROOT, file), "utf8");

const compose = parseYaml(read("docker-compose.yml")) as Record<string, any>;
const composeText = read("docker-compose.yml");
const envExample = read(".env.example");
const stages = parseDockerfile(read("Dockerfile"));
const runtime = stages.at(-1)!;

/** .env holds no secrets any more (they are files): a user's .env is .env.example as is. */
const SAMPLE_SECRETS: Env = {};
const sampleEnv = (): Env => ({ ...parseEnvFile(envExample), ...SAMPLE_SECRETS });

describe("docker-compose.yml", () => {
  const services = compose.services as Record<string, any>;
  const postgres = services.postgres;
  const app = services["app-server"];

  it("has the postgres and app-server services", () => {
    expect(Object.keys(services).sort()).toEqual(["app-server", "postgres"]);
  });

  it("runs postgres:16 on a named volume with a pg_isready health check and no published port", () => {
    expect(postgres.image).toBe("postgres:16");
    const mount = (postgres.volumes as string[]).find((v) => v.endsWith(":/var/lib/postgresql/data"));
    expect(mount).toBeDefined();
    const source = mount!.split(":")[0]!;
    // A named volume (declared at the top level), not a host path.
    expect(source).not.toMatch(/[/.]/);
    expect(Object.keys(compose.volumes)).toContain(source);
    expect(healthcheckCommand(postgres.healthcheck)).toMatch(/pg_isready/);
    expect(postgres.ports).toBeUndefined();
    const env = envMap(postgres.environment);
    for (const name of ["POSTGRES_USER", "POSTGRES_DB"]) expect(env[name]).toMatch(new RegExp(`^\\$\\{${name}\\b`));
    // The password comes from a compose secret (a file), not from the environment.
    expect(env.POSTGRES_PASSWORD).toBeUndefined();
    expect(env.POSTGRES_PASSWORD_FILE).toBe("/run/secrets/postgres_password");
    expect(postgres.secrets).toContain("postgres_password");
  });

  it("builds app-server from this directory, starts it after postgres is healthy, restarts it unless stopped", () => {
    expect(app.build === "." || app.build?.context === ".").toBe(true);
    expect(app.depends_on).toEqual({ postgres: { condition: "service_healthy" } });
    expect(app.restart).toBe("unless-stopped");
    expect(healthcheckCommand(app.healthcheck)).toMatch(/http:\/\/127\.0\.0\.1:4500\/readyz/);
    const home = (app.volumes as string[]).find((v) => v.endsWith(":/data"));
    expect(Object.keys(compose.volumes)).toContain(home!.split(":")[0]);
  });

  it("drops every capability but the four the entry point needs, with no-new-privileges; the workspace on a volume", () => {
    expect(app.cap_drop).toEqual(["ALL"]);
    expect([...app.cap_add].sort()).toEqual(["CHOWN", "DAC_READ_SEARCH", "SETGID", "SETUID"]);
    expect(app.security_opt).toContain("no-new-privileges:true");
    const workspace = (app.volumes as string[]).find((v) => v.endsWith(":/workspace"));
    expect(Object.keys(compose.volumes)).toContain(workspace!.split(":")[0]);
  });

  it("publishes the WebSocket port on the host's loopback interface only", () => {
    expect(app.ports).toHaveLength(1);
    const [mapping] = interpolateTree(app.ports, sampleEnv()) as string[];
    expect(mapping).toBe("127.0.0.1:4500-4501:4500");
    const withPort = interpolateTree(app.ports, { ...sampleEnv(), APP_SERVER_PORT: "8080" }) as string[];
    expect(withPort).toEqual(["127.0.0.1:8080:4500"]);
  });

  /** Host ports a `ports:` entry offers ("ip:4500-4501:4500" → [4500, 4501]). */
  const hostPorts = (mapping: string): number[] => {
    const m = /^127\.0\.0\.1:(\d+)(?:-(\d+))?:4500$/.exec(mapping);
    if (!m) throw new Error(`unexpected port mapping ${mapping}`);
    const [from, to] = [Number(m[1]), Number(m[2] ?? m[1])];
    return Array.from({ length: to - from + 1 }, (_, i) => from + i);
  };

  it("scales to two replicas on the one Postgres (docker compose up --scale app-server=2)", () => {
    // Compose refuses --scale for a service with a container_name, and a fixed host port can be
    // bound by one container only: each replica needs a host port of its own.
    expect(app.container_name).toBeUndefined();
    expect(app.hostname).toBeUndefined();
    for (const env of [{ ...SAMPLE_SECRETS }, sampleEnv()] as Env[]) {
      const [mapping] = interpolateTree(app.ports, env) as string[];
      const ports = hostPorts(mapping!);
      expect(ports.length, `host ports for two replicas in ${mapping}`).toBeGreaterThanOrEqual(2);
      expect(ports[0]).toBe(4500); // the first replica where a single one always was
    }
    // Wider ranges for more replicas; one fixed port is still accepted (one replica only).
    expect(hostPorts((interpolateTree(app.ports, { ...sampleEnv(), APP_SERVER_PORT: "4500-4503" }) as string[])[0]!)).toHaveLength(4);
    // Both replicas reach the same database through the compose network (not a per-replica one).
    expect(new URL(interpolate(envMap(app.environment).DATABASE_URL!, sampleEnv())).hostname).toBe("postgres");
    // The header comment says how.
    expect(composeText).toMatch(/--scale app-server=2/);
  });

  it("gives app-server its own connection string and the password file postgres uses, and no POSTGRES_* variable", () => {
    const env = envMap(app.environment);
    expect(env.DATABASE_URL).not.toMatch(/PASSWORD/);
    expect(env.DATABASE_PASSWORD_FILE).toBe(envMap(postgres.environment).POSTGRES_PASSWORD_FILE);
    expect(app.secrets).toContain("postgres_password");
    expect(Object.keys(env).filter((k) => k.startsWith("POSTGRES_"))).toEqual([]);
    // Defaults on both sides must agree: with nothing set, and with everything set.
    const custom = { ...sampleEnv(), POSTGRES_USER: "alice", POSTGRES_DB: "agents" };
    for (const e of [{}, sampleEnv(), custom] as Env[]) {
      const resolved = interpolateTree(compose, e) as Record<string, any>;
      const pg = envMap(resolved.services.postgres.environment);
      const url = new URL(envMap(resolved.services["app-server"].environment).DATABASE_URL!);
      expect(url.protocol).toBe("postgres:");
      expect(url.hostname).toBe("postgres");
      expect(url.port).toBe("5432");
      expect(decodeURIComponent(url.username)).toBe(pg.POSTGRES_USER);
      expect(url.password).toBe("");
      expect(url.pathname).toBe(`/${pg.POSTGRES_DB}`);
    }
  });

  it("takes the auth token from a secret file, the model key from .env, and passes no env_file to the container", () => {
    const env = envMap(app.environment);
    expect(app.env_file).toBeUndefined();
    expect(env.APP_SERVER_AUTH_TOKEN).toBeUndefined();
    expect(env.APP_SERVER_AUTH_TOKEN_FILE).toBe("/run/secrets/app_server_token");
    expect(app.secrets).toContain("app_server_token");
    // The model's key and endpoint: from .env (or a key file named there), each by name.
    for (const name of ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY_FILE", "OPENAI_API_KEY_FILE", "ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "APP_SERVER_MODEL_PROVIDER", "APP_SERVER_MODEL"])
      expect(env[name], name).toMatch(new RegExp(`^\\$\\{${name}\\b`));
    const withKey = envMap((interpolateTree(compose, { ...sampleEnv(), OPENAI_API_KEY: "sk-from-dot-env" }) as any).services["app-server"].environment);
    expect(withKey.OPENAI_API_KEY).toBe("sk-from-dot-env");
    const secrets = interpolateTree(compose.secrets, {}) as Record<string, { file: string }>;
    expect(secrets).toEqual({ postgres_password: { file: "./secrets/postgres_password" }, app_server_token: { file: "./secrets/app_server_token" } });
    expect(read(".gitignore")).toMatch(/^secrets\/?$/m);
    expect(read(".dockerignore")).toMatch(/^secrets\/?$/m);
  });

  it("gives the container a configuration the server accepts: all interfaces, token file, Postgres with the URL-encoded password, home on the volume", () => {
    const resolved = interpolateTree(compose, sampleEnv()) as Record<string, any>;
    const service = resolved.services["app-server"];
    // The secret files as the container would see them (any characters in the password).
    const dir = mkdtempSync(path.join(os.tmpdir(), "aas-compose-"));
    try {
      const password = "p@ss:w/rd%#?& é";
      writeFileSync(path.join(dir, "postgres_password"), `${password}\n`);
      writeFileSync(path.join(dir, "app_server_token"), "f".repeat(64));
      const inContainer = (v: string) => v.replace(/^\/run\/secrets\//, `${dir}/`);
      // Precedence as in compose: image ENV < environment (there is no env_file).
      const imageEnv = Object.fromEntries(
        argsOf(runtime, "ENV").flatMap((a) => [...a.matchAll(/([A-Za-z_][A-Za-z0-9_]*)=(\S+)/g)].map((m) => [m[1]!, m[2]!])),
      );
      const containerEnv = Object.fromEntries(Object.entries({ ...imageEnv, ...envMap(service.environment) }).map(([k, v]) => [k, inContainer(v ?? "")]));
      const cmd = JSON.parse(argsOf(runtime, "CMD")[0]!) as string[];
      const config = resolveServeConfig(cmd.slice(3), containerEnv);
      expect(config.listen).toBe("ws://0.0.0.0:4500");
      expect(config.home).toBe("/data");
      expect(config.workspace).toBe("/workspace");
      const url = new URL(config.databaseUrl!);
      expect(`${url.protocol}//${url.username}@${url.host}${url.pathname}`).toBe("postgres://app@postgres:5432/app");
      expect(decodeURIComponent(url.password)).toBe(password);
      expect(config.authToken).toBe("f".repeat(64));
      // Both files are hidden from the agent's sandboxed commands.
      expect([config.authTokenFile, ...(config.secretFiles ?? [])].sort()).toEqual([path.join(dir, "app_server_token"), path.join(dir, "postgres_password")].sort());
      expect(config.modelProvider).toBe("openai");
      expect(config.model).toBe(DEFAULT_MODELS.openai);
      // The token alone admits a client (a container has no other users to tell apart). Without the
      // token file the server still requires a token (generated into the home at first start); only
      // an explicit APP_SERVER_AUTH=none on all interfaces is refused.
      expect(config.auth).toBe("token-any-user");
      const { APP_SERVER_AUTH_TOKEN_FILE: _token, ...noToken } = containerEnv;
      expect(resolveServeConfig(cmd.slice(3), noToken).auth).toBe("token-any-user");
      expect(() => resolveServeConfig(cmd.slice(3), { ...noToken, APP_SERVER_AUTH: "none" })).toThrow(/without authentication/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe(".env.example", () => {
  const lines = envExample.split("\n");
  /** Assignments, commented out or not: name → line index. */
  const assignments = new Map<string, number>();
  lines.forEach((line, i) => {
    const m = /^#?\s*([A-Z][A-Z0-9_]*)=/.exec(line);
    if (m) assignments.set(m[1]!, i);
  });

  it("documents every variable the compose file uses", () => {
    const used = referencedVariables(compose);
    expect(used).toEqual(expect.arrayContaining(["POSTGRES_PASSWORD_SECRET", "APP_SERVER_TOKEN_SECRET", "APP_SERVER_PORT"]));
    for (const name of used) expect(assignments.has(name), `${name} is not in .env.example`).toBe(true);
  });

  it("explains each variable in a comment right above it", () => {
    expect(assignments.size).toBeGreaterThan(10);
    for (const [name, i] of assignments) {
      const above = lines[i - 1] ?? "";
      expect(above.startsWith("#") && !/^#\s*[A-Z][A-Z0-9_]*=/.test(above), `${name} has no comment above it`).toBe(true);
    }
  });

  it("names only variables that something reads (no typos)", () => {
    const sources = [composeText, read("src/config.ts"), read("src/server.ts"), read("src/log.ts"), read("README.md"), read("docs/configuration.md")].join("\n");
    for (const name of assignments.keys()) expect(sources, `${name} is read by nothing`).toContain(name);
  });

  it("holds no secrets, and leaves empty only what is required or means 'unset'", () => {
    const values = parseEnvFile(envExample);
    const required = [...new Set(strings(compose).flatMap((t) => [...t.matchAll(/\$\{([A-Z][A-Z0-9_]*):\?/g)].map((m) => m[1]!)))];
    for (const [name, value] of Object.entries(values)) {
      if (/KEY|TOKEN|PASSWORD|SECRET/.test(name)) expect(value, `${name} must be empty in the example`).toBe("");
      if (value === "") expect(required.includes(name) || /_API_KEY(_FILE)?$|_BASE_URL$/.test(name), `${name} is empty but optional`).toBe(true);
    }
    for (const name of required) expect(values[name], `${name} is required: keep it uncommented`).toBe("");
  });
});

describe("Dockerfile", () => {
  it("builds in one stage and runs in another, both on the same current-LTS Node image pinned by version", () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    // node:MAJOR.MINOR.PATCH-slim: a release, not a moving tag; an LTS line (even major, 22 or later).
    const m = /^node:(\d+)\.\d+\.\d+-slim$/.exec(runtime.from);
    expect(m, runtime.from).not.toBeNull();
    expect(Number(m![1]) % 2).toBe(0);
    expect(Number(m![1])).toBeGreaterThanOrEqual(22);
    expect(stages.filter((s) => s.from === runtime.from).length).toBeGreaterThanOrEqual(2);
    const build = stages.find((s) => s.name && argsOf(runtime, "COPY").some((c) => c.includes(`--from=${s.name} `)))!;
    expect(build).toBeDefined();
    expect(argsOf(build, "RUN").join("\n")).toMatch(/\bnpm ci\b/);
    expect(argsOf(build, "RUN").join("\n")).toMatch(/\bnpm run build\b/);
    // npm ci ran with --ignore-scripts: the dependency patches (patches/) go in before the build
    // bundles the patched code.
    expect(argsOf(build, "RUN").join("\n")).toMatch(/\bpatch-package\b[^\n]*&& npm run build\b/);
  });

  it("installs production dependencies only in the runtime stage", () => {
    const runs = argsOf(runtime, "RUN").join("\n");
    expect(runs).toMatch(/\bnpm ci\b[^\n]*--omit=dev/);
    // `prepare` runs tsc, a dev dependency: scripts must be off in the runtime install.
    expect(runs).toMatch(/\bnpm ci\b[^\n]*--ignore-scripts/);
    expect(runs).not.toMatch(/\bnpm (install|i)\b/);
    expect(runs).not.toMatch(/npm run build/);
  });

  it("copies what the package ships (package.json `files`) plus public/, from the build stage", () => {
    const copies = argsOf(runtime, "COPY");
    const pkg = JSON.parse(read("package.json")) as { files: string[]; bin: Record<string, string> };
    for (const dir of [...pkg.files, "public"]) expect(copies.some((c) => new RegExp(`--from=\\S+ /app/${dir} `).test(c)), dir).toBe(true);
    expect(copies.some((c) => /\bpackage\.json\b/.test(c))).toBe(true);
    // The CMD's entry point is the package's bin, which loads the built dist/main.js.
    expect(Object.values(pkg.bin)).toContain("bin/app-server.js");
    expect(read("bin/app-server.js")).toContain("../dist/main.js");
    expect(existsSync(path.join(REPO_ROOT, "src/main.ts"))).toBe(true);
  });

  it("starts through the entry point that runs the server as the node user, with its home and workspace on volumes", () => {
    // No USER: the entry point (test/container-entrypoint.test.ts runs it) starts as root to hand
    // the secret files over, then runs the command as `node` (its default APP_SERVER_RUN_AS).
    expect(argsOf(runtime, "USER")).toEqual([]);
    expect(JSON.parse(argsOf(runtime, "ENTRYPOINT")[0]!)).toEqual(["app-server-entrypoint"]);
    expect(argsOf(runtime, "COPY")).toContain("--from=build /app/scripts/container-entrypoint.sh /usr/local/bin/app-server-entrypoint");
    const script = read("scripts/container-entrypoint.sh");
    expect(script).toMatch(/run_as="\$\{APP_SERVER_RUN_AS:-node\}"/);
    expect(script.trim().split("\n").at(-1)).toBe('exec setpriv --reuid="$uid" --regid="$gid" --init-groups -- "$@"');
    const env = argsOf(runtime, "ENV").join(" ");
    expect(env).toMatch(/\bAPP_SERVER_HOME=\/data\b/);
    expect(env).toMatch(/\bAPP_SERVER_WORKSPACE=\/workspace\b/);
    expect(JSON.parse(argsOf(runtime, "VOLUME")[0]!)).toEqual(["/data", "/workspace"]);
    expect(argsOf(runtime, "RUN").join("\n")).toMatch(/chown node:node \/data \/workspace/);
    expect(argsOf(runtime, "EXPOSE")).toEqual(["4500"]);
  });

  it("checks health on /readyz with node (no curl in slim images) and serves on all interfaces", () => {
    const [healthcheck] = argsOf(runtime, "HEALTHCHECK");
    expect(healthcheck).toMatch(/\bCMD\b/);
    expect(healthcheck).toMatch(/http:\/\/127\.0\.0\.1:4500\/readyz/);
    expect(healthcheck).toMatch(/"node"/);
    expect(healthcheck).not.toMatch(/curl|wget/);
    const cmd = argsOf(runtime, "CMD");
    expect(cmd).toHaveLength(1);
    expect(JSON.parse(cmd[0]!)).toEqual(["node", "bin/app-server.js", "serve", "--listen", "ws://0.0.0.0:4500"]);
  });
});

describe(".dockerignore", () => {
  const patterns = read(".dockerignore")
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith("#"));
  const ignored = (name: string) => patterns.some((p) => p.replace(/^\/|\/$/g, "") === name || (p.endsWith("*") && name.startsWith(p.slice(0, -1))));

  it("keeps installed trees, git history, build output and local secrets out of the build context", () => {
    for (const name of ["node_modules", ".git", "dist", ".env"]) expect(ignored(name), name).toBe(true);
  });

  it("keeps what the build needs", () => {
    expect(patterns.some((p) => p.startsWith("!"))).toBe(false);
    for (const name of ["package.json", "package-lock.json", "tsconfig.json", "tsconfig.build.json", "src", "bin", "migrations", "protocol", "public"])
      expect(ignored(name), name).toBe(false);
  });
});

describe("README", () => {
  it("has the Self-host section, with the compose commands, after Configure", () => {
    const readme = read("README.md");
    const selfHost = readme.indexOf("\n## Self-host\n");
    expect(selfHost).toBeGreaterThan(readme.indexOf("\n## Configure\n"));
    expect(readme.slice(selfHost)).toMatch(/docker compose up/);
  });
});
