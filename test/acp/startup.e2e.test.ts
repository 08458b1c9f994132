/**
 * Starting `app-server acp`, and what the editor is told when it cannot work: the embedded
 * engine's provider without an API key (an auth method is offered, sessions are refused with
 * auth_required until the key is there), a home another process holds (the answer says to use
 * --remote), a server that wants a token (sent as other clients send it, from --token or
 * APP_SERVER_AUTH_TOKEN), usage errors (exit 2), and the harness limit on model calls as the
 * max_turn_requests stop reason.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BACKENDS } from "../support/db.js";
import { startMockModelServer, type MockModelServer } from "../support/mock-model-server.js";
import { removeSeed, runCli, seededHome, type TestHome } from "../support/process.js";
import { startTurnHarness } from "../support/turns.js";
import { acpSchemaProblems } from "./schema.js";
import { spawnAcp, textBlock, type AcpAgentProcess } from "./support.js";

const backend = BACKENDS[BACKENDS.length - 1]!;
const TOKEN = "acp-test-token-0123456789abcdef";

describe("app-server acp start-up", () => {
  let mock: MockModelServer;
  let home: TestHome;
  const running: AcpAgentProcess[] = [];
  const spawnEmbedded = (env: Record<string, string>, args: string[] = []) => {
    const a = spawnAcp(["--home", home.home, ...args], { OPENAI_BASE_URL: mock.openaiBaseUrl, APP_SERVER_MODEL_PROVIDER: "openai", APP_SERVER_MODEL: "mock-model", ...env });
    running.push(a);
    return a;
  };

  beforeAll(async () => {
    mock = await startMockModelServer();
    home = await seededHome();
  });
  afterAll(async () => {
    for (const a of running) await a.close();
    for (const a of running) expect(acpSchemaProblems(a.wire)).toEqual([]);
    await mock?.close();
    await home?.cleanup();
    await removeSeed();
  });

  it("without the provider's API key: an auth method is offered and sessions need it", async () => {
    // A remote endpoint: a keyless server on this machine (the mock, Ollama) needs no key (next test).
    const a = spawnEmbedded({ OPENAI_BASE_URL: "https://api.openai.invalid/v1" });
    try {
      const init = await a.initialize();
      expect(init.authMethods).toEqual([expect.objectContaining({ id: "OPENAI_API_KEY", name: "Set OPENAI_API_KEY", description: expect.stringContaining("restart the agent") })]);
      await expect(a.agent.request("session/new", { cwd: home.home, mcpServers: [] })).rejects.toMatchObject({ code: -32000, message: expect.stringContaining("OPENAI_API_KEY") });
      await expect(a.agent.request("authenticate", { methodId: "OPENAI_API_KEY" })).rejects.toMatchObject({ code: -32000 });
      // What needs no model still works: the threads are listed.
      expect((await a.agent.request("session/list", {})).sessions).toBeInstanceOf(Array);
    } finally {
      await a.close();
    }
  });

  it("a keyless model server on this machine (OPENAI_BASE_URL on loopback) needs no key: no auth method, prompts run", async () => {
    const a = spawnEmbedded({});
    try {
      expect((await a.initialize()).authMethods).toEqual([]);
      const { sessionId } = await a.agent.request("session/new", { cwd: home.home, mcpServers: [] });
      mock.enqueue({ text: "local model" });
      expect((await a.agent.request("session/prompt", { sessionId, prompt: [textBlock("hi")] })).stopReason).toBe("end_turn");
    } finally {
      mock.reset();
      await a.close();
    }
  });

  it("with the key: no auth method; a second agent on the same home is told to use --remote", async () => {
    const a = spawnEmbedded({ OPENAI_API_KEY: "test-key" });
    expect((await a.initialize()).authMethods).toEqual([]);
    // A client that authenticates with a method of its own (CodeCompanion's "openai-api-key") is let through.
    await a.agent.request("authenticate", { methodId: "OPENAI_API_KEY" });
    await a.agent.request("authenticate", { methodId: "openai-api-key" });
    const b = spawnEmbedded({ OPENAI_API_KEY: "test-key" });
    await expect(b.initialize()).rejects.toMatchObject({ code: -32603, message: expect.stringContaining("app-server acp --remote") });
    await b.close();
    await a.close();
  });

  it("max_turn_requests: the turn reached the limit of model calls", async () => {
    const a = spawnEmbedded({ OPENAI_API_KEY: "test-key", APP_SERVER_MAX_MODEL_CALLS: "1" }, ["--mode", "full-access"]);
    await a.initialize();
    const { sessionId } = await a.agent.request("session/new", { cwd: home.home, mcpServers: [] });
    mock.enqueue({ toolCalls: [{ name: "shell", arguments: { command: "true" } }] }, { text: "never asked for" });
    const res = await a.agent.request("session/prompt", { sessionId, prompt: [textBlock("Loop")] });
    expect(res.stopReason).toBe("max_turn_requests");
    expect(mock.requests).toHaveLength(1);
    mock.reset();
    await a.close();
  });

  it("usage errors exit 2 before anything starts", async () => {
    for (const [args, says] of [
      [["--mode", "yolo"], "--mode must be one of read-only, ask, auto, full-access"],
      [["--remote", "http://127.0.0.1:1"], "--remote must be a ws://"],
      [["--remote", "ws://127.0.0.1:1", "--home", "/tmp"], "--home is for the embedded engine"],
      [["--listen", "ws://127.0.0.1:0"], "Unknown option '--listen'"],
      [["--model-provider", "nope"], "unknown model provider: nope"],
    ] as const) {
      const p = await runCli(["acp", ...args]);
      expect(p.exit.code, p.stderr).toBe(2);
      expect(p.stderr).toContain(says);
      expect(p.stdout).toBe("");
    }
    const help = await runCli(["acp", "--help"]);
    expect(help.exit.code).toBe(0);
    expect(help.stdout).toContain("Usage: app-server acp");
  });
});

describe("app-server acp --remote to a server that wants a token", () => {
  it("sends --token (or APP_SERVER_AUTH_TOKEN) as Authorization: Bearer; without it the editor is told", async () => {
    const h = await startTurnHarness(backend, "openai", { authToken: TOKEN });
    const agents: AcpAgentProcess[] = [];
    try {
      const none = spawnAcp(["--remote", h.ts.url]);
      agents.push(none);
      await expect(none.initialize()).rejects.toMatchObject({ code: -32603, message: expect.stringMatching(/refused the connection: HTTP 401.*--token/) });
      for (const a of [spawnAcp(["--remote", h.ts.url, "--token", TOKEN]), spawnAcp(["--remote", h.ts.url], { APP_SERVER_AUTH_TOKEN: TOKEN })]) {
        agents.push(a);
        await a.initialize();
        const { sessionId } = await a.agent.request("session/new", { cwd: h.ts.home, mcpServers: [] });
        h.mock.enqueue({ text: "with a token" });
        expect((await a.agent.request("session/prompt", { sessionId, prompt: [textBlock("hi")] })).stopReason).toBe("end_turn");
      }
    } finally {
      for (const a of agents) await a.close();
      await h.close();
    }
    for (const a of agents) expect(acpSchemaProblems(a.wire)).toEqual([]);
  });

  it("a loopback --remote without --token reads the token the server generated into its home, as exec does", async () => {
    const h = await startTurnHarness(backend, "openai", { authToken: TOKEN });
    const tokenHome = mkdtempSync(path.join(os.tmpdir(), "acp-token-home-"));
    writeFileSync(path.join(tokenHome, "auth-token"), `${TOKEN}\n`, { mode: 0o600 });
    const a = spawnAcp(["--remote", h.ts.url], { APP_SERVER_HOME: tokenHome });
    try {
      await a.initialize();
      const { sessionId } = await a.agent.request("session/new", { cwd: h.ts.home, mcpServers: [] });
      h.mock.enqueue({ text: "with the home's token" });
      expect((await a.agent.request("session/prompt", { sessionId, prompt: [textBlock("hi")] })).stopReason).toBe("end_turn");
    } finally {
      await a.close();
      await h.close();
      rmSync(tokenHome, { recursive: true, force: true });
    }
    expect(acpSchemaProblems(a.wire)).toEqual([]);
  });
});
