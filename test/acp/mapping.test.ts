/**
 * The ACP projection's pure parts: diffs from unified hunks, permission options and the Codex
 * decision each answer becomes (the persisted-rule decision preferred when a request offers it),
 * modes from thread settings, prompts to turn input and slash commands, stop reasons, the
 * editor's MCP servers as Codex config, the command's usage errors, and the schema check itself
 * (which must be able to fail).
 */
import { describe, expect, it } from "vitest";
import { RequestError } from "@agentclientprotocol/sdk/unstable";
import { changeKind, diffContent, hunksOf } from "../../src/acp/diff.js";
import { commandQuestion, fileChangeQuestion, mcpToolQuestion } from "../../src/acp/permissions.js";
import { modeOfSettings, turnSettingsOf } from "../../src/acp/modes.js";
import { PromptError, slashCommandOf, toCodexInput } from "../../src/acp/prompt.js";
import { stopReasonOf } from "../../src/acp/outcome.js";
import { mcpServersConfig } from "../../src/acp/bridge.js";
import { AcpUsageError, parseAcpArgs } from "../../src/acp/command.js";
import { ItemProjector } from "../../src/acp/updates.js";
import { unifiedDiffHunks } from "../../src/tools/diff.js";
import type { Turn } from "../../src/protocol/thread.js";
import { acpSchemaProblems } from "./schema.js";

const base = { threadId: "t", turnId: "u", itemId: "i", startedAtMs: 1, environmentId: null, kind: "command" as const };

describe("diffs", () => {
  it("a unified diff's hunks become old/new text with their context", () => {
    const before = "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\n";
    const after = "a\nB\nc\nd\ne\nf\ng\nh\ni\nj\nK\nl\n";
    const hunks = hunksOf(unifiedDiffHunks(before, after));
    expect(hunks).toEqual([
      { oldText: "a\nb\nc\nd\ne", newText: "a\nB\nc\nd\ne" },
      { oldText: "h\ni\nj\nk\nl", newText: "h\ni\nj\nK\nl" },
    ]);
    expect(hunksOf(unifiedDiffHunks("x", "y"))).toEqual([{ oldText: "x", newText: "y" }]);
  });

  it("adds, deletes and moves", () => {
    const changes = [
      { path: "new.txt", kind: { type: "add" as const }, diff: "hello\n" },
      { path: "/abs/old.txt", kind: { type: "delete" as const }, diff: "bye\n" },
      { path: "a.txt", kind: { type: "update" as const, move_path: "b.txt" }, diff: `${unifiedDiffHunks("1\n", "2\n")}\n\nMoved to: /w/b.txt` },
    ];
    expect(diffContent(changes, "/w")).toEqual([
      { type: "diff", path: "/w/new.txt", oldText: null, newText: "hello\n" },
      { type: "diff", path: "/abs/old.txt", oldText: "bye\n", newText: "" },
      { type: "diff", path: "/w/b.txt", oldText: "1", newText: "2" },
    ]);
    expect(changeKind(changes)).toBe("move");
    expect(changeKind([changes[1]!])).toBe("delete");
    expect(changeKind([changes[0]!])).toBe("edit");
  });
});

