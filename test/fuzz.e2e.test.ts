/**
 * A storm of 10 000 malformed or hostile frames over 8 WebSocket connections against the real
 * server. Frames are generated from a seeded PRNG, and each carries its own expectation (the table
 * of which frames deserve which JSON-RPC error): every frame that deserves an error gets exactly
 * one, with the right code (matched by id where it has one; id-null errors are counted); frames that
 * deserve no answer (notifications, responses) get none. Meanwhile a clean connection keeps
 * working, the process stays healthy, nothing is logged as a server error and no error leaks a
 * stack trace.
 */
import pino from "pino";
import WebSocket from "ws";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { z } from "zod";
import { clientRequests } from "../src/protocol/methods.js";
import { TestClient } from "./support/client.js";
import { BACKENDS } from "./support/db.js";
import { startTestServer, type TestServer } from "./support/server.js";

const SEED = 0x5eed_c0de;
const CONNECTIONS = 8;
/** Connections 0 and 1 start without the handshake; 1 completes it after this many rounds. */
const FRESH = new Set([0, 1]);
const LATE_INIT = { connection: 1, afterRound: 12 };
const ROUNDS = 25;
const FRAMES_PER_ROUND = 50; // 8 × 25 × 50 = 10 000 frames
const MiB = 1024 * 1024;

const PARSE = -32700;
const INVALID = -32600;
const NOT_FOUND = -32601;
const PARAMS = -32602;

type Id = string | number;
/** What one message deserves: an error with this code and id (null: unattributable), or a result. */
type Expect = { id: Id | null; code: number } | { id: Id; result: true };
type State = "fresh" | "ready";
type Outcome = "ok" | "params" | "notFound" | "invalid";

/** A message as a JS value (so it can also go into a batch). */
interface Element {
  category: string;
  value: unknown;
  expect: Expect[];
}
/** One frame on the wire. */
interface Frame {
  category: string;
  data: string | Buffer;
  binary?: boolean;
  expect: Expect[];
}

// ---- deterministic randomness ----

class Rng {
  constructor(private s: number) {}
  /** mulberry32 */
  next(): number {
    this.s = (this.s + 0x6d2b79f5) | 0;
    let t = Math.imul(this.s ^ (this.s >>> 15), 1 | this.s);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }
  bytes(n: number): Buffer {
    const b = Buffer.alloc(n);
    for (let i = 0; i < n; i++) b[i] = this.int(256);
    return b;
  }
  weighted<T>(table: ReadonlyArray<readonly [number, T]>): T {
    let r = this.next() * table.reduce((s, [w]) => s + w, 0);
    for (const [w, v] of table) if ((r -= w) < 0) return v;
    return table.at(-1)![1];
  }
}

// ---- the expectation table ----

const KNOWN = new Set(Object.keys(clientRequests));
const accepts = (method: string, params: unknown) =>
  (clientRequests[method as keyof typeof clientRequests].params as z.ZodType).safeParse(params ?? {}).success;

const text = (t: string) => ({ type: "text", text: t, text_elements: [] });
const clientInfo = { name: "fuzz", title: null, version: "0.0.0" };

