/** The shared error mapper, credential resolution and the factory. */
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import * as AnthropicSdk from "@anthropic-ai/sdk";
import * as OpenAISdk from "openai";
import { isLocalBaseURL } from "../../src/providers/auth.js";
import { kindFromCode, parseRetryAfterMs, redact, toProviderError } from "../../src/providers/errors.js";
import { createProvider, isProviderId, PROVIDER_IDS, type ProviderId } from "../../src/providers/index.js";
import { startMockModelServer, type MockModelServer } from "../support/mock-model-server.js";
import { baseRequest, collect, collectError, user } from "./helpers.js";

const live = () => new AbortController().signal;
const ctx = (signal = live(), streamStarted = false) => ({ provider: "p", signal, streamStarted, secrets: ["sk-live-abcdefgh"] });

describe("parseRetryAfterMs", () => {
  it("prefers retry-after-ms, then seconds, then an HTTP date", () => {
    expect(parseRetryAfterMs(new Headers({ "retry-after-ms": "250.4", "retry-after": "9" }))).toBe(250);
    expect(parseRetryAfterMs(new Headers({ "retry-after": "1.5" }))).toBe(1500);
    const now = Date.parse("2025-01-01T00:00:00Z");
    expect(parseRetryAfterMs(new Headers({ "retry-after": "Wed, 01 Jan 2025 00:00:07 GMT" }), now)).toBe(7000);
    expect(parseRetryAfterMs(new Headers({ "retry-after": "soon" }))).toBeNull();
    expect(parseRetryAfterMs(new Headers())).toBeNull();
    expect(parseRetryAfterMs(undefined)).toBeNull();
  });
});

