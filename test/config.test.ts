import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
/** Flag/env resolution of `serve` (src/config.ts), in-process: precedence, defaults, refusals. */
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { ConfigError, DEFAULT_LISTEN, defaultWorkspace, DEFAULT_MAX_FRAME_BYTES, DEFAULT_MODELS, isLoopback, loadApiKeyFiles, missingApiKeyWarning, parseListen, resolveServeConfig } from "../src/config.js";

/** The hardening settings when none are given. */
const NO_HARDENING = { authToken: null, insecureNoAuth: false, allowedOrigins: [], limits: {}, commandEnv: [] };

describe("resolveServeConfig", () => {
  it("uses the documented defaults with no flags and no environment", () => {
    expect(resolveServeConfig([], {})).toEqual({
      listen: DEFAULT_LISTEN,
      databaseUrl: undefined,
      home: path.join(os.homedir(), ".agent-app-server"),
      modelProvider: "openai",
      model: "gpt-5.4",
      maxFrameBytes: DEFAULT_MAX_FRAME_BYTES,
      ...NO_HARDENING,
    });
    expect(DEFAULT_LISTEN).toBe("ws://127.0.0.1:4500");
  });

  it("takes the sandbox binary and the command environment allow list from flags or the environment", () => {
    expect(resolveServeConfig(["--bwrap", "/opt/bwrap", "--command-env", "GITHUB_TOKEN", "--command-env", "NPM_*"], {})).toMatchObject({
      bwrapPath: "/opt/bwrap",
      commandEnv: ["GITHUB_TOKEN", "NPM_*"],
    });
    expect(resolveServeConfig([], { APP_SERVER_BWRAP: "/env/bwrap", APP_SERVER_COMMAND_ENV: "A, B_*" })).toMatchObject({ bwrapPath: "/env/bwrap", commandEnv: ["A", "B_*"] });
    expect(() => resolveServeConfig(["--command-env", "BAD NAME"], {})).toThrow(/invalid command environment name: BAD NAME/);
    expect(() => resolveServeConfig(["--command-env", "*"], {})).toThrow(ConfigError);
  });

  it("remembers the token file (hidden from sandboxed commands)", () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "aas-token-"));
    const file = path.join(dir, "token");
    writeFileSync(file, "0123456789abcdef0123\n");
    expect(resolveServeConfig(["--auth-token-file", file], {})).toMatchObject({ authToken: "0123456789abcdef0123", authTokenFile: file });
    rmSync(dir, { recursive: true, force: true });
  });

  it("falls back to the environment, and flags win over it", () => {
    const env = {
      APP_SERVER_LISTEN: "stdio://",
      DATABASE_URL: "postgres://env@127.0.0.1/env",
      APP_SERVER_HOME: "/env/home",
      APP_SERVER_MODEL_PROVIDER: "anthropic",
      APP_SERVER_MODEL: "env-model",
      APP_SERVER_MAX_FRAME_BYTES: "4096",
    };
    expect(resolveServeConfig([], env)).toEqual({
      listen: "stdio://",
      databaseUrl: "postgres://env@127.0.0.1/env",
      home: "/env/home",
      modelProvider: "anthropic",
      model: "env-model",
      maxFrameBytes: 4096,
      ...NO_HARDENING,
    });
    const flags = [
      "--listen", "ws://127.0.0.1:0",
      "--database-url", "postgres://flag@127.0.0.1/flag",
      "--home", "/flag/home",
      "--model-provider", "openai-chat",
      "--model", "flag-model",
      "--max-frame-bytes", "2048",
    ];
    expect(resolveServeConfig(flags, env)).toEqual({
      listen: "ws://127.0.0.1:0",
      databaseUrl: "postgres://flag@127.0.0.1/flag",
      home: "/flag/home",
      modelProvider: "openai-chat",
      model: "flag-model",
      maxFrameBytes: 2048,
      ...NO_HARDENING,
    });
  });

  it("picks the provider's default model when only the provider is given", () => {
    expect(resolveServeConfig(["--model-provider", "anthropic"], {}).model).toBe("claude-sonnet-5-5");
    expect(resolveServeConfig([], { APP_SERVER_MODEL_PROVIDER: "openai-chat" }).model).toBe("gpt-5.4-mini");
  });

  it("treats an empty DATABASE_URL as unset (embedded PGlite) and resolves a relative home", () => {
    const c = resolveServeConfig(["--home", "rel/home"], { DATABASE_URL: "" });
    expect(c.databaseUrl).toBeUndefined();
    expect(c.home).toBe(path.resolve("rel/home"));
  });

  it.each([
    [["--model-provider", "gemini"], {}, /unknown model provider: gemini/],
    [[], { APP_SERVER_MODEL_PROVIDER: "gemini" }, /unknown model provider/],
    [["--max-frame-bytes", "100"], {}, /invalid max frame size: 100/],
    [["--max-frame-bytes", "1.5"], {}, /invalid max frame size/],
    [[], { APP_SERVER_MAX_FRAME_BYTES: "huge" }, /invalid max frame size: huge/],
    [["--listen", "tcp://127.0.0.1:1"], {}, /unsupported --listen URL scheme: tcp:/],
    [["--listen", "wss://127.0.0.1:1"], {}, /unsupported --listen URL scheme: wss:/],
    [["--listen", "127.0.0.1:4500"], {}, /unsupported --listen URL scheme|invalid --listen URL/],
    [["--listen", "ws://0.0.0.0:4500"], { APP_SERVER_AUTH: "none" }, /refusing to listen on non-loopback address 0\.0\.0\.0/],
    [[], { APP_SERVER_LISTEN: "ws://10.0.0.1:4500", APP_SERVER_AUTH: "none" }, /refusing to listen on non-loopback/],
    [["--auth", "sometimes"], {}, /invalid --auth: sometimes \(expected token, token-any-user, none\)/],
    [[], { APP_SERVER_COMMAND_LIMITS: "processes=lots" }, /APP_SERVER_COMMAND_LIMITS: invalid processes limit: lots/],
    [["--command-limits", "memory=1G"], {}, /--command-limits: invalid command limit: memory=1G/],
  ] as const)("refuses %j %j with a ConfigError", (argv, env, message) => {
    let err: unknown;
    try {
      resolveServeConfig([...argv], { ...env });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toMatch(message);
  });

  it("rejects unknown flags and positionals (parseArgs TypeError, exit 2 in the CLI)", () => {
    expect(() => resolveServeConfig(["--bogus"], {})).toThrow(/Unknown option '--bogus'/);
    expect(() => resolveServeConfig(["serve"], {})).toThrow(/positional/);
  });
});

