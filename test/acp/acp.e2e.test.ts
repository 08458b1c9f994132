// @needs-os-sandbox: the sessions' commands and MCP servers run in the OS sandbox (vitest.config.ts leaves this file out where bubblewrap cannot run).
/**
 * `app-server acp` as a real process, driven by the ACP SDK's client, in both of its modes: the
 * engine embedded in the process (--home, the mock model through OPENAI_BASE_URL) and a bridge to
 * a running server (--remote ws://…). The same scenarios run against each: a prompt with streamed
 * text, a command's permission request answered each way, a file edit shown as a diff, cancel
 * mid-turn and during a permission request, the stop reasons, a mode and a model switch, the
 * editor's MCP servers (stdio and HTTP), and loading an earlier session in a new agent process
 * with its history replayed before the response. Every message the agent sent in every test is
 * checked against the SDK's ACP JSON Schema.
 *
 * One file (over 300 lines) because the scenarios share one agent process per mode: starting one
 * (an engine, a PGlite home) costs seconds on this machine, twenty of them minutes.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { PromptResponse, RequestPermissionRequest, SessionUpdate } from "@agentclientprotocol/sdk/unstable";
import { makeWorkspace, MARK_COMMAND, markerCount, updateFilePatch } from "../support/approvals.js";
import { BACKENDS } from "../support/db.js";
import { startMockModelServer, type MockModelServer } from "../support/mock-model-server.js";
import { REPO_ROOT, removeSeed, seededHome, type TestHome } from "../support/process.js";
import { startTurnHarness, type TurnHarness } from "../support/turns.js";
import { acpSchemaProblems } from "./schema.js";
import { spawnAcp, startSseMcpServer, textBlock, type AcpAgentProcess } from "./support.js";

const backend = BACKENDS[BACKENDS.length - 1]!;
const FIXTURE = path.join(REPO_ROOT, "test", "fixtures", "mcp-test-server.mjs");

type Mode = "embedded" | "remote";

/** An agent process of the given mode, against `mock` (embedded) or the harness's server (remote). */
interface Rig {
  mock: MockModelServer;
  spawn(): AcpAgentProcess;
  close(): Promise<void>;
}

async function rig(mode: Mode): Promise<Rig> {
  if (mode === "remote") {
    const h: TurnHarness = await startTurnHarness(backend, "openai");
    return { mock: h.mock, spawn: () => spawnAcp(["--remote", h.ts.url]), close: () => h.close() };
  }
  const mock = await startMockModelServer();
  const home: TestHome = await seededHome();
  const env = { OPENAI_BASE_URL: mock.openaiBaseUrl, OPENAI_API_KEY: "test-key", APP_SERVER_MODEL_PROVIDER: "openai", APP_SERVER_MODEL: "mock-model" };
  return {
    mock,
    spawn: () => spawnAcp(["--home", home.home], env),
    close: async () => {
      await mock.close();
      await home.cleanup();
    },
  };
}

const choose = (kind: string) => (req: RequestPermissionRequest) => {
  const option = req.options.find((o) => o.kind === kind);
  if (!option) throw new Error(`no ${kind} option in ${JSON.stringify(req.options)}`);
  return { outcome: { outcome: "selected" as const, optionId: option.optionId } };
};

const last = <T>(xs: T[]): T => xs[xs.length - 1]!;
const ofKind = <K extends SessionUpdate["sessionUpdate"]>(updates: SessionUpdate[], kind: K) =>
  updates.filter((u): u is Extract<SessionUpdate, { sessionUpdate: K }> => u.sessionUpdate === kind);

