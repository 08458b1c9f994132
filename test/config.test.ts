/** Flag/env resolution of `serve` (src/config.ts), in-process: precedence, defaults, refusals. */
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { ConfigError, DEFAULT_LISTEN, DEFAULT_MAX_FRAME_BYTES, isLoopback, parseListen, resolveServeConfig } from "../src/config.js";

describe("resolveServeConfig", () => {
  it("uses the documented defaults with no flags and no environment", () => {
    expect(resolveServeConfig([], {})).toEqual({
      listen: DEFAULT_LISTEN,
      databaseUrl: undefined,
      home: path.join(os.homedir(), ".agent-app-server"),
      modelProvider: "openai",
      model: "gpt-5",
      maxFrameBytes: DEFAULT_MAX_FRAME_BYTES,
    });
    expect(DEFAULT_LISTEN).toBe("ws://127.0.0.1:4500");
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
    });
  });

  it("picks the provider's default model when only the provider is given", () => {
    expect(resolveServeConfig(["--model-provider", "anthropic"], {}).model).toBe("claude-sonnet-4-5");
    expect(resolveServeConfig([], { APP_SERVER_MODEL_PROVIDER: "openai-chat" }).model).toBe("gpt-4o-mini");
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
    [["--listen", "tcp://127.0.0.1:1"], {}, /unsupported listen URL scheme: tcp:/],
    [["--listen", "wss://127.0.0.1:1"], {}, /unsupported listen URL scheme: wss:/],
    [["--listen", "127.0.0.1:4500"], {}, /unsupported listen URL scheme|invalid listen URL/],
    [["--listen", "ws://0.0.0.0:4500"], {}, /refusing to listen on non-loopback address 0\.0\.0\.0/],
    [[], { APP_SERVER_LISTEN: "ws://10.0.0.1:4500" }, /refusing to listen on non-loopback/],
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
    expect(() => resolveServeConfig(["--listen", "ws://[::ffff:127.0.0.1]:0"], {})).toThrow(/non-loopback/);
  });
});