describe("permissions", () => {
  it("allow always is acceptForSession, or the execpolicy amendment when the request offers it", () => {
    const plain = commandQuestion({ ...base, command: "npm test", cwd: "/w" });
    expect(plain.options.map((o) => [o.optionId, o.kind])).toEqual([
      ["allow-once", "allow_once"],
      ["allow-always", "allow_always"],
      ["reject-once", "reject_once"],
      ["reject-always", "reject_always"],
    ]);
    expect(["allow-once", "allow-always", "reject-once", "reject-always", null].map((o) => plain.answer(o).decision)).toEqual([
      "accept",
      "acceptForSession",
      "decline",
      "decline",
      "cancel",
    ]);
    const amendment = { acceptWithExecpolicyAmendment: { execpolicy_amendment: ["npm", "test"] } };
    const offered = commandQuestion({ ...base, command: "npm test", cwd: "/w", availableDecisions: ["accept", amendment, "decline", "cancel"] } as any);
    expect(offered.answer("allow-always")).toEqual({ decision: amendment });
    expect(offered.options.find((o) => o.kind === "allow_always")!.name).toContain("`npm test`");
    const proposed = commandQuestion({ ...base, command: "npm test", cwd: "/w", proposedExecpolicyAmendment: ["npm"] } as any);
    expect(proposed.answer("allow-always")).toEqual({ decision: { acceptWithExecpolicyAmendment: { execpolicy_amendment: ["npm"] } } });
    // A request that does not allow a session answer gets no allow_always.
    const once = commandQuestion({ ...base, command: "x", availableDecisions: ["accept", "decline", "cancel"] });
    expect(once.options.map((o) => o.kind)).toEqual(["allow_once", "reject_once", "reject_always"]);
  });

  it("file changes and MCP tool calls", () => {
    const files = fileChangeQuestion({ threadId: "t", turnId: "u", itemId: "i", startedAtMs: 1 }, [{ path: "/w/a", kind: { type: "add" }, diff: "" }]);
    expect(files.answer("allow-always")).toEqual({ decision: "acceptForSession" });
    expect(files.rememberRejection).toBe("files\0/w/a");
    const form = {
      serverName: "gh",
      message: "Allow?",
      _meta: { codex_approval_kind: "mcp_tool_call", tool: "create_issue" },
      requestedSchema: { type: "object", properties: { decision: { type: "string", enum: ["Approve Once", "Approve this Session", "Deny"] } } },
    };
    const mcp = mcpToolQuestion(form, "call-1");
    expect(mcp.toolCall).toMatchObject({ toolCallId: "call-1", title: "gh: create_issue" });
    expect(mcp.answer("allow-once")).toEqual({ action: "accept", content: { decision: "Approve Once" } });
    expect(mcp.answer("allow-always")).toEqual({ action: "accept", content: { decision: "Approve this Session" } });
    expect(mcp.answer("reject-once")).toEqual({ action: "accept", content: { decision: "Deny" } });
    expect(mcp.answer(null)).toEqual({ action: "cancel" });
  });
});

describe("modes", () => {
  it("thread settings read as the preset with the same sandbox; presets set exact settings", () => {
    expect(modeOfSettings("untrusted", { type: "workspaceWrite", writableRoots: [], networkAccess: false, excludeSlashTmp: false, excludeTmpdirEnvVar: false })).toBe("ask");
    expect(modeOfSettings("on-failure", { type: "workspaceWrite", writableRoots: [], networkAccess: false, excludeSlashTmp: false, excludeTmpdirEnvVar: false })).toBe("auto");
    expect(modeOfSettings("untrusted", { type: "readOnly", networkAccess: false })).toBe("read-only");
    expect(modeOfSettings("on-request", { type: "dangerFullAccess" })).toBe("full-access");
    expect(turnSettingsOf("ask", ["/extra"])).toEqual({
      approvalPolicy: "untrusted",
      sandboxPolicy: { type: "workspaceWrite", writableRoots: ["/extra"], networkAccess: false, excludeTmpdirEnvVar: false, excludeSlashTmp: false },
    });
    expect(turnSettingsOf("full-access", [])).toEqual({ approvalPolicy: "never", sandboxPolicy: { type: "dangerFullAccess" } });
  });
});