/** Requests whose params are valid; on a fresh connection every one of them is "Not initialized". */
const VALID_ANYWHERE: ReadonlyArray<[string, unknown]> = [
  ["thread/list", { limit: 1 }],
  ["thread/list", null],
  ["thread/list", undefined],
  // No U+0000 or unpaired surrogate in params: the server refuses both with -32602 before the
  // schema, as text Postgres cannot store (hardening.e2e). Ids may hold them.
  ["thread/list", { searchTerm: "💥'\"%_\\😀", limit: 1, sortKey: "updated_at", sortDirection: "asc" }],
  ["model/list", {}],
  ["thread/loaded/list", { limit: 5 }],
];
/** Valid and with effects: sent only before the handshake, where they must be refused. */
const VALID_WITH_EFFECTS: ReadonlyArray<[string, unknown]> = [
  ["thread/start", {}],
  ["thread/start", { cwd: "/fuzz", ephemeral: true }],
  ["turn/start", { threadId: "t", input: [text("hello")] }],
  ["command/exec", { command: ["true"] }],
  ["thread/archive", { threadId: "t" }],
];
/** Known methods with params their schema rejects (checked while generating). */
const INVALID_PARAMS: ReadonlyArray<[string, unknown]> = [
  ["thread/list", { limit: 0 }],
  ["thread/list", { limit: "10" }],
  ["thread/list", { limit: 101 }],
  ["thread/list", { limit: 1.5 }],
  ["thread/list", { sortKey: "name" }],
  ["thread/list", { sortDirection: "up" }],
  ["thread/list", { archived: "yes" }],
  ["thread/list", { cwd: 5 }],
  ["thread/list", { cwd: [[1]] }],
  ["thread/list", { modelProviders: "openai" }],
  ["thread/list", { includedThreadIds: Array.from({ length: 101 }, (_, i) => `t${i}`) }],
  ["thread/list", []],
  ["thread/list", [1, 2, 3]],
  ["thread/read", {}],
  ["thread/read", { threadId: "" }],
  ["thread/read", { threadId: 1 }],
  ["thread/read", { threadId: "t", includeTurns: "yes" }],
  ["thread/start", { cwd: 5 }],
  ["thread/start", { approvalPolicy: "sometimes" }],
  ["thread/start", { sandbox: "none" }],
  ["thread/start", { config: "x" }],
  ["thread/start", { config: { a: JSON.parse('{"a":'.repeat(80) + "1" + "}".repeat(80)) } }],
  ["thread/start", { dynamicTools: [{ name: "bad name!", description: "", inputSchema: {} }] }],
  ["thread/start", { ephemeral: "true" }],
  ["thread/start", []],
  ["thread/archive", {}],
  ["thread/unarchive", { threadId: null }],
  ["thread/name/set", { threadId: "t" }],
  ["thread/name/set", { threadId: "t", name: 5 }],
  ["thread/name/set", { threadId: "t", name: "n".repeat(1001) }],
  ["thread/loaded/list", { limit: 0 }],
  ["thread/unsubscribe", {}],
  ["thread/resume", {}],
  ["thread/events/list", {}],
  ["thread/fork", {}],
  ["thread/rollback", {}],
  ["thread/compact/start", {}],
  ["turn/start", {}],
  ["turn/start", { threadId: "t", input: [] }],
  ["turn/start", { threadId: "t", input: "hello" }],
  ["turn/start", { threadId: "t", input: [{ type: "bogus" }] }],
  ["turn/start", { threadId: "t", input: [text("x")], effort: 5 }],
  ["turn/interrupt", { threadId: "t" }],
  ["turn/steer", { threadId: "t", input: [] }],
  ["model/list", { limit: 0 }],
  ["model/list", { includeHidden: "yes" }],
  ["command/exec", { command: [] }],
  ["command/exec", { command: "ls" }],
  ["command/exec", { command: [1] }],
  ["command/exec", { command: ["true"], timeoutMs: -1 }],
  ["command/exec", [["true"]]],
];
const INVALID_INITIALIZE: ReadonlyArray<unknown> = [{}, { clientInfo: 5 }, { clientInfo: { name: 5 } }, [], { capabilities: {} }];
const UNKNOWN_METHODS = [
  "__proto__",
  "constructor",
  "toString",
  "hasOwnProperty",
  "valueOf",
  "prototype",
  "",
  " ",
  "thread",
  "thread/",
  "thread//list",
  "Thread/List",
  "THREAD/LIST",
  " thread/list",
  "thread/list ",
  "thread/list\u0000",
  "thread/list\n",
  "rpc.discover",
  "initialized", // a client notification, not a request
  "thread/started", // a server notification
  "item/tool/call", // a server request
  "💥",
  "\ud800",
  "../../etc/passwd",
  "$(reboot)",
] as const;

/** Nested JSON text built directly: JSON.stringify of a 10 000-deep value would overflow the stack. */
const deepArray = (d: number, inner = "") => "[".repeat(d) + inner + "]".repeat(d);
const deepObject = (d: number) => '{"a":'.repeat(d) + "1" + "}".repeat(d);

function isParseError(text: string): boolean {
  try {
    JSON.parse(text);
    return false;
  } catch {
    return true;
  }
}

/** Generates the frames of one connection; what they deserve depends on its handshake state. */
class Generator {
  private n = 0;
  private usedSpecialIds = new Set<string>();
  deepCount = 0;
  megabyteCount = 0;

  constructor(
    private readonly rng: Rng,
    public state: State,
    private readonly conn: number,
  ) {}

  /** A fresh, valid id, unique on this connection (numbers and strings of many shapes). */
  id(): Id {
    const n = ++this.n;
    switch (this.rng.int(8)) {
      case 0:
        return n;
      case 1:
        return -n;
      case 2:
        return Number.MAX_SAFE_INTEGER - n;
      case 3:
        return `${n}:ünïcødé 😀 "quoted" \\ \u0000 \ud800`;
      case 4:
        return `${n}`; // the string "7" is not the number 7
      case 5: {
        for (const special of ["", " ", "0", "null", "__proto__"])
          if (!this.usedSpecialIds.has(special)) {
            this.usedSpecialIds.add(special);
            return special;
          }
        return `s${n}`;
      }
      case 6:
        if (!this.usedSpecialIds.has("zero")) {
          this.usedSpecialIds.add("zero");
          return 0;
        }
        return `z${n}`;
      default:
        return `s${n}-${"x".repeat(this.rng.int(64))}`;
    }
  }

