/**
 * repairToolPairs (DESIGN.md §3.3): a pure function that, before each model call, gives every
 * assistant tool call exactly one result (a synthetic "not executed" one when it has none), in call
 * order, directly after its assistant message, and drops results that have no call.
 */
import { describe, expect, it } from "vitest";
import type { AssistantMessage, Message, ToolCallBlock, ToolResultMessage, UserMessage } from "../src/agent/messages.js";
import { NOT_EXECUTED, repairToolPairs, syntheticResult } from "../src/agent/repair.js";

const user = (text: string): UserMessage => ({ role: "user", content: [{ type: "text", text }] });
const call = (id: string, name = "shell", args = "{}"): ToolCallBlock => ({ type: "toolCall", id, name, arguments: args });
const assistant = (...calls: ToolCallBlock[]): AssistantMessage => ({ role: "assistant", content: [{ type: "text", text: "working" }, ...calls] });
const result = (id: string, text = `out ${id}`, name = "shell"): ToolResultMessage => ({
  role: "toolResult",
  toolCallId: id,
  toolName: name,
  content: [{ type: "text", text }],
  isError: false,
});
const notExecuted = (id: string, name = "shell"): ToolResultMessage => ({
  role: "toolResult",
  toolCallId: id,
  toolName: name,
  content: [{ type: "text", text: NOT_EXECUTED }],
  isError: true,
});

describe("repairToolPairs", () => {
  it("leaves a well-formed history unchanged", () => {
    const h: Message[] = [
      user("hi"),
      assistant(call("a"), call("b", "read_file")),
      result("a"),
      result("b", "file", "read_file"),
      { role: "assistant", content: [{ type: "text", text: "done" }] },
      user("more"),
      { role: "developer", content: [{ type: "text", text: "env" }] },
    ];
    expect(repairToolPairs(h)).toEqual(h);
  });

  it("returns [] for an empty history", () => {
    expect(repairToolPairs([])).toEqual([]);
  });

  it("adds a synthetic 'not executed' result for a call without one, right after its assistant message", () => {
    const h: Message[] = [user("hi"), assistant(call("a", "read_file")), user("next")];
    expect(repairToolPairs(h)).toEqual([user("hi"), assistant(call("a", "read_file")), notExecuted("a", "read_file"), user("next")]);
  });

  it("adds a synthetic result for a call at the very end of the history", () => {
    const h: Message[] = [user("hi"), assistant(call("a"))];
    expect(repairToolPairs(h)).toEqual([user("hi"), assistant(call("a")), notExecuted("a")]);
  });

  it("fills only the missing results of a partly answered message, keeping call order", () => {
    const h: Message[] = [user("hi"), assistant(call("a"), call("b"), call("c")), result("b")];
    expect(repairToolPairs(h)).toEqual([user("hi"), assistant(call("a"), call("b"), call("c")), notExecuted("a"), result("b"), notExecuted("c")]);
  });

  it("drops an orphan result (no call at all)", () => {
    const h: Message[] = [result("ghost"), user("hi"), result("ghost2"), assistant(call("a")), result("a"), result("stranger")];
    expect(repairToolPairs(h)).toEqual([user("hi"), assistant(call("a")), result("a")]);
  });

  it("drops a result after an assistant message without tool calls", () => {
    const text: AssistantMessage = { role: "assistant", content: [{ type: "text", text: "hello" }] };
    expect(repairToolPairs([user("hi"), text, result("x")])).toEqual([user("hi"), text]);
  });

  it("treats a result separated from its call by another message as an orphan (the call gets a synthetic result)", () => {
    const h: Message[] = [user("hi"), assistant(call("a")), user("steer"), result("a")];
    expect(repairToolPairs(h)).toEqual([user("hi"), assistant(call("a")), notExecuted("a"), user("steer")]);
  });

  it("keeps exactly one result per call when results are duplicated (the first one wins)", () => {
    const h: Message[] = [user("hi"), assistant(call("a"), call("b")), result("a", "first"), result("b"), result("a", "second"), result("b", "again")];
    const out = repairToolPairs(h);
    expect(out).toEqual([user("hi"), assistant(call("a"), call("b")), result("a", "first"), result("b")]);
  });

  it("puts results that arrived out of order back into call order", () => {
    const h: Message[] = [user("hi"), assistant(call("a"), call("b"), call("c")), result("c"), result("a"), result("b")];
    expect(repairToolPairs(h)).toEqual([user("hi"), assistant(call("a"), call("b"), call("c")), result("a"), result("b"), result("c")]);
  });

  it("repairs each assistant message of a longer history independently", () => {
    const h: Message[] = [
      user("1"),
      assistant(call("a")),
      result("a"),
      assistant(call("b"), call("c")),
      result("c"),
      result("zzz"),
      user("2"),
      assistant(call("d")),
    ];
    expect(repairToolPairs(h)).toEqual([
      user("1"),
      assistant(call("a")),
      result("a"),
      assistant(call("b"), call("c")),
      notExecuted("b"),
      result("c"),
      user("2"),
      assistant(call("d")),
      notExecuted("d"),
    ]);
  });

  it("does not mutate its input, is deterministic and idempotent", () => {
    const h: Message[] = [result("o"), user("hi"), assistant(call("a"), call("b")), result("b"), result("b"), user("x")];
    const before = structuredClone(h);
    const once = repairToolPairs(h);
    expect(h).toEqual(before);
    expect(JSON.stringify(repairToolPairs(h))).toBe(JSON.stringify(once));
    expect(repairToolPairs(once)).toEqual(once);
  });

  it("syntheticResult pairs by id and name, is an error, and takes a custom text", () => {
    expect(syntheticResult(call("q", "grep"))).toEqual(notExecuted("q", "grep"));
    expect(syntheticResult(call("q", "grep"), "custom")).toEqual({
      role: "toolResult",
      toolCallId: "q",
      toolName: "grep",
      content: [{ type: "text", text: "custom" }],
      isError: true,
    });
  });
});