describe("prompts", () => {
  it("content blocks become turn input", () => {
    expect(
      toCodexInput([
        { type: "text", text: "Look at" },
        { type: "resource_link", uri: "file:///w/src/a.ts", name: "a.ts" },
        { type: "resource", resource: { uri: "file:///w/b.ts", text: "unsaved text" } },
        { type: "image", data: "AAAA", mimeType: "image/png" },
        { type: "resource_link", uri: "https://example.com/x", name: "x" },
      ]),
    ).toEqual([
      { type: "text", text: "Look at", text_elements: [] },
      { type: "mention", name: "a.ts", path: "/w/src/a.ts" },
      { type: "text", text: '<context ref="file:///w/b.ts">\nunsaved text\n</context>', text_elements: [] },
      { type: "image", url: "data:image/png;base64,AAAA" },
      { type: "text", text: "[x](https://example.com/x)", text_elements: [] },
    ]);
    expect(() => toCodexInput([{ type: "audio", data: "", mimeType: "audio/wav" }])).toThrow(PromptError);
    expect(() => toCodexInput([])).toThrow(PromptError);
  });

  it("slash commands", () => {
    expect(slashCommandOf([{ type: "text", text: "/compact" }])).toEqual({ kind: "compact" });
    expect(slashCommandOf([{ type: "text", text: "/review" }])).toEqual({ kind: "review", target: { type: "uncommittedChanges" } });
    expect(slashCommandOf([{ type: "text", text: "/review focus on tests" }])).toEqual({ kind: "review", target: { type: "custom", instructions: "focus on tests" } });
    expect(slashCommandOf([{ type: "text", text: "/review-branch main" }])).toEqual({ kind: "review", target: { type: "baseBranch", branch: "main" } });
    expect(() => slashCommandOf([{ type: "text", text: "/review-commit" }])).toThrow(PromptError);
    expect(slashCommandOf([{ type: "text", text: "/unknown thing" }])).toBeNull();
    expect(slashCommandOf([{ type: "text", text: "not /compact" }])).toBeNull();
  });
});

describe("stop reasons", () => {
  const turn = (status: Turn["status"], stopReason: string | null): Turn => ({
    id: "t",
    rootTurnId: null,
    items: [],
    itemsView: "summary",
    status,
    error: status === "failed" ? { message: "boom", codexErrorInfo: null, additionalDetails: null, misalignment: null } : null,
    startedAt: 1,
    completedAt: 2,
    durationMs: 1,
    stopReason: stopReason as Turn["stopReason"],
  });
  it("how the turn ended", () => {
    expect(stopReasonOf(turn("completed", "finalAnswer"), false)).toBe("end_turn");
    expect(stopReasonOf(turn("failed", "maxTokens"), false)).toBe("max_tokens");
    expect(stopReasonOf(turn("failed", "maxTurns"), false)).toBe("max_turn_requests");
    expect(stopReasonOf(turn("failed", "refused"), false)).toBe("refusal");
    expect(stopReasonOf(turn("interrupted", "interrupted"), false)).toBe("cancelled");
    expect(stopReasonOf(turn("completed", "finalAnswer"), true)).toBe("cancelled");
    expect(() => stopReasonOf(turn("failed", "error"), false)).toThrow(RequestError);
  });
});