  private jsonrpc(): { jsonrpc?: string } {
    return this.rng.int(3) === 0 ? {} : { jsonrpc: "2.0" };
  }

  /** What a well-formed request deserves on this connection right now. */
  private deserves(id: Id, method: string, outcome: Outcome): Expect {
    if (this.state === "fresh") {
      if (method !== "initialize") return { id, code: INVALID }; // Not initialized
      if (outcome !== "params") throw new Error("a valid initialize would change the connection's state");
      return { id, code: PARAMS };
    }
    if (method === "initialize") return { id, code: INVALID }; // Already initialized
    if (outcome === "ok") return { id, result: true };
    return { id, code: { params: PARAMS, notFound: NOT_FOUND, invalid: INVALID }[outcome] };
  }

  request(category: string, method: string, params: unknown, outcome: Outcome, id: Id = this.id()): Element {
    if (KNOWN.has(method) && accepts(method, params) !== (outcome !== "params"))
      throw new Error(`fuzz table error: ${method} ${JSON.stringify(params)?.slice(0, 200)} is not ${outcome}`);
    const value = { ...this.jsonrpc(), id, method, ...(params === undefined ? {} : { params }) };
    return { category, value, expect: [this.deserves(id, method, outcome)] };
  }

  // ---- single messages (also used as batch elements) ----

  element(): Element {
    const kind = this.rng.weighted([
      [5, "ok"],
      [12, "invalidParams"],
      [10, "unknownMethod"],
      [2, "unknownThread"],
      [3, "initialize"],
      [8, "badId"],
      [5, "weirdId"],
      [10, "wrongTypes"],
      [8, "notification"],
      [6, "response"],
      [3, "nonObject"],
    ] as const);
    const rng = this.rng;
    switch (kind) {
      case "ok": {
        const pool = this.state === "fresh" ? [...VALID_ANYWHERE, ...VALID_WITH_EFFECTS] : VALID_ANYWHERE;
        const [method, params] = rng.pick(pool);
        return this.request("request before initialize / valid request", method, params, "ok");
      }
      case "invalidParams": {
        const [method, params] = rng.pick(INVALID_PARAMS);
        return this.request("invalid params", method, params, "params");
      }
      case "unknownMethod":
        return this.request("unknown method", rng.pick(UNKNOWN_METHODS), rng.pick([{}, undefined, [], { threadId: "t" }]), "notFound");
      case "unknownThread":
        return this.request("unknown thread", "thread/read", { threadId: `missing-${this.conn}-${this.n}` }, "invalid");
      case "initialize":
        // Ready: a duplicate initialize (refused whatever its params). Fresh: only invalid ones.
        return this.state === "ready"
          ? this.request("duplicate initialize", "initialize", rng.pick([{ clientInfo }, { clientInfo, capabilities: null }]), "ok")
          : this.request("invalid initialize", "initialize", rng.pick(INVALID_INITIALIZE), "params");
      case "badId": {
        // Numbers of any size and null are ids JSON-RPC allows (see weirdId); these are not.
        const id = rng.pick<unknown>([{}, [], [1], true, false, { id: 1 }]);
        const method = rng.pick(["thread/list", "initialize", "no/such/method", "command/exec"]);
        const value = rng.int(5) === 0 ? { id } : { ...this.jsonrpc(), id, method, params: {} };
        return { category: "invalid id", value, expect: [{ id: null, code: INVALID }] };
      }
      case "weirdId": {
        const n = ++this.n;
        // Fractions and integers beyond 2^53 (echoed as their exact text) included.
        const id = rng.pick<Id>([-n, Number.MAX_SAFE_INTEGER - n, n + 0.5, -n - 0.25, 2 ** 60 + n * 4096, -(2 ** 60) - n * 4096, `${n}${"é".repeat(10_000)}`, `\u0000${n}`, `${n}\ud83d`, `{"id":${n}}`, `${n}\n\t`]);
        return this.request("unusual valid id", "thread/list", { limit: 1 }, "ok", id);
      }
      case "wrongTypes": {
        const id = this.id();
        switch (rng.int(8)) {
          case 0: {
            const method = rng.pick(["thread/list", "initialize", "command/exec", "no/such"]);
            const value = { ...this.jsonrpc(), id, method, params: rng.pick<unknown>(["str", "", 5, 0, true, false]) };
            return { category: "params not structured", value, expect: [{ id, code: INVALID }] };
          }
          case 1: {
            const value = { ...this.jsonrpc(), id, method: rng.pick<unknown>([5, null, {}, [], true, ["thread/list"], { name: "thread/list" }]) };
            return { category: "method not a string", value, expect: [{ id, code: INVALID }] };
          }
          case 2: {
            const value = { ...this.jsonrpc(), method: rng.pick<unknown>([5, null, {}, [], false]), params: {} };
            return { category: "method not a string", value, expect: [{ id: null, code: INVALID }] };
          }
          case 3: {
            const value = { jsonrpc: rng.pick<unknown>(["1.0", 2, null, "", "2.0 ", "2", ["2.0"]]), id, method: "thread/list" };
            return { category: "wrong jsonrpc", value, expect: [{ id, code: INVALID }] };
          }
          case 4: {
            const value = { jsonrpc: rng.pick<unknown>(["1.0", 2, null]), method: "initialized" };
            return { category: "wrong jsonrpc", value, expect: [{ id: null, code: INVALID }] };
          }
          case 5:
            return { category: "no method", value: { ...this.jsonrpc(), id }, expect: [{ id, code: INVALID }] };
          case 6:
            return { category: "no method", value: rng.pick<unknown>([{}, { params: {} }, { jsonrpc: "2.0" }, { foo: 1 }]), expect: [{ id: null, code: INVALID }] };
          default: {
            // A request that also carries `result` is still a request.
            const e = this.request("request with a result member", "thread/list", undefined, "ok", id);
            (e.value as Record<string, unknown>).result = 1;
            return e;
          }
        }
      }
      case "notification": {
        const method = rng.pick<[string, unknown]>([
          ["initialized", "x"],
          ["initialized", 5],
          ["initialized", [1, 2]],
          ["initialized", { bad: true }],
          ["initialized", null],
          ["no/such/notification", {}],
          // Requests sent as notifications are never executed (and never answered).
          ["thread/start", {}],
          ["command/exec", { command: ["true"] }],
          ["turn/start", { threadId: "t", input: [text("x")] }],
          ["initialize", { clientInfo }],
          ["__proto__", {}],
          ["", "x"],
        ]);
        const value = { ...this.jsonrpc(), method: method[0], ...(method[1] === undefined ? {} : { params: method[1] }) };
        return { category: "notification", value, expect: [] };
      }
      case "response": {
        const value = rng.pick<unknown>([
          { id: 900_000 + this.n, result: {} },
          { jsonrpc: "2.0", id: `never-${this.n}`, result: null },
          { id: 1, error: { code: -32000, message: "client-side failure" } },
          { id: null, error: { code: PARSE, message: "Parse error" } },
          { id: null, error: "not an object" },
          { result: 1 },
          { error: { code: 1 } },
          { id: {}, result: 1 },
          { id: 1.5, error: { code: 1, message: "x" } },
          { jsonrpc: "1.0", id: 3, result: 1 },
          { id: 2, result: 1, error: { code: 1, message: "both" } },
        ]);
        return { category: "response to a request never sent", value, expect: [] };
      }
      case "nonObject":
        return { category: "not an object", value: rng.pick<unknown>([1, 0, -1, 1.5, "str", "", true, false, null]), expect: [{ id: null, code: INVALID }] };
    }
  }