describe.each<Mode>(["embedded", "remote"])("app-server acp (%s)", (mode) => {
  let r: Rig;
  let a: AcpAgentProcess;
  let checked = 0;
  const cleanups: Array<() => void> = [];

  const workspace = () => {
    const w = makeWorkspace();
    cleanups.push(w.cleanup);
    return w.dir;
  };
  const start = async () => {
    a = r.spawn();
    checked = 0;
    await a.initialize({ terminalOutput: false, elicitation: true });
  };
  const newSession = async (cwd: string, extra: Record<string, unknown> = {}) => (await a.agent.request("session/new", { cwd, mcpServers: [], ...extra })).sessionId;
  const prompt = (sessionId: string, text: string): Promise<PromptResponse> => a.agent.request("session/prompt", { sessionId, prompt: [textBlock(text)] });
  /** Runs the command once through the mock: the model calls shell, then answers "done". */
  const runCommand = (sessionId: string, command = MARK_COMMAND) => {
    r.mock.enqueue({ toolCalls: [{ name: "shell", arguments: { command } }] }, { text: "done" });
    return prompt(sessionId, "Run it");
  };
  const toolCallIds = (sessionId: string) => ofKind(a.updatesOf(sessionId), "tool_call").map((u) => u.toolCallId);

  beforeAll(async () => {
    r = await rig(mode);
    await start();
  });
  afterEach(async () => {
    r.mock.reset();
    a.onPermission = () => ({ outcome: { outcome: "cancelled" } });
    a.permissionRequests.length = 0;
    a.elicitations.length = 0;
    a.onElicitation = () => ({ action: "decline" });
    for (const c of cleanups.splice(0)) c();
    const problems = acpSchemaProblems(a.wire.slice(checked));
    checked = a.wire.length;
    expect(problems).toEqual([]);
  });
  afterAll(async () => {
    await a?.close();
    await r?.close();
    await removeSeed();
  });

  it("initialize says what the agent does; a prompt streams text and ends with end_turn", async () => {
    const init = a.wire.find((m) => m.from === "agent" && m.message.result?.protocolVersion !== undefined)!.message.result;
    expect(init.protocolVersion).toBe(1);
    expect(init.agentCapabilities).toMatchObject({
      loadSession: true,
      promptCapabilities: { image: true, embeddedContext: true },
      mcpCapabilities: { http: true },
      sessionCapabilities: { list: {}, fork: {}, resume: {}, close: {} },
    });
    expect(init.authMethods).toEqual([]);

    const cwd = workspace();
    const created = await a.agent.request("session/new", { cwd, mcpServers: [] });
    expect(created.modes?.currentModeId).toBe("auto");
    expect(created.modes?.availableModes.map((m) => m.id)).toEqual(["read-only", "ask", "auto", "full-access"]);
    expect(created.configOptions?.map((o) => [o.id, o.currentValue])).toEqual([
      ["mode", "auto"],
      ["model", "openai/mock-model"],
    ]);
    r.mock.enqueue({ text: ["Hello ", "from ", "the mock."] });
    const res = await prompt(created.sessionId, "Say hello");
    expect(res.stopReason).toBe("end_turn");
    const chunks = ofKind(a.updatesOf(created.sessionId), "agent_message_chunk");
    expect(chunks.length).toBe(3);
    expect(a.agentText(created.sessionId)).toBe("Hello from the mock.");
    // The prompt reached the model; the editor's own prompt is not echoed back.
    expect(JSON.stringify(r.mock.requests[0]!.body)).toContain("Say hello");
    expect(ofKind(a.updatesOf(created.sessionId), "user_message_chunk")).toEqual([]);
    await a.waitFor("the slash commands", () => ofKind(a.updatesOf(created.sessionId), "available_commands_update").length > 0);
    const commands = ofKind(a.updatesOf(created.sessionId), "available_commands_update")[0]!.availableCommands.map((c) => c.name);
    expect(commands).toEqual(expect.arrayContaining(["compact", "review"]));
    // The session is a thread: session/list finds it, titled by its first prompt.
    const listed = await a.agent.request("session/list", { cwd });
    expect(listed.sessions.map((s) => [s.sessionId, s.title])).toEqual([[created.sessionId, "Say hello"]]);
  });

  it("a refused answer ends the prompt with the refusal stop reason, its streamed text kept", async () => {
    const sessionId = await newSession(workspace());
    r.mock.enqueue({ text: ["I will not ", "do that"], stop: "refusal" });
    expect((await prompt(sessionId, "Do the forbidden thing")).stopReason).toBe("refusal");
    expect(a.agentText(sessionId)).toContain("I will not do that");
  });

  it("a prompt's image and embedded context (an editor's unsaved buffer) reach the model", async () => {
    const cwd = workspace();
    const sessionId = await newSession(cwd);
    const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
    r.mock.enqueue({ text: "seen" });
    const res = await a.agent.request("session/prompt", {
      sessionId,
      prompt: [
        { type: "text", text: "What is in these?" },
        { type: "image", mimeType: "image/png", data: png },
        { type: "resource", resource: { uri: `file://${cwd}/draft.ts`, mimeType: "text/x-typescript", text: "const unsaved = 42;" } },
      ],
    });
    expect(res.stopReason).toBe("end_turn");
    const body = JSON.stringify(last(r.mock.requests).body);
    expect(body).toContain(`data:image/png;base64,${png}`);
    expect(body).toContain("const unsaved = 42;");
    expect(body).toContain(`file://${cwd}/draft.ts`);
    await expect(a.agent.request("session/prompt", { sessionId, prompt: [{ type: "audio", mimeType: "audio/wav", data: "AAAA" }] })).rejects.toMatchObject({ code: -32602 });
  });

  it("ask mode: a command's permission request answered allow once, reject once, allow always, reject always", async () => {
    const cwd = workspace();
    const sessionId = await newSession(cwd);
    await a.agent.request("session/set_mode", { sessionId, modeId: "ask" });

    a.onPermission = choose("allow_once");
    expect((await runCommand(sessionId)).stopReason).toBe("end_turn");
    expect(markerCount(cwd)).toBe(1);
    expect(a.permissionRequests).toHaveLength(1);
    const asked = a.permissionRequests[0]!;
    expect(asked.sessionId).toBe(sessionId);
    expect(asked.options.map((o) => o.kind).sort()).toEqual(["allow_always", "allow_once", "reject_always", "reject_once"]);
    const [firstCall] = toolCallIds(sessionId);
    expect(asked.toolCall.toolCallId).toBe(firstCall);
    // The editor is shown the script the model wrote, not Codex's `/bin/bash -lc '…'` invocation.
    expect(asked.toolCall).toMatchObject({ title: MARK_COMMAND, rawInput: { command: MARK_COMMAND, cwd } });
    const first = a.toolCall(sessionId, firstCall!);
    expect(first[0]).toMatchObject({ sessionUpdate: "tool_call", kind: "execute", title: MARK_COMMAND, status: "in_progress", rawInput: { command: MARK_COMMAND, cwd } });
    expect(last(first)).toMatchObject({ sessionUpdate: "tool_call_update", status: "completed", rawOutput: { exitCode: 0 } });
    expect(JSON.stringify(last(first))).toContain("ran-1");

    a.onPermission = choose("reject_once");
    await runCommand(sessionId);
    expect(markerCount(cwd)).toBe(1);
    expect(a.permissionRequests).toHaveLength(2);
    expect(last(a.toolCall(sessionId, last(toolCallIds(sessionId))))).toMatchObject({ status: "failed" });

    // allow always: this command is not asked about again in the session, and runs.
    a.onPermission = choose("allow_always");
    await runCommand(sessionId);
    expect(markerCount(cwd)).toBe(2);
    expect(a.permissionRequests).toHaveLength(3);
    await runCommand(sessionId);
    expect(markerCount(cwd)).toBe(3);
    expect(a.permissionRequests).toHaveLength(3);

    // reject always: another command is declined, and declined again without asking.
    const other = "echo other >> marker.txt";
    a.onPermission = choose("reject_always");
    await runCommand(sessionId, other);
    expect(a.permissionRequests).toHaveLength(4);
    await runCommand(sessionId, other);
    expect(a.permissionRequests).toHaveLength(4);
    expect(markerCount(cwd)).toBe(3);
    const [x, y] = toolCallIds(sessionId).slice(-2);
    expect(last(a.toolCall(sessionId, x!))).toMatchObject({ status: "failed" });
    expect(last(a.toolCall(sessionId, y!))).toMatchObject({ status: "failed" });
  });

  it("a file edit is an edit tool call with the change as diff content", async () => {
    const cwd = workspace();
    const file = path.join(cwd, "notes.txt");
    writeFileSync(file, "one\ntwo\nthree\n");
    const sessionId = await newSession(cwd);
    r.mock.enqueue({ toolCalls: [{ name: "apply_patch", arguments: { patch: updateFilePatch("notes.txt", "two", "TWO") } }] }, { text: "edited" });
    expect((await prompt(sessionId, "Edit it")).stopReason).toBe("end_turn");
    expect(readFileSync(file, "utf8")).toBe("one\nTWO\nthree\n");
    const [id] = toolCallIds(sessionId);
    const updates = a.toolCall(sessionId, id!);
    expect(updates[0]).toMatchObject({ sessionUpdate: "tool_call", kind: "edit", title: "Edit notes.txt", locations: [{ path: file }] });
    const final = last(updates) as { status: string; content: unknown[] };
    expect(final.status).toBe("completed");
    const diffs = (updates[0] as { content: unknown[] }).content;
    expect(diffs).toEqual([{ type: "diff", path: file, oldText: "one\ntwo\nthree", newText: "one\nTWO\nthree" }]);
  });

  it("session/cancel mid-turn: the turn is interrupted and the prompt ends cancelled", async () => {
    const sessionId = await newSession(workspace());
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    r.mock.enqueue({ text: ["partial ", "never"], gate: { afterEvents: 5, wait: gate } });
    try {
      const running = prompt(sessionId, "Take your time");
      await a.waitFor("the first chunk", () => a.agentText(sessionId) === "partial ");
      await a.agent.notify("session/cancel", { sessionId });
      expect((await running).stopReason).toBe("cancelled");
    } finally {
      open();
    }
    expect(a.agentText(sessionId)).toBe("partial ");
    // The session takes the next prompt.
    r.mock.enqueue({ text: "again" });
    expect((await prompt(sessionId, "Once more")).stopReason).toBe("end_turn");
  });

  it("session/cancel during a permission request: the request is cancelled, nothing runs, the prompt ends cancelled", async () => {
    const cwd = workspace();
    const sessionId = await newSession(cwd);
    await a.agent.request("session/set_mode", { sessionId, modeId: "ask" });
    const held = a.holdPermissions();
    r.mock.enqueue({ toolCalls: [{ name: "shell", arguments: { command: MARK_COMMAND } }] }, { text: "not reached" });
    const running = prompt(sessionId, "Run it");
    await a.waitFor("the permission request", () => a.permissionRequests.length === 1);
    await a.agent.notify("session/cancel", { sessionId });
    expect((await running).stopReason).toBe("cancelled");
    expect(held.withdrawn()).toBe(1);
    expect(markerCount(cwd)).toBe(0);
    expect(r.mock.requests).toHaveLength(1);
  });

  it("stop reasons: max_tokens when the output was cut; a failed turn is an error response", async () => {
    const sessionId = await newSession(workspace());
    r.mock.enqueue({ text: "cut off", stop: "maxTokens" });
    expect((await prompt(sessionId, "Long answer")).stopReason).toBe("max_tokens");
    r.mock.enqueue({ kind: "error", status: 400, message: "bad request from the mock" });
    await expect(prompt(sessionId, "Fail")).rejects.toMatchObject({ code: -32603, message: expect.stringContaining("bad request from the mock") });
  });

  it("mode and model switches apply from the next prompt", async () => {
    const cwd = workspace();
    const sessionId = await newSession(cwd);
    a.onPermission = choose("allow_once");
    await runCommand(sessionId);
    expect(a.permissionRequests).toHaveLength(0); // auto: the workspace sandbox allows it
    expect(markerCount(cwd)).toBe(1);

    const set = await a.agent.request("session/set_config_option", { sessionId, configId: "mode", value: "ask" });
    expect(set.configOptions.find((o) => o.id === "mode")?.currentValue).toBe("ask");
    await a.waitFor("current_mode_update", () => ofKind(a.updatesOf(sessionId), "current_mode_update").some((u) => u.currentModeId === "ask"));
    await runCommand(sessionId);
    expect(a.permissionRequests).toHaveLength(1);
    expect(markerCount(cwd)).toBe(2);

    await a.agent.request("session/set_mode", { sessionId, modeId: "read-only" });
    a.onPermission = choose("reject_once");
    r.mock.enqueue({ toolCalls: [{ name: "apply_patch", arguments: { patch: updateFilePatch("marker.txt", "run", "changed") } }] }, { text: "ok" });
    await prompt(sessionId, "Edit");
    expect(a.permissionRequests).toHaveLength(2); // read-only asks before an edit
    expect(a.permissionRequests[1]!.toolCall.kind).toBe("edit");
    expect(readFileSync(path.join(cwd, "marker.txt"), "utf8")).toBe("run\nrun\n");

    // The model: the next request goes to the chosen provider with the chosen model.
    const models = await a.agent.request("session/set_config_option", { sessionId, configId: "model", value: "openai-chat/gpt-5.4-mini" });
    expect(models.configOptions.find((o) => o.id === "model")?.currentValue).toBe("openai-chat/gpt-5.4-mini");
    const before = r.mock.requests.length;
    r.mock.enqueue({ text: "from chat" });
    await prompt(sessionId, "Which model?");
    const req = r.mock.requests[before]!;
    expect([req.api, req.body.model]).toEqual(["openai-chat", "gpt-5.4-mini"]);
    await expect(a.agent.request("session/set_mode", { sessionId, modeId: "yolo" })).rejects.toMatchObject({ code: -32602 });
  });

  it("the editor's MCP servers (stdio, HTTP, SSE) are the session's tools", async () => {
    const cwd = workspace();
    const portFile = path.join(mkdtempSync(path.join(os.tmpdir(), "aas-acp-mcp-")), "port");
    const http: ChildProcess = spawn(process.execPath, [FIXTURE, "--http", portFile], { stdio: "ignore" });
    const sse = await startSseMcpServer();
    try {
      let port = "";
      for (let i = 0; i < 200 && !port; i++) {
        try {
          port = readFileSync(portFile, "utf8").trim();
        } catch {
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
      }
      expect(port, "the HTTP MCP server did not start within 10 s").not.toBe("");
      const sessionId = await newSession(cwd, {
        mcpServers: [
          { name: "local tools", command: process.execPath, args: [FIXTURE], env: [] },
          { type: "http", name: "web", url: `http://127.0.0.1:${port}/mcp`, headers: [] },
          { type: "sse", name: "old", url: sse.url, headers: [] },
        ],
      });
      r.mock.enqueue(
        {
          toolCalls: [
            { name: "mcp__local_tools__echo", arguments: { text: "over stdio" } },
            { name: "mcp__web__echo", arguments: { text: "over http" } },
            { name: "mcp__old__echo", arguments: { text: "over sse" } },
          ],
        },
        { text: "all answered" },
      );
      expect((await prompt(sessionId, "Use the tools")).stopReason).toBe("end_turn");
      const offered = (r.mock.requests[0]!.body.tools as Array<{ name: string }>).map((t) => t.name);
      expect(offered).toEqual(expect.arrayContaining(["mcp__local_tools__echo", "mcp__web__echo", "mcp__old__echo"]));
      const calls = ofKind(a.updatesOf(sessionId), "tool_call");
      expect(calls.map((c) => c.title).sort()).toEqual(["local_tools: echo", "old: echo", "web: echo"]);
      for (const [call, said] of [
        [calls.find((c) => c.title === "local_tools: echo")!, "echo: over stdio"],
        [calls.find((c) => c.title === "web: echo")!, "echo: over http"],
        [calls.find((c) => c.title === "old: echo")!, "sse echo: over sse"],
      ] as const) {
        const final = last(a.toolCall(sessionId, call.toolCallId));
        expect(final).toMatchObject({ status: "completed", content: [{ type: "content", content: { type: "text", text: said } }] });
      }
      expect(a.permissionRequests).toHaveLength(0); // echo says it only reads

      // A tool that may act is asked about (the MCP approval as a permission request); the
      // server's own question (an MCP elicitation) goes to the editor as elicitation/create.
      a.onPermission = choose("allow_once");
      a.onElicitation = () => ({ action: "accept", content: { answer: "forty-two" } });
      r.mock.enqueue({ toolCalls: [{ name: "mcp__local_tools__ask", arguments: { question: "The answer?" } }] }, { text: "asked" });
      await prompt(sessionId, "Ask me");
      const ask = last(ofKind(a.updatesOf(sessionId), "tool_call"));
      expect(a.permissionRequests.map((p) => [p.toolCall.toolCallId, p.toolCall.title])).toEqual([[ask.toolCallId, "local_tools: ask"]]);
      expect(a.elicitations).toEqual([expect.objectContaining({ sessionId, mode: "form", message: "The answer?" })]);
      expect(last(a.toolCall(sessionId, ask.toolCallId))).toMatchObject({ status: "completed", content: [{ content: { text: 'elicitation: accept {"answer":"forty-two"}' } }] });
    } finally {
      http.kill();
      await sse.close();
      rmSync(path.dirname(portFile), { recursive: true, force: true });
    }
  });

  it("slash commands: /compact compacts the thread, /review runs a review turn", async () => {
    const sessionId = await newSession(workspace());
    r.mock.enqueue({ text: "first answer" });
    await prompt(sessionId, "Something to compact");
    r.mock.enqueue({ text: "The summary." });
    expect((await prompt(sessionId, "/compact")).stopReason).toBe("end_turn");
    const compaction = ofKind(a.updatesOf(sessionId), "tool_call").find((u) => u.title === "Compact the conversation")!;
    expect(last(a.toolCall(sessionId, compaction.toolCallId))).toMatchObject({ status: "completed" });

    const seen = a.updatesOf(sessionId).length;
    r.mock.enqueue({ text: "Looks good to me." });
    expect((await prompt(sessionId, "/review focus on naming")).stopReason).toBe("end_turn");
    expect(JSON.stringify(last(r.mock.requests).body)).toContain("focus on naming");
    const review = a.updatesOf(sessionId).slice(seen);
    expect(ofKind(review, "tool_call").map((u) => u.title)).toEqual(["Review: focus on naming", "Review finished"]);
    expect(a.agentText(sessionId, seen)).toBe("Looks good to me.");
    await expect(prompt(sessionId, "/review-branch")).rejects.toMatchObject({ code: -32602, message: expect.stringContaining("base branch") });
  });

  it("session/load in a new agent process replays the history before it answers", async () => {
    const cwd = workspace();
    const sessionId = await newSession(cwd);
    r.mock.enqueue({ reasoning: { summary: ["Thinking it over."] }, toolCalls: [{ name: "shell", arguments: { command: MARK_COMMAND } }] }, { text: "It ran." });
    await prompt(sessionId, "Run the marker");
    expect(markerCount(cwd)).toBe(1);
    await a.close();
    expect(acpSchemaProblems(a.wire.slice(checked))).toEqual([]);

    await start();
    const loaded = await a.agent.request("session/load", { sessionId, cwd, mcpServers: [] });
    expect(loaded.modes?.currentModeId).toBe("auto");
    const replay = a.updatesOf(sessionId).filter((u) => u.sessionUpdate !== "available_commands_update");
    expect(replay.map((u) => u.sessionUpdate)).toEqual(["user_message_chunk", "agent_thought_chunk", "tool_call", "agent_message_chunk"]);
    expect(replay[0]).toMatchObject({ content: { type: "text", text: "Run the marker" } });
    expect(replay[1]).toMatchObject({ content: { type: "text", text: "Thinking it over." } });
    expect(replay[2]).toMatchObject({ kind: "execute", status: "completed", rawInput: { command: MARK_COMMAND } });
    expect(JSON.stringify(replay[2])).toContain("ran-1");
    expect(replay[3]).toMatchObject({ content: { type: "text", text: "It ran." } });
    // Every replayed update arrived before the response to session/load.
    const loadId = a.wire.find((m) => m.from === "client" && m.message.method === "session/load")!.message.id;
    const responseAt = a.wire.findIndex((m) => m.from === "agent" && m.message.id === loadId && !m.message.method);
    const replayedAt = a.wire.flatMap((m, i) => (m.from === "agent" && m.message.method === "session/update" && m.message.params.update.sessionUpdate !== "available_commands_update" ? [i] : []));
    const lastUpdateAt = replayedAt.length > 0 ? last(replayedAt) : -1;
    expect(lastUpdateAt).toBeGreaterThan(-1);
    expect(responseAt).toBeGreaterThan(lastUpdateAt);

    // And the session goes on where it was.
    r.mock.enqueue({ text: "continued" });
    expect((await prompt(sessionId, "And now?")).stopReason).toBe("end_turn");
    expect(JSON.stringify(last(r.mock.requests).body)).toContain("It ran.");
    await expect(a.agent.request("session/load", { sessionId: "00000000-0000-0000-0000-000000000000", cwd, mcpServers: [] })).rejects.toMatchObject({ code: -32002 });
  });
});
