/**
 * Valid params for every thread-scoped method (METHOD_RULES kind "thread"), for the table-driven
 * access tests: the same request with an unknown thread id and with another user's thread id must
 * get the same answer. A thread method added without a sample fails those tests.
 */
import { METHOD_RULES } from "../../src/identity/method-rules.js";
import type { ClientRequestMethod } from "../../src/protocol/methods.js";

const input = [{ type: "text", text: "hello", text_elements: [] }];

export const THREAD_METHOD_SAMPLES: Partial<Record<ClientRequestMethod, (threadId: string) => Record<string, unknown>>> = {
  "thread/read": (threadId) => ({ threadId, includeTurns: true }),
  "thread/archive": (threadId) => ({ threadId }),
  "thread/unarchive": (threadId) => ({ threadId }),
  "thread/name/set": (threadId) => ({ threadId, name: "renamed" }),
  "thread/unsubscribe": (threadId) => ({ threadId }),
  "thread/resume": (threadId) => ({ threadId }),
  "thread/events/list": (threadId) => ({ threadId }),
  "thread/fork": (threadId) => ({ threadId }),
  "thread/rollback": (threadId) => ({ threadId, numTurns: 1 }),
  "thread/compact/start": (threadId) => ({ threadId }),
  "thread/shellCommand": (threadId) => ({ threadId, command: "echo hi" }),
  "review/start": (threadId) => ({ threadId, target: { type: "uncommittedChanges" } }),
  "turn/start": (threadId) => ({ threadId, input }),
  "turn/interrupt": (threadId) => ({ threadId, turnId: "01a00000-0000-7000-8000-000000000000" }),
  "turn/steer": (threadId) => ({ threadId, expectedTurnId: "01a00000-0000-7000-8000-000000000000", input }),
  "thread/turns/list": (threadId) => ({ threadId }),
  "thread/items/list": (threadId) => ({ threadId }),
  "thread/goal/get": (threadId) => ({ threadId }),
  "thread/backgroundTerminals/list": (threadId) => ({ threadId }),
  "mcpServer/tool/call": (threadId) => ({ threadId, server: "none", tool: "none" }),
  // A user that does not exist: the answer for an unknown thread must not depend on who is named.
  "thread/share": (threadId) => ({ threadId, user: "nobody-at-all", access: "read" }),
};

/** Every method whose rule acts on a thread, in the table's order. */
export const THREAD_METHODS = (Object.keys(METHOD_RULES) as ClientRequestMethod[]).filter((m) => METHOD_RULES[m].kind === "thread");

/** The thread methods a read share allows (need "read"); resume is read without overrides. */
export const READ_METHODS = THREAD_METHODS.filter((m) => METHOD_RULES[m].kind === "thread" && (METHOD_RULES[m] as { need: unknown }).need === "read");