  // ---- frames ----

  frame(round: number, index: number): Frame {
    if (index === 0 && round % 3 === 0) return this.deep();
    if (index === 1 && round % 6 === 1) return this.megabyte();
    const kind = this.rng.weighted([
      [80, "element"],
      [10, "parse"],
      [3, "binary"],
      [7, "batch"],
    ] as const);
    switch (kind) {
      case "element": {
        const e = this.element();
        return { category: e.category, data: JSON.stringify(e.value), expect: e.expect };
      }
      case "parse":
        return this.parseError();
      case "binary":
        return this.binaryFrame();
      case "batch":
        return this.batch();
    }
  }

  private parseError(): Frame {
    const rng = this.rng;
    let data: string;
    switch (rng.int(3)) {
      case 0:
        data = rng.pick([
          "",
          " ",
          "{",
          "}",
          "[",
          "{]",
          "NaN",
          "undefined",
          "Infinity",
          "-",
          "01",
          "1.",
          ".5",
          "1e",
          "tru",
          "'x'",
          "{'id':1}",
          '{"id":1,}',
          "[1,]",
          '{"id":1 "method":"x"}',
          '{"id":1,"method":"thread/list"',
          '{"a":"\\x"}',
          '"\\ud800',
          "\u0000",
          "\ufeff{}",
          "/* comment */ {}",
          '{"a":1}{"b":2}',
          "[][]",
          '{"method":"thread/list","id":1}\n{"method":"thread/list","id":2}',
        ]);
        break;
      case 1: {
        // A valid message cut short.
        const whole = JSON.stringify({ jsonrpc: "2.0", id: this.id(), method: "thread/list", params: { limit: 1, searchTerm: "abc" } });
        data = whole.slice(0, 1 + rng.int(whole.length - 1));
        break;
      }
      default: {
        const alphabet = '{}[]":,\\ 0123456789abcdeftrunl.-+eE\u0000\t\né😀';
        data = Array.from({ length: 1 + rng.int(200) }, () => rng.pick([...alphabet])).join("");
      }
    }
    if (!isParseError(data)) data = `{${data}`;
    expect(isParseError(data), data).toBe(true);
    return { category: "invalid JSON", data, expect: [{ id: null, code: PARSE }] };
  }

