/**
 * A model endpoint that cannot be reached, through the real SDKs and real sockets: the error names
 * the URL, the cause and a fix, and what retrying cannot fix is not retried.
 */
import { lookup } from "node:dns/promises";
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createProvider } from "../../src/providers/index.js";
import { PROVIDERS } from "../support/turns.js";
import { baseRequest, collectError, user } from "./helpers.js";

const VARIABLE = { anthropic: "ANTHROPIC_BASE_URL", openai: "OPENAI_BASE_URL", "openai-chat": "OPENAI_BASE_URL" } as const;

/** A port nothing listens on (bound, noted, released). */
async function closedPort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const { port } = s.address() as net.AddressInfo;
  await new Promise((r) => s.close(r));
  return port;
}

const servers: net.Server[] = [];
/** Plain TCP: answers a TLS client hello with HTTP, which no TLS client accepts. */
let plainPort: number;
/** Reads the request, then breaks the connection without answering. */
let breakingPort: number;
beforeAll(async () => {
  const listen = async (onSocket: (s: net.Socket) => void) => {
    const s = net.createServer((socket) => {
      socket.on("error", () => {});
      onSocket(socket);
    });
    servers.push(s);
    await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
    return (s.address() as net.AddressInfo).port;
  };
  plainPort = await listen((s) => s.once("data", () => s.end("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nno")));
  breakingPort = await listen((s) => s.once("data", () => s.resetAndDestroy()));
});
afterAll(async () => {
  for (const s of servers) await new Promise((r) => s.close(r));
});

describe.each(PROVIDERS)("%s: an endpoint it cannot reach", (id) => {
  const failure = async (baseURL: string) => (await collectError(createProvider(id, { apiKey: "test-key", baseURL }), baseRequest([user("hi")]))).error;

  it("nothing listening: the URL, 'connection refused' and what to do, in one message; not retried", async () => {
    const base = `http://127.0.0.1:${await closedPort()}/v1`;
    const error = await failure(base);
    expect(error.kind).toBe("network");
    expect(error.retryable).toBe(false);
    expect(error.message).toBe(`${id}: cannot reach ${base}: connection refused (ECONNREFUSED) — nothing listens there: start the model server, or fix ${VARIABLE[id]}`);
  });

  it("TLS against a server that does not speak it: says TLS and http versus https; not retried", async () => {
    const base = `https://127.0.0.1:${plainPort}/v1`;
    const error = await failure(base);
    expect(error.retryable).toBe(false);
    expect(error.message).toMatch(new RegExp(`^${id}: cannot reach ${base.replace(/[.:/]/g, "\\$&")}: the TLS handshake failed \\(ERR_SSL_[A-Z_]+\\) — check http:// versus https:// in ${VARIABLE[id]}`));
  });

  it("a connection that breaks: names the URL, and stays retryable (it may be passing)", async () => {
    const base = `http://127.0.0.1:${breakingPort}/v1`;
    const error = await failure(base);
    expect(error.kind).toBe("network");
    expect(error.retryable).toBe(true);
    expect(error.message).toMatch(new RegExp(`^${id}: cannot reach ${base.replace(/[.:/]/g, "\\$&")}: the connection broke \\(\\w+\\) — check the network, a proxy \\(HTTPS_PROXY\\) or ${VARIABLE[id]}$`));
  });

  it("never shows a password in the base URL", async () => {
    const port = await closedPort();
    const error = await failure(`http://user:hunter2-secret@127.0.0.1:${port}/v1`);
    expect(error.message).toContain(`cannot reach http://***@127.0.0.1:${port}/v1`);
    expect(error.message).not.toContain("hunter2");
  });
});

describe("a host name that does not resolve", () => {
  it("says so and is not retried", async (ctx) => {
    const host = "no-such-host.invalid";
    // Only a resolver that answers "no such name" gives ENOTFOUND; without one (no network) the
    // lookup fails as a temporary error, which is retried like any passing network failure.
    const resolved = await lookup(host).then(
      () => "resolves",
      (err: NodeJS.ErrnoException) => err.code,
    );
    if (resolved !== "ENOTFOUND") {
      console.warn(`[skipped] DNS case: looking up ${host} gave ${resolved}, not ENOTFOUND (no resolver here)`);
      return ctx.skip();
    }
    const base = `http://${host}/v1`;
    const { error } = await collectError(createProvider("openai", { apiKey: "test-key", baseURL: base }), baseRequest([user("hi")]));
    expect(error.retryable).toBe(false);
    expect(error.message).toBe(`openai: cannot reach ${base}: the host name does not resolve (ENOTFOUND) — check the host in OPENAI_BASE_URL and this machine's DNS`);
  });
});