describe("parseListen and isLoopback", () => {
  it("parses ws://HOST:PORT (port 0 allowed, IPv6 brackets removed) and stdio://", () => {
    expect(parseListen("ws://127.0.0.1:0")).toEqual({ kind: "ws", host: "127.0.0.1", port: 0 });
    expect(parseListen("ws://[::1]:4500")).toEqual({ kind: "ws", host: "::1", port: 4500 });
    expect(parseListen("ws://localhost:1234")).toEqual({ kind: "ws", host: "localhost", port: 1234 });
    expect(parseListen("stdio://")).toEqual({ kind: "stdio" });
    expect(() => parseListen("ws://127.0.0.1:65536")).toThrow(ConfigError);
    expect(() => parseListen("")).toThrow(ConfigError);
  });

  it("accepts exactly loopback hosts", () => {
    for (const host of ["127.0.0.1", "127.1.2.3", "localhost", "::1"]) expect(isLoopback(host), host).toBe(true);
    for (const host of ["0.0.0.0", "::", "10.0.0.1", "128.0.0.1", "127.0.0.1.example.com", "example.com", "localhost.example.com", "::ffff:7f00:1"])
      expect(isLoopback(host), host).toBe(false);
    // Non-canonical spellings are normalised by the URL parser before the check.
    expect(resolveServeConfig(["--listen", "ws://0x7f.0.0.1:0"], {}).listen).toBe("ws://0x7f.0.0.1:0");
    expect(() => resolveServeConfig(["--listen", "ws://[::ffff:127.0.0.1]:0"], { APP_SERVER_AUTH: "none" })).toThrow(/non-loopback/);
  });
});