  private binaryFrame(): Frame {
    const rng = this.rng;
    const data = rng.pick([
      () => rng.bytes(1 + rng.int(4096)),
      () => Buffer.from(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "thread/list", params: {} })),
      () => Buffer.alloc(0),
    ])();
    return { category: "binary frame", data, binary: true, expect: [{ id: null, code: INVALID }] };
  }

  private batch(): Frame {
    const rng = this.rng;
    const variant = rng.weighted([
      [1, "empty"],
      [5, "mixed"],
      [1, "silent"],
      [1, "nested"],
    ] as const);
    if (variant === "empty") return { category: "empty batch", data: "[]", expect: [{ id: null, code: INVALID }] };
    const elements: Element[] = [];
    if (variant === "mixed") {
      for (let i = 1 + rng.int(12); i > 0; i--) {
        if (rng.int(8) === 0) {
          // A batch inside a batch: one invalid element, its content never looked at.
          elements.push({ category: "nested batch", value: rng.int(2) ? [] : [this.element().value], expect: [{ id: null, code: INVALID }] });
        } else elements.push(this.element());
      }
    } else if (variant === "silent") {
      // Only notifications and responses: no answer at all, not even an empty array.
      while (elements.length < 1 + rng.int(5)) {
        const e = this.element();
        if (e.expect.length === 0) elements.push(e);
      }
    } else {
      // [[]] or [[message]]: the inner array is one invalid element; its content is never handled.
      elements.push({ category: "nested batch", value: rng.int(2) ? [] : [this.element().value], expect: [{ id: null, code: INVALID }] });
    }
    return { category: `batch (${variant})`, data: JSON.stringify(elements.map((e) => e.value)), expect: elements.flatMap((e) => e.expect) };
  }

  /** 10 000+ levels of nesting, in every position of a message. */
  private deep(): Frame {
    const d = 10_000 + this.rng.int(10_000);
    const variant = (this.deepCount++ + this.conn) % 10;
    const id = this.id();
    const idText = JSON.stringify(id);
    const ready = this.state === "ready";
    const category = "deep nesting";
    switch (variant) {
      case 0:
        return { category, data: deepArray(d), expect: [{ id: null, code: INVALID }] }; // a batch of one nested array
      case 1:
        return { category, data: deepObject(d), expect: [{ id: null, code: INVALID }] };
      case 2:
        return { category, data: `{"id":${idText},"method":"fuzz/deep","params":${deepObject(d)}}`, expect: [{ id, code: ready ? NOT_FOUND : INVALID }] };
      case 3:
        return { category, data: `{"id":${idText},"method":"thread/start","params":{"config":${deepObject(d)}}}`, expect: [{ id, code: ready ? PARAMS : INVALID }] };
      case 4:
        return { category, data: `{"id":${deepArray(d)},"method":"thread/list"}`, expect: [{ id: null, code: INVALID }] };
      case 5:
        return { category, data: `{"id":${idText},"method":${deepArray(d)}}`, expect: [{ id, code: INVALID }] };
      case 6:
        return { category, data: `{"id":null,"error":${deepObject(d)}}`, expect: [] };
      case 7:
        return { category, data: `{"method":"initialized","params":${deepObject(d)}}`, expect: [] };
      case 8:
        return {
          category,
          data: `[${deepArray(d)},{"id":${idText},"method":"thread/list","params":{"limit":1}}]`,
          expect: [{ id: null, code: INVALID }, ready ? { id, result: true } : { id, code: INVALID }],
        };
      default:
        return { category, data: `{"id":${idText},"method":"thread/list","params":${deepArray(d)}}`, expect: [{ id, code: ready ? PARAMS : INVALID }] };
    }
  }

  /** Strings of about a megabyte (1–4 MiB of UTF-8), well under the 16 MiB frame limit. */
  private megabyte(): Frame {
    const ch = this.rng.pick(["x", "é", "😀", "\\"]);
    const big = ch.repeat(Math.floor(MiB / ch.length));
    const variant = (this.megabyteCount++ + this.conn) % 7;
    const category = "megabyte string";
    const element = (e: Element): Frame => ({ category, data: JSON.stringify(e.value), expect: e.expect });
    switch (variant) {
      case 0:
        return element(this.request(category, `m/${big}`, {}, "notFound"));
      case 1:
        return element(this.request(category, "thread/list", { limit: big }, "params"));
      case 2:
        return element(this.request(category, "thread/list", { limit: 1 }, "ok", `${++this.n}:${big}`));
      case 3:
        return { category, data: JSON.stringify({ method: "initialized", params: { big } }), expect: [] };
      case 4: {
        const data = `{"id":1,"method":"thread/list","params":{"searchTerm":"${big}`; // unterminated
        expect(isParseError(data)).toBe(true);
        return { category, data, expect: [{ id: null, code: PARSE }] };
      }
      case 5: {
        const id = this.id();
        return { category, data: JSON.stringify({ jsonrpc: big, id, method: "thread/list" }), expect: [{ id, code: INVALID }] };
      }
      default:
        return element(this.request(category, "thread/list", { searchTerm: big, limit: 1 }, "ok"));
    }
  }
}