describe("the editor's MCP servers and the command line", () => {
  it("become config.mcp_servers with valid names", () => {
    expect(
      mcpServersConfig([
        { name: "my tools", command: "/bin/tool", args: ["-v"], env: [{ name: "K", value: "V" }] },
        { type: "http", name: "web", url: "https://h/mcp", headers: [{ name: "Authorization", value: "Bearer x" }] },
      ]),
    ).toEqual({
      mcp_servers: {
        my_tools: { command: "/bin/tool", args: ["-v"], env: { K: "V" } },
        web: { url: "https://h/mcp", http_headers: { Authorization: "Bearer x" } },
      },
    });
  });

  it("usage errors", () => {
    expect(() => parseAcpArgs(["--mode", "yolo"], {})).toThrow(AcpUsageError);
    expect(() => parseAcpArgs(["--remote", "http://x"], {})).toThrow(/ws:\/\//);
    expect(() => parseAcpArgs(["--remote", "ws://h:1", "--home", "/x"], {})).toThrow(/embedded engine/);
    expect(() => parseAcpArgs(["--listen", "ws://h:1"], {})).toThrow(AcpUsageError);
    expect(parseAcpArgs(["--remote", "ws://h:1"], { APP_SERVER_AUTH_TOKEN: "tok" })).toMatchObject({ remote: "ws://h:1", token: "tok", mode: "auto" });
    expect(parseAcpArgs(["--home", "/h", "--command-env", "A", "--command-env", "B"], {}).engineArgs).toEqual(["--home", "/h", "--command-env", "A", "--command-env", "B"]);
  });
});

describe("updates", () => {
  it("a message's text is sent once: the deltas, then only what they missed", () => {
    const p = new ItemProjector({ cwd: "/w", terminalOutput: false });
    expect(p.agentDelta("m", "Hel")).toHaveLength(1);
    const rest = p.completed({ type: "agentMessage", id: "m", text: "Hello", phase: null, moderation: null, memoryCitation: null, delivery: null, questions: null });
    expect(rest).toEqual([{ sessionUpdate: "agent_message_chunk", content: { type: "text", text: "lo" }, messageId: "m" }]);
    const whole = p.completed({ type: "agentMessage", id: "n", text: "All at once", phase: null, moderation: null, memoryCitation: null, delivery: null, questions: null });
    expect(whole).toEqual([{ sessionUpdate: "agent_message_chunk", content: { type: "text", text: "All at once" }, messageId: "n" }]);
    // Joined mid-message (a load while it streamed): the chunks seen were its end, nothing is repeated.
    p.agentDelta("o", "end.");
    expect(p.completed({ type: "agentMessage", id: "o", text: "The end.", phase: null, moderation: null, memoryCitation: null, delivery: null, questions: null })).toEqual([]);
  });

  it("command output: a display-only terminal for clients that show one, else a text block", () => {
    const item = {
      type: "commandExecution" as const,
      id: "c",
      pluginId: null,
      scriptPath: null,
      command: "ls",
      cwd: "/w",
      processId: null,
      source: "agent" as const,
      status: "inProgress" as const,
      commandActions: [{ type: "listFiles" as const, command: "ls", path: null }],
      aggregatedOutput: null,
      exitCode: null,
      durationMs: null,
    };
    const terminal = new ItemProjector({ cwd: "/w", terminalOutput: true });
    expect(terminal.started(item)[0]).toMatchObject({ sessionUpdate: "tool_call", kind: "search", title: "List .", content: [{ type: "terminal", terminalId: "c" }], _meta: { terminal_info: { terminal_id: "c", cwd: "/w" } } });
    expect(terminal.commandOutput("c", "a\n")).toEqual([{ sessionUpdate: "tool_call_update", toolCallId: "c", _meta: { terminal_output: { terminal_id: "c", data: "a\n" } } }]);
    expect(terminal.completed({ ...item, status: "completed", aggregatedOutput: "a\n", exitCode: 0, durationMs: 3 })[0]).toMatchObject({ status: "completed", _meta: { terminal_exit: { terminal_id: "c", exit_code: 0 } } });
    const plain = new ItemProjector({ cwd: "/w", terminalOutput: false });
    plain.commandOutput("c", "a\n");
    expect(plain.commandOutput("c", "b\n")[0]).toMatchObject({ content: [{ type: "content", content: { type: "text", text: "```sh\na\nb\n```" } }] });
    expect(plain.completed({ ...item, status: "declined", aggregatedOutput: null })[0]).toMatchObject({ status: "failed" });
  });
});

describe("the schema check", () => {
  it("reports a message that breaks the ACP schema", () => {
    const wire = [
      { from: "client" as const, message: { jsonrpc: "2.0", id: 1, method: "session/prompt", params: { sessionId: "s", prompt: [] } } },
      { from: "agent" as const, message: { jsonrpc: "2.0", method: "session/update", params: { sessionId: "s", update: { sessionUpdate: "tool_call", toolCallId: "x" } } } },
      { from: "agent" as const, message: { jsonrpc: "2.0", id: 1, result: { stopReason: "finished" } } },
      { from: "agent" as const, message: { method: "session/update", params: { sessionId: "s", update: { sessionUpdate: "plan", entries: [] } } } },
    ];
    const problems = acpSchemaProblems(wire);
    expect(problems).toHaveLength(3);
    expect(problems[0]).toContain("session/update");
    expect(problems[1]).toContain("session/prompt");
    expect(problems[2]).toContain('"jsonrpc"');
  });
});
