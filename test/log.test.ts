import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { createLogger, redactUrl } from "../src/log.js";
import { presentedToken, tokenMatches, originAllowed } from "../src/transport/websocket.js";

function capture() {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      lines.push(...String(chunk).split("\n").filter(Boolean));
      done();
    },
  });
  return { lines, stream };
}

describe("logs", () => {
  it("redact authorization headers, API keys and tokens", () => {
    const { lines, stream } = capture();
    const log = createLogger("info", stream);
    log.info({ authorization: "Bearer s3cret-token", headers: { authorization: "Bearer s3cret-token" }, apiKey: "sk-live-123", token: "t0k3n", other: "kept" }, "hello");
    const text = lines.join("\n");
    expect(text).not.toMatch(/s3cret|sk-live|t0k3n/);
    expect(JSON.parse(lines[0]!)).toMatchObject({ authorization: "[redacted]", apiKey: "[redacted]", token: "[redacted]", other: "kept", msg: "hello" });
  });

  it("hide database passwords in URLs", () => {
    expect(redactUrl("postgres://app:hunter2@db:5432/app")).toBe("postgres://app:***@db:5432/app");
    expect(redactUrl("not a url")).toBe("[unparseable url]");
  });
});

describe("token and origin checks", () => {
  it("accept the bearer header or the token query parameter, compared in constant time", () => {
    expect(presentedToken({ authorization: "Bearer abc" }, "/")).toBe("abc");
    expect(presentedToken({ authorization: "bearer   abc " }, "/")).toBe("abc");
    expect(presentedToken({}, "/?token=xyz")).toBe("xyz");
    expect(presentedToken({ authorization: "Basic abc" }, "/")).toBeUndefined();
    expect(tokenMatches("abc", "abc")).toBe(true);
    expect(tokenMatches("abd", "abc")).toBe(false);
    expect(tokenMatches("abcd", "abc")).toBe(false);
    expect(tokenMatches(undefined, "abc")).toBe(false);
  });

  it("admit requests without Origin, the server's own origin and listed ones only", () => {
    expect(originAllowed(undefined, "127.0.0.1:4500", [])).toBe(true);
    expect(originAllowed("http://127.0.0.1:4500", "127.0.0.1:4500", [])).toBe(true);
    expect(originAllowed("http://evil.example", "127.0.0.1:4500", [])).toBe(false);
    expect(originAllowed("http://ide.example", "127.0.0.1:4500", ["http://ide.example"])).toBe(true);
    expect(originAllowed("null", "127.0.0.1:4500", [])).toBe(false);
  });
});