describe("toProviderError", () => {
  it("a fired signal wins over anything the SDK threw", () => {
    const ac = new AbortController();
    ac.abort();
    const rate = new OpenAISdk.RateLimitError(429, { message: "slow" }, undefined, new Headers());
    const e = toProviderError(rate, ctx(ac.signal));
    expect(e.kind).toBe("aborted");
    expect(e.retryable).toBe(false);
    expect(toProviderError(new AnthropicSdk.APIUserAbortError(), ctx()).kind).toBe("aborted");
  });

  it("maps statuses of both SDKs", () => {
    const h = new Headers({ "retry-after": "2" });
    const anth = (status: number, type: string, message: string) =>
      toProviderError(AnthropicSdk.APIError.generate(status, { type: "error", error: { type, message } }, undefined, h), ctx());
    expect(anth(529, "overloaded_error", "Overloaded").kind).toBe("overloaded");
    expect(anth(400, "invalid_request_error", "prompt is too long: 300000 tokens > 200000 maximum").kind).toBe("contextOverflow");
    expect(anth(413, "request_too_large", "too big").kind).toBe("badRequest");
    expect(anth(429, "rate_limit_error", "x").retryAfterMs).toBe(2000);
    const oai = (status: number, error: unknown) => toProviderError(OpenAISdk.APIError.generate(status, { error }, undefined, h), ctx());
    expect(oai(400, { message: "This model's maximum context length is 8192 tokens", code: null }).kind).toBe("contextOverflow");
    expect(oai(400, { message: "bad", code: "context_length_exceeded" }).kind).toBe("contextOverflow");
    expect(oai(404, "model 'llama9' not found").kind).toBe("notFound"); // Ollama's string error body
    expect(oai(502, { message: "bad gateway" }).kind).toBe("server");
    expect(oai(403, { message: "no" }).kind).toBe("auth");
  });

  it("quota and billing exhaustion is its own kind, never retried, and says so (OpenAI 429 insufficient_quota is not a rate limit)", () => {
    const h = new Headers({ "retry-after": "20" });
    const oai = (status: number, error: unknown) => toProviderError(OpenAISdk.APIError.generate(status, { error }, undefined, h), ctx());
    const quota = oai(429, { message: "You exceeded your current quota, please check your plan and billing details.", type: "insufficient_quota", code: "insufficient_quota" });
    expect(quota.kind).toBe("quota");
    expect(quota.retryable).toBe(false);
    expect(quota.message).toMatch(/insufficient_quota: You exceeded your current quota.*\(the account's quota or billing limit is reached; not retried/);
    expect(oai(429, { message: "Rate limit reached for requests", type: "requests", code: "rate_limit_exceeded" }).kind).toBe("rateLimited");
    expect(oai(402, { message: "Insufficient Balance" }).kind).toBe("quota"); // DeepSeek
    const anth = (status: number, type: string, message: string) =>
      toProviderError(AnthropicSdk.APIError.generate(status, { type: "error", error: { type, message } }, undefined, h), ctx());
    expect(anth(402, "billing_error", "payment required").kind).toBe("quota");
    expect(anth(400, "invalid_request_error", "Your credit balance is too low to access the Anthropic API.").kind).toBe("quota");
    expect(kindFromCode("insufficient_quota", "quota")).toBe("quota");
    expect(kindFromCode("billing_hard_limit_reached", null)).toBe("quota");
  });

  it("connection failures: network before the response, streamIncomplete after it", () => {
    const conn = new OpenAISdk.APIConnectionError({ message: "Connection error." });
    expect(toProviderError(conn, ctx()).kind).toBe("network");
    const reset = Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" });
    expect(toProviderError(reset, ctx()).kind).toBe("network");
    expect(toProviderError(reset, ctx(live(), true)).kind).toBe("streamIncomplete");
    const terminated = new TypeError("terminated", { cause: Object.assign(new Error("other side closed"), { code: "UND_ERR_SOCKET" }) });
    expect(toProviderError(terminated, ctx(live(), true)).kind).toBe("streamIncomplete");
    expect(toProviderError(new SyntaxError("Unexpected end of JSON input"), ctx(live(), true)).kind).toBe("streamIncomplete");
  });

  it("in-stream error codes", () => {
    expect(kindFromCode("overloaded_error", "")).toBe("overloaded");
    expect(kindFromCode("api_error", "")).toBe("server");
    expect(kindFromCode("rate_limit_exceeded", "")).toBe("rateLimited");
    expect(kindFromCode("invalid_request_error", "prompt is too long")).toBe("contextOverflow");
    expect(kindFromCode(null, "unknown")).toBe("server");
  });

  it("never leaks keys into messages", () => {
    const e = toProviderError(OpenAISdk.APIError.generate(401, { error: { message: "Incorrect API key provided: sk-live-abcdefgh and sk-other-12345678" } }, undefined, new Headers()), ctx());
    expect(e.message).not.toContain("sk-live-abcdefgh");
    expect(e.message).not.toContain("sk-other-12345678");
    expect(redact("key=my-custom-token!", ["my-custom-token"])).toBe("key=[redacted]!");
  });
});

describe("credentials and the factory", () => {
  let mock: MockModelServer;
  beforeAll(async () => {
    mock = await startMockModelServer();
  });
  afterAll(async () => {
    await mock.close();
  });
  afterEach(() => {
    vi.unstubAllEnvs();
    mock.reset();
  });
  const clearEnv = () => {
    for (const v of ["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL"]) vi.stubEnv(v, "");
  };

  it("lists its ids", () => {
    expect(PROVIDER_IDS).toEqual(["anthropic", "openai", "openai-chat"]);
    expect(isProviderId("openai-chat")).toBe(true);
    expect(isProviderId("gemini")).toBe(false);
  });

  it.each([
    ["anthropic", "ANTHROPIC_API_KEY"],
    ["openai", "OPENAI_API_KEY"],
    ["openai-chat", "OPENAI_API_KEY"],
  ] as const)("%s without any key fails the first call with a clear auth error", async (id, envVar) => {
    clearEnv();
    const provider = createProvider(id);
    const { error } = await collectError(provider, baseRequest([user("x")]));
    expect(error.kind).toBe("auth");
    expect(error.retryable).toBe(false);
    expect(error.message).toBe(`${id}: ${envVar} is not set: set it (or ${envVar}_FILE, a file holding it) where the server runs, and restart the server`);
  });

  it.each(PROVIDER_IDS)("%s reads key and base URL from the SDK env vars", async (id: ProviderId) => {
    clearEnv();
    if (id === "anthropic") {
      vi.stubEnv("ANTHROPIC_API_KEY", "env-anthropic-key");
      vi.stubEnv("ANTHROPIC_BASE_URL", mock.anthropicBaseUrl);
    } else {
      vi.stubEnv("OPENAI_API_KEY", "env-openai-key");
      vi.stubEnv("OPENAI_BASE_URL", mock.openaiBaseUrl);
    }
    const { done } = await collect(createProvider(id), baseRequest([user("x")]));
    expect(done.message.content).toEqual([{ type: "text", text: "OK" }]);
    expect(mock.requests[0].headers.authorization).toBe(`Bearer env-${id === "anthropic" ? "anthropic" : "openai"}-key`);
  });

  it.each(PROVIDER_IDS)("%s against a local server needs no key", async (id: ProviderId) => {
    clearEnv();
    const baseURL = id === "anthropic" ? mock.anthropicBaseUrl : mock.openaiBaseUrl;
    const { done } = await collect(createProvider(id, { baseURL }), baseRequest([user("x")]));
    expect(done.stopReason).toBe("endTurn");
  });

  it("recognises local base URLs", () => {
    expect(isLocalBaseURL("http://localhost:11434/v1")).toBe(true);
    expect(isLocalBaseURL("http://127.0.0.1:8000")).toBe(true);
    expect(isLocalBaseURL("http://[::1]:8080/v1")).toBe(true);
    expect(isLocalBaseURL("https://api.openai.com/v1")).toBe(false);
    expect(isLocalBaseURL(undefined)).toBe(false);
  });
});
