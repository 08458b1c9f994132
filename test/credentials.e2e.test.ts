/**
 * account/read and modelProvider/list: whether the model providers can authenticate, told before
 * the first turn (the playground's "no API key for provider X — set …"). A provider without a key
 * is flagged; a keyless local OpenAI-compatible server (OPENAI_BASE_URL on localhost) is not; the
 * endpoints shown never carry credentials.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { displayableBaseURL, providerCredentials } from "../src/runtime/provider-credentials.js";
import { BACKENDS } from "./support/db.js";
import { startTestServer, type TestServer } from "./support/server.js";
import { TestClient } from "./support/client.js";
import { startMockModelServer, type MockModelServer } from "./support/mock-model-server.js";

/** Who a connection without a user token is (docs/teams.md): the local user, an admin. */
const LOCAL_USER = { userId: "local", name: expect.any(String), admin: true, roots: null, dangerFullAccess: true, signIn: "local" };

const ALL = ["anthropic", "openai", "openai-chat"] as const;
const byId = (list: ReturnType<typeof providerCredentials>) => Object.fromEntries(list.map((c) => [c.id, c]));

describe("provider credentials (the rule)", () => {
  it("a key in the options or any of the SDK's variables counts; blank does not", () => {
    const c = byId(providerCredentials(ALL, { openai: { apiKey: "from-options" } }, { ANTHROPIC_AUTH_TOKEN: "t", OPENAI_API_KEY: "  " }));
    expect(c.anthropic).toMatchObject({ hasKey: true, keyless: false, envKey: "ANTHROPIC_API_KEY" });
    expect(c.openai).toMatchObject({ hasKey: true, keyless: false, envKey: "OPENAI_API_KEY" });
    // OPENAI_API_KEY is blank and the endpoint is OpenAI's own: a key is missing.
    expect(c["openai-chat"]).toMatchObject({ hasKey: false, keyless: false, baseURL: undefined });
  });

  it("a local endpoint without a key needs none; a remote one does", () => {
    const local = byId(providerCredentials(ALL, {}, { OPENAI_BASE_URL: "http://localhost:11434/v1" }));
    expect(local["openai-chat"]).toMatchObject({ hasKey: false, keyless: true, baseURL: "http://localhost:11434/v1" });
    expect(local.anthropic).toMatchObject({ hasKey: false, keyless: false });
    const remote = byId(providerCredentials(ALL, { "openai-chat": { baseURL: "https://llm.example.com/v1" } }, { OPENAI_BASE_URL: "http://127.0.0.1:1/v1" }));
    // The options' endpoint wins over the variable, as in the adapters.
    expect(remote["openai-chat"]).toMatchObject({ keyless: false, baseURL: "https://llm.example.com/v1" });
  });

  it("an endpoint is shown without credentials, query or fragment", () => {
    expect(displayableBaseURL("https://llm.example.com/v1?key=secret#x")).toBe("https://llm.example.com/v1");
    expect(displayableBaseURL("https://user:secret@llm.example.com/v1")).toBeNull();
    expect(displayableBaseURL("not a url")).toBeNull();
    expect(displayableBaseURL(undefined)).toBeNull();
  });
});

describe.each(BACKENDS)("account/read and modelProvider/list (%s)", (backend) => {
  const saved: Record<string, string | undefined> = {};
  const VARS = ["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL"];
  let mock: MockModelServer;
  let missing: TestServer;
  let keyed: TestServer;

  beforeAll(async () => {
    // This machine's own keys must not decide the answers (vitest runs each file in its own worker).
    for (const v of VARS) {
      saved[v] = process.env[v];
      delete process.env[v];
    }
    mock = await startMockModelServer();
    // Default provider anthropic without a key; openai-chat on a local server without one; openai
    // keyed, behind an endpoint whose URL holds a password.
    missing = await startTestServer(backend, {
      modelProvider: "anthropic",
      model: "mock-model",
      providers: {
        anthropic: { baseURL: "https://anthropic.invalid" },
        "openai-chat": { baseURL: `${mock.openaiBaseUrl}` },
        openai: { apiKey: "k", baseURL: "https://user:pw@openai.invalid/v1" },
      },
    });
    keyed = await startTestServer(backend, { modelProvider: "openai-chat", model: "mock-model", providers: { "openai-chat": { baseURL: mock.openaiBaseUrl, apiKey: "k" } } });
  });

  afterAll(async () => {
    await missing?.close();
    await keyed?.close();
    await mock?.close();
    for (const v of VARS) if (saved[v] !== undefined) process.env[v] = saved[v];
  });

  it("a default provider without a key: no account, and the variable to set", async () => {
    const c = await TestClient.initialized(missing.url);
    try {
      expect(await c.request("account/read", {})).toEqual({ account: null, userId: null, requiresOpenaiAuth: false, workspaceRouting: null, user: LOCAL_USER });
      const list = await c.request("modelProvider/list", {});
      expect(list.defaultProviderId).toBe("anthropic");
      expect(list.canChangeDefault).toBe(false);
      const p = Object.fromEntries(list.data.map((x: any) => [x.id, x]));
      expect(p.anthropic).toEqual({
        id: "anthropic",
        name: "Anthropic (Messages API)",
        canEdit: false,
        baseUrl: "https://anthropic.invalid/",
        settings: { type: "customGateway", auth: { mode: "environmentVariable", envKey: "ANTHROPIC_API_KEY" } },
      });
      // The keyless local server needs nothing: not flagged.
      expect(p["openai-chat"].settings.auth).toEqual({ mode: "none" });
      expect(p["openai-chat"].baseUrl).toBe(`${mock.openaiBaseUrl}`);
      // The password in the URL is never shown.
      expect(p.openai.baseUrl).toBeNull();
      expect(JSON.stringify(list)).not.toContain("pw");

      // And the first turn does fail as announced, naming the variable.
      const threadId = (await c.request("thread/start", {})).thread.id;
      const { turn } = await c.request("turn/start", { threadId, input: [{ type: "text", text: "hi", text_elements: [] }] });
      const done = await c.waitForNotification("turn/completed", (q) => q.turn.id === turn.id);
      expect(done.params.turn.error.message).toContain("ANTHROPIC_API_KEY");
    } finally {
      await c.close();
    }
  });

  it("a default provider with a key: an API-key account, still no OpenAI login required", async () => {
    const c = await TestClient.initialized(keyed.url);
    try {
      expect(await c.request("account/read", {})).toEqual({ account: { type: "apiKey" }, userId: null, requiresOpenaiAuth: false, workspaceRouting: null, user: LOCAL_USER });
      const list = await c.request("modelProvider/list", {});
      expect(list.defaultProviderId).toBe("openai-chat");
      expect(list.data.find((x: any) => x.id === "openai-chat").settings.auth).toEqual({ mode: "environmentVariable", envKey: "OPENAI_API_KEY" });
    } finally {
      await c.close();
    }
  });
});