describe("authentication, origins and limits", () => {
  it("reads the token from a file or the environment and refuses short ones", () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "aas-token-"));
    const file = path.join(dir, "token");
    writeFileSync(file, "0123456789abcdef0123\n");
    expect(resolveServeConfig(["--auth-token-file", file], {}).authToken).toBe("0123456789abcdef0123");
    expect(resolveServeConfig([], { APP_SERVER_AUTH_TOKEN: "fedcba9876543210fedc" }).authToken).toBe("fedcba9876543210fedc");
    writeFileSync(file, "short");
    expect(() => resolveServeConfig(["--auth-token-file", file], {})).toThrow(/too short/);
    expect(() => resolveServeConfig(["--auth-token-file", path.join(dir, "missing")], {})).toThrow(/cannot read auth token file/);
    expect(() => resolveServeConfig([], { APP_SERVER_AUTH_TOKEN: "short" })).toThrow(/too short/);
    rmSync(dir, { recursive: true, force: true });
  });

  it("command limits and the shared /tmp come from flags or the environment", () => {
    expect(resolveServeConfig(["--command-limits", "processes=512, cpu=unlimited,file-size=1G"], {}).commandLimits).toEqual({
      processes: 512,
      addressSpaceBytes: 64 * 1024 ** 3,
      fileSizeBytes: 1024 ** 3,
      cpuSeconds: null,
    });
    expect(resolveServeConfig([], { APP_SERVER_COMMAND_LIMITS: "address-space=512M" }).commandLimits?.addressSpaceBytes).toBe(512 * 1024 ** 2);
    expect(resolveServeConfig([], {}).commandLimits).toBeUndefined();
    expect(resolveServeConfig(["--shared-tmp"], {}).sharedTmp).toBe(true);
    expect(resolveServeConfig([], { APP_SERVER_SHARED_TMP: "1" }).sharedTmp).toBe(true);
    expect(resolveServeConfig([], {}).sharedTmp).toBeUndefined();
  });

  it("listens beyond loopback only with a token (the default: generated) or an explicit --insecure-no-auth", () => {
    expect(resolveServeConfig(["--listen", "ws://0.0.0.0:4500"], {})).toMatchObject({ listen: "ws://0.0.0.0:4500", authToken: null });
    expect(resolveServeConfig(["--listen", "ws://0.0.0.0:4500"], {}).auth).toBeUndefined(); // = token, made at start
    expect(() => resolveServeConfig(["--listen", "ws://0.0.0.0:4500"], { APP_SERVER_AUTH: "none" })).toThrow(/without authentication/);
    expect(resolveServeConfig(["--listen", "ws://0.0.0.0:4500", "--insecure-no-auth"], {}).auth).toBe("none");
    expect(resolveServeConfig(["--listen", "ws://0.0.0.0:4500"], { APP_SERVER_AUTH_TOKEN: "fedcba9876543210fedc" }).listen).toBe("ws://0.0.0.0:4500");
    expect(resolveServeConfig(["--listen", "ws://0.0.0.0:4500", "--insecure-no-auth"], {}).insecureNoAuth).toBe(true);
  });

  it("takes allowed origins from flags or a comma-separated variable and validates them", () => {
    expect(resolveServeConfig(["--allowed-origin", "https://a.example", "--allowed-origin", "http://b.example:8080"], {}).allowedOrigins).toEqual([
      "https://a.example",
      "http://b.example:8080",
    ]);
    expect(resolveServeConfig([], { APP_SERVER_ALLOWED_ORIGINS: "https://a.example, https://c.example" }).allowedOrigins).toEqual(["https://a.example", "https://c.example"]);
    expect(() => resolveServeConfig(["--allowed-origin", "a.example"], {})).toThrow(/invalid allowed origin/);
  });

  it("parses limits and refuses non-positive ones", () => {
    const c = resolveServeConfig(["--max-connections", "5", "--max-concurrent-turns", "2"], { APP_SERVER_REQUESTS_PER_SECOND: "10" });
    expect(c.limits).toEqual({ maxConnections: 5, maxConcurrentTurns: 2, requestsPerSecond: 10 });
    expect(() => resolveServeConfig(["--max-connections", "0"], {})).toThrow(/positive integer/);
    expect(() => resolveServeConfig([], { APP_SERVER_MAX_INPUT_BYTES: "-1" })).toThrow(/positive integer/);
  });

  it("treats empty environment variables as unset", () => {
    expect(resolveServeConfig([], { APP_SERVER_MODEL: "", APP_SERVER_MODEL_PROVIDER: "" }).model).toBe("gpt-5.4");
  });
});