// ---- the receiving side ----

const key = (id: Id) => `${typeof id}:${id}`;
const STACK_TRACE = /\n\s+at\s|\sat\s+\S+\s+\([^)]*:\d+:\d+\)|\.(?:ts|js|mjs|cjs):\d+:\d+/;

/** One fuzzing connection: what it is owed, what it got, and what went wrong. */
class FuzzConnection {
  readonly owed = new Map<string, Expect>();
  readonly nullErrorsOwed = new Map<number, number>();
  readonly nullErrorsGot = new Map<number, number>();
  readonly problems: string[] = [];
  framesSent = 0;
  answers = 0;
  closed = false;
  /** Set when any connection gave up waiting: the others stop waiting too (fail fast). */
  static gaveUp = false;
  private static readonly all = new Set<FuzzConnection>();
  private wake: (() => void) | null = null;

  private constructor(readonly ws: WebSocket) {
    FuzzConnection.all.add(this);
    ws.on("message", (data, isBinary) => this.receive(data.toString(), isBinary));
    ws.on("close", (code) => {
      this.closed = true;
      this.problems.push(`connection closed by the server (${code})`);
      this.wake?.();
    });
  }

  static async open(url: string): Promise<FuzzConnection> {
    const ws = new WebSocket(url, { perMessageDeflate: false });
    await new Promise<void>((resolve, reject) => {
      ws.once("open", () => resolve());
      ws.once("error", reject);
    });
    return new FuzzConnection(ws);
  }

  private receive(raw: string, isBinary: boolean): void {
    if (isBinary) this.problems.push("binary frame from the server");
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw);
    } catch {
      this.problems.push(`unparseable frame: ${raw.slice(0, 200)}`);
      return;
    }
    for (const m of (Array.isArray(parsed) ? parsed : [parsed]) as Array<Record<string, any>>) {
      this.answers++;
      const show = () => JSON.stringify(m).slice(0, 300);
      if (m?.jsonrpc !== "2.0") this.problems.push(`answer without jsonrpc 2.0: ${show()}`);
      if ("method" in m) {
        this.problems.push(`unexpected notification or request: ${show()}`);
        continue;
      }
      if (m.error) {
        if (STACK_TRACE.test(JSON.stringify(m.error))) this.problems.push(`stack trace in an error: ${show()}`);
        if (typeof m.error.message !== "string" || !Number.isInteger(m.error.code)) this.problems.push(`malformed error: ${show()}`);
      }
      if (m.id === null && m.error) {
        this.nullErrorsGot.set(m.error.code, (this.nullErrorsGot.get(m.error.code) ?? 0) + 1);
        continue;
      }
      if (typeof m.id !== "string" && typeof m.id !== "number") {
        this.problems.push(`answer with an invalid id: ${show()}`);
        continue;
      }
      const owed = this.owed.get(key(m.id));
      if (!owed) {
        this.problems.push(`answer nobody asked for (or a second one): ${show()}`);
        continue;
      }
      this.owed.delete(key(m.id));
      if ("result" in owed) {
        if (m.error || !("result" in m)) this.problems.push(`expected a result for ${show()}`);
      } else if (m.error?.code !== owed.code) this.problems.push(`expected error ${owed.code}, got ${show()}`);
    }
    this.wake?.();
  }

  send(frame: Frame): void {
    for (const e of frame.expect) {
      if (e.id === null) {
        if ("code" in e) this.nullErrorsOwed.set(e.code, (this.nullErrorsOwed.get(e.code) ?? 0) + 1);
        continue;
      }
      if (this.owed.has(key(e.id))) throw new Error(`duplicate id in the fuzz plan: ${String(e.id).slice(0, 50)}`);
      this.owed.set(key(e.id), e);
    }
    this.framesSent++;
    this.ws.send(frame.data, { binary: frame.binary ?? false });
  }

  private get settled(): boolean {
    if (this.owed.size > 0) return false;
    for (const [code, n] of this.nullErrorsOwed) if ((this.nullErrorsGot.get(code) ?? 0) < n) return false;
    return true;
  }

  /** Resolves once everything sent so far has been answered (or the connection closed). */
  async answered(): Promise<void> {
    const limit = setTimeout(() => {
      this.problems.push(
        `still owed ${this.owed.size} answers, e.g. ${JSON.stringify([...this.owed.values()].slice(0, 5)).slice(0, 500)}; ` +
          `id-null errors owed ${JSON.stringify([...this.nullErrorsOwed])}, got ${JSON.stringify([...this.nullErrorsGot])}`,
      );
      FuzzConnection.gaveUp = true;
      for (const c of FuzzConnection.all) c.wake?.();
    }, 20_000);
    try {
      while (!this.settled && !this.closed && !FuzzConnection.gaveUp) await new Promise<void>((resolve) => (this.wake = resolve));
    } finally {
      clearTimeout(limit);
      this.wake = null;
    }
  }

  /** A request whose answer proves that every earlier frame has been handled. */
  async barrier(name: string, state: State): Promise<void> {
    const id = `barrier-${name}`;
    const expect: Expect = state === "ready" ? { id, result: true } : { id, code: INVALID };
    this.owed.set(key(id), expect);
    this.ws.send(JSON.stringify({ jsonrpc: "2.0", id, method: "thread/list", params: { limit: 1 } }));
    await this.answered();
  }

  async handshake(): Promise<void> {
    const id = "handshake";
    this.owed.set(key(id), { id, result: true });
    this.ws.send(JSON.stringify({ jsonrpc: "2.0", id, method: "initialize", params: { clientInfo } }));
    await this.answered();
    this.ws.send(JSON.stringify({ jsonrpc: "2.0", method: "initialized" }));
  }
}

