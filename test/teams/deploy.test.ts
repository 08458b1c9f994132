/**
 * deploy/team (issue 28, item 6), checked statically (no Docker engine here): the server is
 * reachable only through the TLS proxy, its environment resolves to a valid configuration with
 * the admin's token, per-user quotas and the browser origin of TEAM_HOST, and the proxy keeps the
 * playground's ?token= out of its access log.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { resolveServeConfig } from "../../src/config.js";
import { REPO_ROOT } from "../support/process.js";

const read = (file: string) => readFileSync(path.join(REPO_ROOT, file), "utf8");
/** Compose's ${VAR:-default} with only the variables given set. */
const interpolate = (text: string, env: Record<string, string>) => text.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*):-([^}]*)\}/g, (_m, name: string, def: string) => env[name] || def);

describe("deploy/team", () => {
  const compose = parseYaml(interpolate(read("deploy/team/docker-compose.yml"), { TEAM_HOST: "agents.example.com" })) as any;

  it("publishes only the proxy; the server and the database are on the compose network", () => {
    expect(compose.services["app-server"].ports).toBeUndefined();
    expect(compose.services.postgres.ports).toBeUndefined();
    expect(compose.services.caddy.ports).toEqual(["443:443", "80:80"]);
    expect(compose.services["app-server"].volumes).toContain("work:/srv/work");
  });

  it("gives the server a configuration that resolves: the admin's token, per-user quotas, the team's origin", () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "aas-team-deploy-"));
    try {
      const env: Record<string, string> = {};
      for (const [k, v] of Object.entries(compose.services["app-server"].environment as Record<string, unknown>)) if (v != null) env[k] = String(v);
      // Secrets as compose mounts them.
      writeFileSync(path.join(dir, "admin_token"), "a".repeat(64));
      writeFileSync(path.join(dir, "postgres_password"), "p@ss:w/rd");
      env.APP_SERVER_AUTH_TOKEN_FILE = path.join(dir, "admin_token");
      env.DATABASE_PASSWORD_FILE = path.join(dir, "postgres_password");
      const config = resolveServeConfig(["--listen", "ws://0.0.0.0:4500", "--home", dir], env);
      expect(config.authToken).toBe("a".repeat(64));
      expect(config.auth).toBe("token-any-user");
      expect(config.allowedOrigins).toEqual(["https://agents.example.com"]);
      expect(config.team?.quotas).toEqual({ maxConcurrentTurns: 4, requestsPerSecond: 50, tokensPerDay: 5_000_000 });
      expect(config.team?.jwt).toBeUndefined();
      expect(new URL(config.databaseUrl!).password).toBe(encodeURIComponent("p@ss:w/rd"));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("proxies to the server with TLS on TEAM_HOST and drops the token from its access log", () => {
    const caddy = read("deploy/team/Caddyfile");
    expect(caddy).toMatch(/^\{\$TEAM_HOST\} \{/m);
    expect(caddy).toMatch(/reverse_proxy app-server:4500/);
    expect(caddy).toMatch(/request>uri query \{\s*delete token\s*\}/);
  });
});
