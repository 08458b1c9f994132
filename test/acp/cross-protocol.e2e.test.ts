// @needs-os-sandbox: a session's command runs in the OS sandbox (vitest.config.ts leaves this file out where bubblewrap cannot run).
/**
 * One thread, two protocols. Over a running server (`acp --remote`), a thread created over ACP is
 * listed by a plain thread/list, read and continued over the Codex protocol — and a turn a Codex
 * client runs streams into the open ACP session — and a Codex thread is listed, loaded (replayed)
 * and continued over ACP. An approval a Codex client answers first withdraws the editor's
 * question. The ACP session operations that map to thread methods (list, fork, title, archive)
 * leave what a Codex client sees. With the embedded engine, the thread an ACP session made is a
 * Codex thread of that home (PGlite) or database (Postgres, --database-url/--database-schema).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { PromptResponse, SessionUpdate } from "@agentclientprotocol/sdk/unstable";
import { makeWorkspace, MARK_COMMAND, markerCount } from "../support/approvals.js";
import { TestClient } from "../support/client.js";
import { BACKENDS, freshDatabase, TEST_DATABASE_URL } from "../support/db.js";
import { startMockModelServer } from "../support/mock-model-server.js";
import { removeSeed, seededHome } from "../support/process.js";
import { startServerOn } from "../support/server.js";
import { mockProviders, startTurnHarness, text, turnCompleted, type TurnHarness } from "../support/turns.js";
import { acpSchemaProblems } from "./schema.js";
import { spawnAcp, textBlock, type AcpAgentProcess } from "./support.js";

const backend = BACKENDS[BACKENDS.length - 1]!;

const prompt = (a: AcpAgentProcess, sessionId: string, t: string): Promise<PromptResponse> => a.agent.request("session/prompt", { sessionId, prompt: [textBlock(t)] });
const kinds = (updates: SessionUpdate[]) => updates.map((u) => u.sessionUpdate).filter((k) => k !== "available_commands_update");

describe("one thread over ACP and the Codex protocol (acp --remote)", () => {
  let h: TurnHarness;
  let a: AcpAgentProcess;
  let codex: TestClient;
  const cleanups: Array<() => void> = [];
  const workspace = () => {
    const w = makeWorkspace();
    cleanups.push(w.cleanup);
    return w.dir;
  };

  beforeAll(async () => {
    h = await startTurnHarness(backend, "openai");
    a = spawnAcp(["--remote", h.ts.url]);
    await a.initialize();
    codex = await TestClient.initialized(h.ts.url);
  });
  afterEach(() => {
    h.mock.reset();
    for (const c of cleanups.splice(0)) c();
  });
  afterAll(async () => {
    await codex?.close();
    await a?.close();
    await h?.close();
    expect(acpSchemaProblems(a.wire)).toEqual([]);
  });

  it("an ACP session's thread is listed, read and continued over Codex; the Codex turn streams into the session", async () => {
    const cwd = workspace();
    const { sessionId } = await a.agent.request("session/new", { cwd, mcpServers: [] });
    h.mock.enqueue({ text: "Answer over ACP." });
    await prompt(a, sessionId, "Asked over ACP");

    const list = await codex.request("thread/list", {});
    const listed = list.data.find((t: any) => t.id === sessionId);
    expect(listed).toMatchObject({ cwd, preview: "Asked over ACP", source: "vscode" });
    const read = await codex.request("thread/read", { threadId: sessionId, includeTurns: true });
    expect(read.thread.turns).toHaveLength(1);
    expect(read.thread.turns[0].items.map((i: any) => i.type)).toEqual(["userMessage", "agentMessage"]);
    expect(read.thread.turns[0].items[1].text).toBe("Answer over ACP.");

    await codex.request("thread/resume", { threadId: sessionId, excludeTurns: true });
    const seen = a.updatesOf(sessionId).length;
    h.mock.enqueue({ text: "Answer over Codex." });
    const { turn } = await codex.request("turn/start", { threadId: sessionId, input: text("Asked over Codex") });
    expect((await turnCompleted(codex, turn.id)).params.turn.status).toBe("completed");
    // The editor sees the other client's turn: its user message, then the answer.
    await a.waitFor("the Codex turn's answer", () => a.agentText(sessionId, seen) === "Answer over Codex.");
    const news = a.updatesOf(sessionId).slice(seen);
    expect(news[0]).toMatchObject({ sessionUpdate: "user_message_chunk", content: { type: "text", text: "Asked over Codex" } });
    // And the model saw the whole thread when the editor went on.
    h.mock.enqueue({ text: "Third." });
    expect((await prompt(a, sessionId, "And again over ACP")).stopReason).toBe("end_turn");
    const body = JSON.stringify(h.mock.requests.at(-1)!.body);
    expect(body).toContain("Asked over ACP");
    expect(body).toContain("Answer over Codex.");
    expect((await codex.request("thread/read", { threadId: sessionId, includeTurns: true })).thread.turns).toHaveLength(3);
  });

  it("a Codex thread is listed, loaded with its history and continued over ACP", async () => {
    const cwd = workspace();
    const started = await codex.request("thread/start", { cwd });
    const threadId = started.thread.id;
    h.mock.enqueue({ text: "Codex answered." });
    const { turn } = await codex.request("turn/start", { threadId, input: text("Codex asked") });
    await turnCompleted(codex, turn.id);

    const listed = await a.agent.request("session/list", { cwd });
    expect(listed.sessions.map((s) => [s.sessionId, s.title, s.cwd])).toEqual([[threadId, "Codex asked", cwd]]);
    await a.agent.request("session/load", { sessionId: threadId, cwd, mcpServers: [] });
    expect(kinds(a.updatesOf(threadId))).toEqual(["user_message_chunk", "agent_message_chunk"]);
    expect(a.agentText(threadId)).toBe("Codex answered.");

    h.mock.enqueue({ text: "ACP went on." });
    expect((await prompt(a, threadId, "Editor asks")).stopReason).toBe("end_turn");
    // The Codex client, still subscribed, saw the editor's turn.
    await codex.waitForNotification("item/completed", (p) => p.threadId === threadId && p.item.type === "agentMessage" && p.item.text === "ACP went on.");
    expect((await codex.request("thread/read", { threadId, includeTurns: true })).thread.turns).toHaveLength(2);
  });

  it("an approval a Codex client answers first withdraws the editor's question", async () => {
    const cwd = workspace();
    const { sessionId } = await a.agent.request("session/new", { cwd, mcpServers: [] });
    await a.agent.request("session/set_mode", { sessionId, modeId: "ask" });
    await codex.request("thread/resume", { threadId: sessionId, excludeTurns: true });
    const held = a.holdPermissions();
    h.mock.enqueue({ toolCalls: [{ name: "shell", arguments: { command: MARK_COMMAND } }] }, { text: "ran" });
    const running = prompt(a, sessionId, "Run it");
    await a.waitFor("the editor's question", () => a.permissionRequests.some((r) => r.sessionId === sessionId));
    const approval = await codex.waitFor((f) => f.method === "item/commandExecution/requestApproval" && f.params.threadId === sessionId);
    codex.respond(approval.id, { decision: "accept" });
    expect((await running).stopReason).toBe("end_turn");
    expect(held.withdrawn()).toBe(1);
    expect(markerCount(cwd)).toBe(1);
    a.onPermission = () => ({ outcome: { outcome: "cancelled" } });
  });

  it("fork, title and archive are thread operations a Codex client sees", async () => {
    const cwd = workspace();
    const { sessionId } = await a.agent.request("session/new", { cwd, mcpServers: [] });
    h.mock.enqueue({ text: "original" });
    await prompt(a, sessionId, "Before the fork");
    const forked = await a.agent.request("session/fork", { sessionId, cwd, mcpServers: [] });
    expect(forked.sessionId).not.toBe(sessionId);
    const fork = (await codex.request("thread/read", { threadId: forked.sessionId, includeTurns: true })).thread;
    expect(fork.forkedFromId).toBe(sessionId);
    expect(fork.turns).toHaveLength(1);
    h.mock.enqueue({ text: "in the fork" });
    expect((await prompt(a, forked.sessionId, "After the fork")).stopReason).toBe("end_turn");
    expect(JSON.stringify(h.mock.requests.at(-1)!.body)).toContain("Before the fork");

    expect(await a.agent.request("session/set_title", { sessionId, title: "  Named over ACP " })).toMatchObject({ title: "Named over ACP" });
    expect((await codex.request("thread/read", { threadId: sessionId })).thread.name).toBe("Named over ACP");

    await a.agent.request("session/archive", { sessionId });
    const live = await a.agent.request("session/list", { cwd });
    expect(live.sessions.map((s) => s.sessionId)).toEqual([forked.sessionId]);
    expect((await codex.request("thread/list", { archived: true })).data.map((t: any) => t.id)).toContain(sessionId);
    const archived = await a.agent.request("session/list", { cwd, archived: "only" });
    expect(archived.sessions.map((s) => s.sessionId)).toEqual([sessionId]);
    await a.agent.request("session/unarchive", { sessionId });
    expect((await a.agent.request("session/list", { cwd })).sessions.map((s) => s.sessionId).sort()).toEqual([sessionId, forked.sessionId].sort());
  });
});

describe.each(TEST_DATABASE_URL ? (["pglite", "postgres"] as const) : (["pglite"] as const))("the embedded engine's threads are the database's (%s)", (kind) => {
  afterAll(() => removeSeed());

  it("a thread an ACP session made is listed, read and continued by a server on the same data", async () => {
    const mock = await startMockModelServer();
    const ws = makeWorkspace();
    const db = kind === "postgres" ? await freshDatabase("postgres") : null;
    const home = kind === "pglite" ? await seededHome() : null;
    const engineArgs = db ? ["--database-url", db.options.databaseUrl!, "--database-schema", db.options.schema!, "--home", db.home] : ["--home", home!.home];
    const a = spawnAcp(engineArgs, { OPENAI_BASE_URL: mock.openaiBaseUrl, OPENAI_API_KEY: "test-key", APP_SERVER_MODEL_PROVIDER: "openai", APP_SERVER_MODEL: "mock-model" });
    let server: Awaited<ReturnType<typeof startServerOn>> | undefined;
    let codex: TestClient | undefined;
    try {
      await a.initialize();
      const { sessionId } = await a.agent.request("session/new", { cwd: ws.dir, mcpServers: [] });
      mock.enqueue({ text: "embedded answer" });
      await prompt(a, sessionId, "Asked the embedded engine");
      await a.close();
      expect(acpSchemaProblems(a.wire)).toEqual([]);

      // A server on the same home (PGlite: once the agent let go of it) or schema.
      const data = db ?? { options: {}, home: home!.home, cleanup: async () => {} };
      server = await startServerOn(data, { modelProvider: "openai", model: "mock-model", providers: mockProviders(mock) }, true);
      codex = await TestClient.initialized(server.url);
      const listed = (await codex.request("thread/list", {})).data.map((t: any) => [t.id, t.preview]);
      expect(listed).toContainEqual([sessionId, "Asked the embedded engine"]);
      await codex.request("thread/resume", { threadId: sessionId, excludeTurns: true });
      mock.enqueue({ text: "continued by Codex" });
      const { turn } = await codex.request("turn/start", { threadId: sessionId, input: text("Go on") });
      expect((await turnCompleted(codex, turn.id)).params.turn.status).toBe("completed");
      expect(JSON.stringify(mock.requests.at(-1)!.body)).toContain("embedded answer");
    } finally {
      await a.close();
      await codex?.close();
      await server?.close();
      await mock.close();
      ws.cleanup();
      await db?.cleanup();
      await home?.cleanup();
    }
  });
});