describe("the fuzz table", () => {
  it("sends invalid params only where the schema rejects them, and valid ones where it accepts them", () => {
    for (const [method, params] of INVALID_PARAMS) expect(accepts(method, params), `${method} ${JSON.stringify(params).slice(0, 80)}`).toBe(false);
    for (const params of INVALID_INITIALIZE) expect(accepts("initialize", params)).toBe(false);
    for (const [method, params] of [...VALID_ANYWHERE, ...VALID_WITH_EFFECTS]) expect(accepts(method, params), method).toBe(true);
    for (const method of UNKNOWN_METHODS) expect(KNOWN.has(method), method).toBe(false);
  });

  it("is the same for the same seed", () => {
    const frames = (seed: number) => {
      const gen = new Generator(new Rng(seed), "ready", 2);
      return Array.from({ length: 300 }, (_, i) => gen.frame(Math.floor(i / FRAMES_PER_ROUND), i % FRAMES_PER_ROUND)).map((f) =>
        typeof f.data === "string" ? f.data.slice(0, 100) : f.data.toString("hex", 0, 50),
      );
    };
    expect(frames(SEED)).toEqual(frames(SEED));
    expect(frames(SEED)).not.toEqual(frames(SEED + 1));
  });
});

describe.each(BACKENDS)("JSON-RPC fuzz: 10 000 hostile frames over 8 connections (%s)", (backend) => {
  let ts: TestServer;
  /** Server log lines at error level or above: client misbehaviour must never show up there. */
  const serverErrors: string[] = [];

  beforeAll(async () => {
    const log = pino(
      { level: "warn" },
      {
        write: (line: string) => {
          const entry = JSON.parse(line) as { level: number; msg: string };
          if (entry.level >= 50) serverErrors.push(line.slice(0, 2000));
        },
      },
    );
    // Ingress limits are lifted: this test is about malformed input, not about rate limiting, and
    // it sends far faster than any client should. So is the initialize deadline: connection 0
    // stays uninitialized on purpose for the whole storm, which took over 30 s on a loaded
    // machine (closed with 4408); the deadline has its own test (keepalive.e2e).
    ts = await startTestServer(backend, {
      log,
      limits: { requestsPerSecond: 1_000_000, requestBurst: 1_000_000, maxInFlightRequests: 1_000_000 },
      keepalive: { initializeTimeoutMs: 0 },
    });
  });
  afterAll(async () => {
    await ts?.close();
  });

  it("answers each frame as the table says, exactly once, while a clean connection keeps working", async () => {
    FuzzConnection.gaveUp = false;
    // The clean connection opens before the storm and is used throughout it.
    const observer = await TestClient.initialized(ts.url);
    const observerThreads: string[] = [];

    const conns = await Promise.all(Array.from({ length: CONNECTIONS }, () => FuzzConnection.open(ts.url)));
    const generators = conns.map((_, i) => new Generator(new Rng(SEED + i), FRESH.has(i) ? "fresh" : "ready", i));
    await Promise.all(conns.map((c, i) => (generators[i]!.state === "ready" ? c.handshake() : undefined)));

    const owedByCode = new Map<string, number>();
    const categories = new Map<string, number>();
    for (let round = 0; round < ROUNDS; round++) {
      const storm = conns.map(async (conn, i) => {
        const gen = generators[i]!;
        for (let f = 0; f < FRAMES_PER_ROUND; f++) {
          const frame = gen.frame(round, f);
          categories.set(frame.category, (categories.get(frame.category) ?? 0) + 1);
          for (const e of frame.expect) {
            const k = "code" in e ? String(e.code) : "result";
            owedByCode.set(k, (owedByCode.get(k) ?? 0) + 1);
          }
          conn.send(frame);
          // Pace: let the server read what was sent every few frames.
          if (f % 10 === 9) await new Promise((r) => setImmediate(r));
        }
        await conn.answered();
      });
      // The clean connection is used during the storm ...
      const during = observer.request("thread/list", { limit: 1 });
      await Promise.all(storm);
      expect((await during).data).toEqual(expect.any(Array));
      // ... and between rounds, with writes.
      const started = await observer.request("thread/start", { cwd: "/fuzz-observer" });
      observerThreads.push(started.thread.id);
      const listed = await observer.request("thread/list", { cwd: "/fuzz-observer", limit: 100 });
      expect(listed.data.map((t: { id: string }) => t.id).sort()).toEqual([...observerThreads].sort());

      if (round + 1 === LATE_INIT.afterRound) {
        // A connection that spent half the storm uninitialized completes the handshake now.
        const late = conns[LATE_INIT.connection]!;
        await late.barrier("before-handshake", "fresh");
        await late.handshake();
        generators[LATE_INIT.connection]!.state = "ready";
      }
    }

    // Two barriers in a row: every frame before them has been handled and answered, so nothing
    // that deserved no answer can still get one.
    for (const [i, conn] of conns.entries()) {
      await conn.barrier("end-1", generators[i]!.state);
      await conn.barrier("end-2", generators[i]!.state);
    }

    // FUZZ_DEBUG=1 prints what the table asked for, by code and by kind of frame.
    if (process.env.FUZZ_DEBUG) console.log(JSON.stringify({ owedByCode: [...owedByCode], categories: [...categories], serverErrors: serverErrors.slice(0, 3), problems: conns.map((c) => c.problems.slice(0, 3)) }));
    expect(conns.reduce((s, c) => s + c.framesSent, 0)).toBe(10_000);
    expect(conns.flatMap((c, i) => c.problems.map((p) => `connection ${i}: ${p}`))).toEqual([]);
    for (const [i, conn] of conns.entries()) {
      expect(conn.owed.size, `connection ${i}`).toBe(0);
      // id-null errors: exactly as many as owed, code by code (none extra, none missing).
      expect(Object.fromEntries(conn.nullErrorsGot), `connection ${i}`).toEqual(Object.fromEntries(conn.nullErrorsOwed));
      expect(conn.closed, `connection ${i}`).toBe(false);
    }
    // The table covered every standard error code many times over, and every kind of frame.
    for (const code of [PARSE, INVALID, NOT_FOUND, PARAMS]) expect(owedByCode.get(String(code)) ?? 0).toBeGreaterThan(100);
    expect(owedByCode.get("result") ?? 0).toBeGreaterThan(100);
    for (const category of [
      "invalid JSON",
      "not an object",
      "invalid id",
      "unusual valid id",
      "params not structured",
      "method not a string",
      "wrong jsonrpc",
      "no method",
      "unknown method",
      "unknown thread",
      "invalid params",
      "invalid initialize",
      "duplicate initialize",
      "request before initialize / valid request",
      "notification",
      "response to a request never sent",
      "binary frame",
      "deep nesting",
      "megabyte string",
      "empty batch",
      "batch (mixed)",
      "batch (silent)",
      "batch (nested)",
    ])
      expect(categories.get(category) ?? 0, category).toBeGreaterThan(0);

    // Nothing the storm sent was executed: notifications carrying thread/start, command/exec or
    // initialize did nothing, and no thread exists but the observer's.
    const all = await observer.request("thread/list", { limit: 100 });
    expect(all.data.map((t: { id: string }) => t.id).sort()).toEqual([...observerThreads].sort());
    // The connection that never completed the handshake is still refused.
    const fresh = conns[0]!;
    await fresh.barrier("still-fresh", "fresh");
    expect(fresh.problems).toEqual([]);

    // The clean connection saw no error at all.
    expect(observer.frames.filter((f) => f.error)).toEqual([]);
    expect(observer.closeCode).toBeNull();

    // The process is up and healthy, and accepts new clients.
    expect((await fetch(`${ts.httpUrl}/healthz`)).status).toBe(200);
    expect((await fetch(`${ts.httpUrl}/readyz`)).status).toBe(200);
    const newcomer = await TestClient.initialized(ts.url);
    expect((await newcomer.request("thread/list", { limit: 1 })).data).toEqual(expect.any(Array));
    await newcomer.close();

    // Client misbehaviour is logged (as warnings at most), never as a server error.
    expect(serverErrors).toEqual([]);

    await Promise.all(conns.map((c) => new Promise<void>((resolve) => (c.ws.once("close", () => resolve()), c.ws.close()))));
    await observer.close();
  }, 180_000);
});