describe("start-up checks that name what is wrong", () => {
  it("refuses a database URL that is not a postgres:// URL, naming the flag or the variable", () => {
    expect(() => resolveServeConfig(["--database-url", "not a url"], {})).toThrow(/^invalid --database-url: not a URL/);
    expect(() => resolveServeConfig([], { DATABASE_URL: "mysql://db/app" })).toThrow(/^invalid DATABASE_URL: scheme mysql: \(expected postgres:\/\/ or postgresql:\/\/\)/);
    expect(() => resolveServeConfig(["--database-url", "postgres://"], {})).toThrow(/invalid --database-url: no host/);
    // The message never repeats the URL (it may hold a password).
    expect(() => resolveServeConfig(["--database-url", "postgres//u:s3cret@h/db"], {})).toThrow(ConfigError);
    try {
      resolveServeConfig(["--database-url", "postgres//u:s3cret@h/db"], {});
    } catch (err) {
      expect((err as Error).message).not.toContain("s3cret");
    }
    expect(resolveServeConfig(["--database-url", "postgresql://u:p%40ss@127.0.0.1:5432/app"], {}).databaseUrl).toBe("postgresql://u:p%40ss@127.0.0.1:5432/app");
  });

  it("refuses a --home that is a file", () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "aas-config-"));
    try {
      const file = path.join(dir, "a-file");
      writeFileSync(file, "x");
      expect(() => resolveServeConfig(["--home", file], {})).toThrow(`--home ${file} is not a directory`);
      expect(() => resolveServeConfig([], { APP_SERVER_HOME: file })).toThrow(`APP_SERVER_HOME ${file} is not a directory`);
      expect(resolveServeConfig(["--home", path.join(dir, "new")], {}).home).toBe(path.join(dir, "new"));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("--workspace / APP_SERVER_WORKSPACE: where threads without a cwd run, resolved, flag first; a file is refused", () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "aas-config-"));
    try {
      expect(resolveServeConfig([], {}).workspace).toBeUndefined(); // the server's default (~/agent-workspace)
      expect(resolveServeConfig([], { APP_SERVER_WORKSPACE: "rel/ws" }).workspace).toBe(path.resolve("rel/ws"));
      expect(resolveServeConfig(["--workspace", "/flag/ws"], { APP_SERVER_WORKSPACE: "/env/ws" }).workspace).toBe("/flag/ws");
      const file = path.join(dir, "a-file");
      writeFileSync(file, "x");
      expect(() => resolveServeConfig(["--workspace", file], {})).toThrow(`--workspace ${file} is not a directory`);
      expect(() => resolveServeConfig([], { APP_SERVER_WORKSPACE: file })).toThrow(`APP_SERVER_WORKSPACE ${file} is not a directory`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("the default workspace is a folder of its own in the user's home, not the home itself nor the server's directory", () => {
    expect(defaultWorkspace()).toBe(path.join(os.homedir(), "agent-workspace"));
    expect(defaultWorkspace()).not.toBe(process.cwd());
  });

  it("--database-schema: a plain identifier, with a Postgres database only", () => {
    const url = "postgres://postgres@127.0.0.1:5432/postgres";
    expect(resolveServeConfig(["--database-url", url, "--database-schema", "agent_app"], {}).databaseSchema).toBe("agent_app");
    expect(resolveServeConfig([], { DATABASE_URL: url, APP_SERVER_DATABASE_SCHEMA: "aas" }).databaseSchema).toBe("aas");
    expect(() => resolveServeConfig(["--database-url", url, "--database-schema", "a-b"], {})).toThrow(/invalid --database-schema: a-b/);
    expect(() => resolveServeConfig(["--database-schema", "aas"], {})).toThrow(/--database-schema needs a PostgreSQL database/);
  });

  it("current default models (none on the Anthropic SDK's deprecation list)", () => {
    // An internal file of the SDK (not exported): read it as text.
    const file = path.join(path.dirname(createRequire(import.meta.url).resolve("@anthropic-ai/sdk")), "internal", "data", "deprecated-models.js");
    const DEPRECATED_MODELS = Object.fromEntries([...readFileSync(file, "utf8").matchAll(/'([^']+)': '([^']+)'/g)].map((m) => [m[1], m[2]]));
    expect(Object.keys(DEPRECATED_MODELS).length).toBeGreaterThan(0);
    for (const model of Object.values(DEFAULT_MODELS)) expect(DEPRECATED_MODELS).not.toHaveProperty(model);
  });

  it("warns when the provider has no API key", () => {
    expect(missingApiKeyWarning("anthropic", {})).toBe(
      "ANTHROPIC_API_KEY is not set: turns with the anthropic provider will fail until it is (export it, or name a file holding it in ANTHROPIC_API_KEY_FILE, and restart)",
    );
    expect(missingApiKeyWarning("openai", {})).toMatch(/^OPENAI_API_KEY is not set: .*OPENAI_API_KEY_FILE, and restart\)$/);
    // A server on this machine (Ollama, llama.cpp) needs no key: the provider sends a placeholder.
    for (const url of ["http://127.0.0.1:11434/v1", "http://localhost:8080/v1", "http://[::1]:8000/v1"]) {
      expect(missingApiKeyWarning("openai-chat", { OPENAI_BASE_URL: url }), url).toBeNull();
      expect(missingApiKeyWarning("openai", { OPENAI_BASE_URL: url }), url).toBeNull();
    }
    expect(missingApiKeyWarning("anthropic", { ANTHROPIC_BASE_URL: "http://127.0.0.1:9000" })).toBeNull();
    // Another machine's server may need a key, or accept any: the warning says both.
    expect(missingApiKeyWarning("openai-chat", { OPENAI_BASE_URL: "http://gpu-box:8000/v1" })).toMatch(
      /will fail until it is .*; a server at http:\/\/gpu-box:8000\/v1 that needs no key accepts any value, e\.g\. OPENAI_API_KEY=none$/,
    );
    // The local address of another provider does not count.
    expect(missingApiKeyWarning("anthropic", { OPENAI_BASE_URL: "http://127.0.0.1:11434/v1" })).toMatch(/^ANTHROPIC_API_KEY is not set/);
    expect(missingApiKeyWarning("anthropic", { ANTHROPIC_API_KEY: "k" })).toBeNull();
    expect(missingApiKeyWarning("anthropic", { ANTHROPIC_AUTH_TOKEN: "t" })).toBeNull();
    expect(missingApiKeyWarning("openai-chat", { OPENAI_API_KEY: "k" })).toBeNull();
  });

  it("reads secrets from files: the database password (URL-encoded into the URL), the URL itself, API keys", () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "aas-config-"));
    try {
      writeFileSync(path.join(dir, "pw"), "a@b:c/d%\n");
      writeFileSync(path.join(dir, "url"), "postgres://u:x@db:5432/app\n");
      writeFileSync(path.join(dir, "key"), "sk-test\n");
      const withPassword = resolveServeConfig([], { DATABASE_URL: "postgres://u@db:5432/app", DATABASE_PASSWORD_FILE: path.join(dir, "pw") });
      expect(decodeURIComponent(new URL(withPassword.databaseUrl!).password)).toBe("a@b:c/d%");
      expect(withPassword.secretFiles).toEqual([path.join(dir, "pw")]);
      expect(resolveServeConfig([], { DATABASE_URL_FILE: path.join(dir, "url") }).databaseUrl).toBe("postgres://u:x@db:5432/app");
      expect(() => resolveServeConfig([], { DATABASE_PASSWORD_FILE: path.join(dir, "pw") })).toThrow(/DATABASE_PASSWORD_FILE needs a database URL/);
      expect(() => resolveServeConfig([], { DATABASE_URL: "postgres://u@db/app", DATABASE_PASSWORD_FILE: path.join(dir, "missing") })).toThrow(/cannot read DATABASE_PASSWORD_FILE .*ENOENT/);
      const env: NodeJS.ProcessEnv = { ANTHROPIC_API_KEY_FILE: path.join(dir, "key"), OPENAI_API_KEY: "kept", OPENAI_API_KEY_FILE: path.join(dir, "key") };
      expect(loadApiKeyFiles(env)).toEqual([path.join(dir, "key")]);
      expect(env.ANTHROPIC_API_KEY).toBe("sk-test");
      expect(env.OPENAI_API_KEY).toBe("kept");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
