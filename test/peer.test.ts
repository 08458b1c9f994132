/**
 * Wire rules of the JSON-RPC adapter (src/rpc/peer.ts) and the connection's handshake gate,
 * exercised through their text interface with an in-memory send function: no sockets, no DB.
 */
import { describe, expect, it } from "vitest";
import { Connection } from "../src/rpc/connection.js";
import { RpcError, invalidParams } from "../src/rpc/errors.js";
import { RpcPeer, type PeerLogger } from "../src/rpc/peer.js";

type Frame = Record<string, any>;

class Harness {
  readonly sent: string[] = [];
  readonly logs: Array<{ level: string; obj: object; msg: string }> = [];
  readonly log: PeerLogger = {
    warn: (obj, msg) => this.logs.push({ level: "warn", obj, msg }),
    error: (obj, msg) => this.logs.push({ level: "error", obj, msg }),
    debug: (obj, msg) => this.logs.push({ level: "debug", obj, msg }),
  };
  readonly peer = new RpcPeer((text) => this.sent.push(text), this.log);
  readonly calls: Array<{ method: string; params: unknown }> = [];

  constructor() {
    this.peer.addMethod("echo", (params) => {
      this.calls.push({ method: "echo", params });
      return params ?? null;
    });
  }

  /** Delivers one message (an object is serialised; a string is sent as is) and lets handlers run. */
  async receive(msg: unknown): Promise<void> {
    this.peer.receive(typeof msg === "string" ? msg : JSON.stringify(msg));
    await settle();
  }

  frames(): any[] {
    return this.sent.map((t) => JSON.parse(t));
  }

  /** The frames sent since the last call. */
  take(): any[] {
    const f = this.frames();
    this.sent.length = 0;
    return f;
  }
}

/** Lets every pending promise chain (handlers without I/O) run to completion. */
const settle = () => new Promise<void>((r) => setImmediate(r));

describe("RpcPeer: envelopes", () => {
  it("answers unparseable text with -32700 and id null", async () => {
    const h = new Harness();
    await h.receive('{"jsonrpc":"2.0","id":1,"method":"echo"');
    expect(h.take()).toEqual([{ jsonrpc: "2.0", id: null, error: { code: -32700, message: "Parse error" } }]);
  });

  it('accepts messages without "jsonrpc" and always answers with "jsonrpc":"2.0"', async () => {
    const h = new Harness();
    await h.receive({ id: 1, method: "echo", params: { a: 1 } });
    await h.receive({ jsonrpc: "2.0", id: 2, method: "echo", params: { b: 2 } });
    expect(h.take()).toEqual([
      { jsonrpc: "2.0", id: 1, result: { a: 1 } },
      { jsonrpc: "2.0", id: 2, result: { b: 2 } },
    ]);
  });

  it('rejects a "jsonrpc" member other than "2.0" with -32600', async () => {
    const h = new Harness();
    await h.receive({ jsonrpc: "1.0", id: 3, method: "echo" });
    const [f] = h.take();
    expect(f).toMatchObject({ jsonrpc: "2.0", id: 3, error: { code: -32600 } });
    expect(h.calls).toEqual([]);
  });

  it("echoes ids with their exact type and value", async () => {
    const h = new Harness();
    for (const id of ["7", 7, 0, -5, "", "a b/ü", Number.MAX_SAFE_INTEGER]) await h.receive({ id, method: "echo", params: {} });
    const frames = h.take();
    expect(frames.map((f) => f.id)).toEqual(["7", 7, 0, -5, "", "a b/ü", Number.MAX_SAFE_INTEGER]);
    // The text itself keeps the type: "7" stays a string, 7 a number.
    const h2 = new Harness();
    await h2.receive('{"id":"7","method":"echo"}');
    await h2.receive('{"id":7,"method":"echo"}');
    expect(h2.sent[0]).toContain('"id":"7"');
    expect(h2.sent[1]).toContain('"id":7,');
  });

  it.each([
    ["an object", '{"id":{"a":1},"method":"echo"}'],
    ["an array", '{"id":[1],"method":"echo"}'],
    ["a boolean", '{"id":true,"method":"echo"}'],
  ])("rejects an id that is %s with -32600 and id null, without calling the handler", async (_what, text) => {
    const h = new Harness();
    await h.receive(text);
    const frames = h.take();
    expect(frames).toHaveLength(1);
    expect(frames[0]).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32600, message: expect.stringMatching(/id must be a string, a number or null/) } });
    expect(h.calls).toEqual([]);
  });

  it.each([
    ["an integer beyond 2^53", "9007199254740993"],
    ["a negative integer beyond 2^53", "-123456789012345678901234567890"],
    ["a fraction", "1.5"],
    ["an exponent", "1e400"],
    ["a long fraction", "0.10000000000000000000000001"],
  ])("accepts an id that is %s and echoes its text exactly, in results and errors", async (_what, idText) => {
    const h = new Harness();
    await h.receive(`{"jsonrpc":"2.0","id":${idText},"method":"echo","params":{"n":1}}`);
    await h.receive(`{"id":${idText},"method":"no/such/method"}`);
    await h.receive(`{"id" : ${idText} ,"method":"echo","params":"not structured"}`);
    expect(h.sent).toEqual([
      `{"jsonrpc":"2.0","id":${idText},"result":{"n":1}}`,
      `{"jsonrpc":"2.0","id":${idText},"error":{"code":-32601,"message":"Method not found"}}`,
      `{"jsonrpc":"2.0","id":${idText},"error":{"code":-32600,"message":"Invalid Request: params must be an object or array"}}`,
    ]);
  });

  it("takes the last of duplicate id members (as JSON.parse does) and finds escaped member names", async () => {
    const h = new Harness();
    await h.receive(String.raw`{"id":1,"params":{"id":"x","s":"\\\"id\":2 ]}"},"\u0069d":90071992547409931,"method":"echo"}`);
    expect(h.sent[0]).toMatch(/^\{"jsonrpc":"2.0","id":90071992547409931,"result":/);
  });

  it("accepts id null on a request and answers it with id null (a request, not a notification)", async () => {
    const h = new Harness();
    await h.receive('{"jsonrpc":"2.0","id":null,"method":"echo","params":{"a":1}}');
    expect(h.take()).toEqual([{ jsonrpc: "2.0", id: null, result: { a: 1 } }]);
    expect(h.calls).toHaveLength(1);
  });

  it("echoes big ids inside a batch, each element with its own text", async () => {
    const h = new Harness();
    await h.receive('[{"id":9007199254740993,"method":"echo","params":[1]},{"id":"9007199254740993","method":"echo","params":[2]},{"id":9007199254740995,"method":"echo","params":[3]}]');
    expect(h.sent).toEqual([
      '[{"jsonrpc":"2.0","id":9007199254740993,"result":[1]},{"jsonrpc":"2.0","id":"9007199254740993","result":[2]},{"jsonrpc":"2.0","id":9007199254740995,"result":[3]}]',
    ]);
  });

  it("accepts params null as no params (python-lsp-jsonrpc sends it) but refuses other scalars with -32600", async () => {
    const h = new Harness();
    await h.receive({ id: 1, method: "echo", params: null });
    for (const [i, params] of [5, "x", true, false, 0].entries()) await h.receive({ id: 10 + i, method: "echo", params });
    const frames = h.take();
    expect(frames[0]).toEqual({ jsonrpc: "2.0", id: 1, result: null });
    expect(frames.slice(1).map((f) => [f.id, f.error?.code])).toEqual([10, 11, 12, 13, 14].map((id) => [id, -32600]));
    expect(h.calls).toHaveLength(1);
  });

  it.each([
    ["null", "null"],
    ["a number", "42"],
    ["a string", '"initialize"'],
    ["a boolean", "true"],
    ["an empty object", "{}"],
  ])("answers %s as a message with a single -32600 (id null)", async (_what, text) => {
    const h = new Harness();
    await h.receive(text);
    const frames = h.take();
    expect(frames).toHaveLength(1);
    expect(Array.isArray(frames[0])).toBe(false);
    expect(frames[0]).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32600 } });
  });

  it("rejects a non-string method and an envelope that is neither request nor response with -32600", async () => {
    const h = new Harness();
    await h.receive({ id: 1, method: 5 });
    await h.receive({ id: 2 });
    await h.receive({ id: 3, method: "echo", params: "not an object" });
    const frames = h.take();
    expect(frames.map((f) => [f.id, f.error?.code])).toEqual([
      [1, -32600],
      [2, -32600],
      [3, -32600],
    ]);
    expect(h.calls).toEqual([]);
  });

  it("passes array params through to the handler", async () => {
    const h = new Harness();
    await h.receive({ id: 1, method: "echo", params: [1, 2] });
    expect(h.take()).toEqual([{ jsonrpc: "2.0", id: 1, result: [1, 2] }]);
  });

  it("answers an unknown method with -32601 and the request's id", async () => {
    const h = new Harness();
    await h.receive({ id: "x1", method: "no/such/method", params: {} });
    expect(h.take()).toEqual([{ jsonrpc: "2.0", id: "x1", error: { code: -32601, message: "Method not found" } }]);
  });

  it("answers a handler result of undefined with result null", async () => {
    const h = new Harness();
    h.peer.addMethod("nothing", () => undefined);
    await h.receive({ id: 1, method: "nothing" });
    expect(h.take()).toEqual([{ jsonrpc: "2.0", id: 1, result: null }]);
  });
});

describe("RpcPeer: handler errors", () => {
  it("turns a thrown plain Error into -32603 'Internal error' without message, data or stack", async () => {
    const h = new Harness();
    h.peer.addMethod("boom", async () => {
      throw new Error("secret detail: password=hunter2 at /srv/app/src/x.ts:10");
    });
    h.peer.addMethod("boomSync", () => {
      throw new TypeError("sync secret");
    });
    h.peer.addMethod("boomString", async () => {
      throw "a thrown string";
    });
    await h.receive({ id: 1, method: "boom" });
    await h.receive({ id: 2, method: "boomSync" });
    await h.receive({ id: 3, method: "boomString" });
    expect(h.frames()).toEqual([
      { jsonrpc: "2.0", id: 1, error: { code: -32603, message: "Internal error" } },
      { jsonrpc: "2.0", id: 2, error: { code: -32603, message: "Internal error" } },
      { jsonrpc: "2.0", id: 3, error: { code: -32603, message: "Internal error" } },
    ]);
    for (const text of h.sent) {
      expect(text).not.toMatch(/secret|hunter2|\.ts:|\bat /);
    }
    // The failure is logged server-side instead.
    expect(h.logs.filter((l) => l.level === "error")).toHaveLength(3);
  });

  it("says so when the database cannot be reached (refused, a closed connection), and nothing more", async () => {
    const h = new Harness();
    h.peer.addMethod("refused", async () => {
      throw Object.assign(new Error("connect ECONNREFUSED 10.1.2.3:5432"), { code: "ECONNREFUSED" });
    });
    h.peer.addMethod("closed", async () => {
      throw Object.assign(new Error("write CONNECTION_CLOSED db.internal:5432"), { code: "CONNECTION_CLOSED" });
    });
    h.peer.addMethod("query", async () => {
      throw Object.assign(new Error('relation "x" does not exist'), { code: "42P01" });
    });
    for (const [id, method] of [[1, "refused"], [2, "closed"], [3, "query"]] as const) await h.receive({ id, method });
    const unavailable = { code: -32603, message: "The database is unavailable; retry when it is back" };
    expect(h.frames()).toEqual([
      { jsonrpc: "2.0", id: 1, error: unavailable },
      { jsonrpc: "2.0", id: 2, error: unavailable },
      { jsonrpc: "2.0", id: 3, error: { code: -32603, message: "Internal error" } },
    ]);
    for (const text of h.sent) expect(text).not.toMatch(/10\.1\.2\.3|db\.internal|relation/);
  });

  it("keeps the code, message and data of a thrown RpcError", async () => {
    const h = new Harness();
    h.peer.addMethod("bad", () => {
      throw invalidParams("Invalid params: nope", { issues: [{ path: ["x"], message: "nope" }] });
    });
    h.peer.addMethod("custom", () => {
      throw new RpcError(-32001, "Server overloaded; retry later");
    });
    await h.receive({ id: 1, method: "bad" });
    await h.receive({ id: 2, method: "custom" });
    expect(h.frames()).toEqual([
      { jsonrpc: "2.0", id: 1, error: { code: -32602, message: "Invalid params: nope", data: { issues: [{ path: ["x"], message: "nope" }] } } },
      { jsonrpc: "2.0", id: 2, error: { code: -32001, message: "Server overloaded; retry later" } },
    ]);
  });

  it("answers a request refused by the gate with the gate's error and never calls the handler", async () => {
    const h = new Harness();
    h.peer.setGate((method) => (method === "echo" ? new RpcError(-32600, "Not initialized") : null));
    await h.receive({ id: 1, method: "echo", params: {} });
    expect(h.take()).toEqual([{ jsonrpc: "2.0", id: 1, error: { code: -32600, message: "Not initialized" } }]);
    expect(h.calls).toEqual([]);
  });

  it("ignores unknown notifications and notification handlers that throw, sending nothing", async () => {
    const h = new Harness();
    const seen: unknown[] = [];
    h.peer.onNotification("ok", (p) => seen.push(p));
    h.peer.onNotification("throws", () => {
      throw new Error("handler bug");
    });
    await h.receive({ method: "unknown/notification", params: {} });
    await h.receive({ method: "throws", params: {} });
    await h.receive({ method: "ok", params: { n: 1 } });
    await h.receive({ method: "ok", params: "bad params on a notification" });
    expect(h.sent).toEqual([]);
    expect(seen).toEqual([{ n: 1 }]);
    expect(h.logs.some((l) => l.level === "warn" && l.msg.includes("notification"))).toBe(true);
  });

  it("resolves the request context's `responded` only after the response was written", async () => {
    const h = new Harness();
    h.peer.addMethod("start", (_p, ctx) => {
      void ctx.responded.then(() => h.peer.notify("after/response", { id: ctx.id }));
      return { started: true };
    });
    await h.receive({ id: 9, method: "start" });
    const frames = h.take();
    expect(frames.map((f) => f.method ?? `response:${f.id}`)).toEqual(["response:9", "after/response"]);
  });
});

describe("RpcPeer: batches", () => {
  it("answers requests and notifications mixed in a batch with one array of only the requests' responses", async () => {
    const h = new Harness();
    const notes: unknown[] = [];
    h.peer.onNotification("note", (p) => notes.push(p));
    await h.receive([
      { id: 1, method: "echo", params: { n: 1 } },
      { method: "note", params: { n: 2 } },
      { jsonrpc: "2.0", id: "b", method: "echo", params: { n: 3 } },
      { id: 4, method: "no/such" },
    ]);
    expect(h.sent).toHaveLength(1);
    const [frame] = h.frames();
    expect(frame).toEqual([
      { jsonrpc: "2.0", id: 1, result: { n: 1 } },
      { jsonrpc: "2.0", id: "b", result: { n: 3 } },
      { jsonrpc: "2.0", id: 4, error: { code: -32601, message: "Method not found" } },
    ]);
    expect(notes).toEqual([{ n: 2 }]);
  });

  it("answers a batch holding a single request with an array", async () => {
    const h = new Harness();
    await h.receive([{ id: 1, method: "echo", params: { a: 1 } }]);
    expect(h.frames()).toEqual([[{ jsonrpc: "2.0", id: 1, result: { a: 1 } }]]);
  });

  it("answers a batch of notifications only with nothing", async () => {
    const h = new Harness();
    const notes: unknown[] = [];
    h.peer.onNotification("note", (p) => notes.push(p));
    await h.receive([
      { method: "note", params: { n: 1 } },
      { jsonrpc: "2.0", method: "note", params: { n: 2 } },
    ]);
    expect(h.sent).toEqual([]);
    expect(notes).toEqual([{ n: 1 }, { n: 2 }]);
  });

  it("answers an empty batch with a single -32600 object, not an array", async () => {
    const h = new Harness();
    await h.receive("[]");
    expect(h.frames()).toEqual([{ jsonrpc: "2.0", id: null, error: { code: -32600, message: expect.any(String) } }]);
  });

  it("answers every invalid element of a batch with its own -32600", async () => {
    const h = new Harness();
    await h.receive([1, "x", null, {}, { id: 2, method: "echo", params: { ok: true } }, { id: true, method: "echo" }]);
    const [frame] = h.frames();
    expect(frame).toHaveLength(6);
    expect(frame.map((r: Frame) => r.error?.code ?? "ok")).toEqual([-32600, -32600, -32600, -32600, "ok", -32600]);
    expect(frame[4]).toEqual({ jsonrpc: "2.0", id: 2, result: { ok: true } });
    expect(h.calls).toHaveLength(1);
  });
});

describe("RpcPeer: server → client requests", () => {
  it("sends a request with a fresh id and resolves with the client's reply (with or without jsonrpc)", async () => {
    const h = new Harness();
    const answer = h.peer.request("item/tool/requestUserInput", { q: 1 });
    await settle();
    const [req] = h.take();
    expect(req).toEqual({ jsonrpc: "2.0", id: expect.any(Number), method: "item/tool/requestUserInput", params: { q: 1 } });
    await h.receive({ id: req.id, result: { answer: 42 } });
    await expect(answer).resolves.toEqual({ answer: 42 });
    // A reply is never answered.
    expect(h.sent).toEqual([]);

    const second = h.peer.request("ask", {});
    await settle();
    const [req2] = h.take();
    expect(req2.id).not.toBe(req.id);
    await h.receive({ jsonrpc: "2.0", id: req2.id, result: null });
    await expect(second).resolves.toBeNull();
  });

  it("rejects with an RpcError carrying the client's code, message and data on an error reply", async () => {
    const h = new Harness();
    const answer = h.peer.request("ask", {}).then(
      () => null,
      (e: unknown) => e,
    );
    await settle();
    const [req] = h.take();
    await h.receive({ id: req.id, error: { code: -32000, message: "user said no", data: { why: "because" } } });
    const err = await answer;
    expect(err).toBeInstanceOf(RpcError);
    expect(err).toMatchObject({ code: -32000, message: "user said no", data: { why: "because" } });
    expect(h.sent).toEqual([]);
  });

  it("matches replies by exact id: a reply with id \"1\" does not answer request 1", async () => {
    const h = new Harness();
    let settled = false;
    const answer = h.peer.request("ask", {});
    void answer.then(
      () => (settled = true),
      () => (settled = true),
    );
    await settle();
    const [req] = h.take();
    expect(typeof req.id).toBe("number");
    await h.receive({ id: String(req.id), result: "wrong id type" });
    expect(settled).toBe(false);
    expect(h.sent).toEqual([]);
    await h.receive({ id: req.id, result: "right" });
    await expect(answer).resolves.toBe("right");
  });

  it("ignores replies to requests it never sent, answering nothing", async () => {
    const h = new Harness();
    await h.receive({ id: 12345, result: { stray: true } });
    await h.receive({ id: "nope", error: { code: 1, message: "stray error" } });
    expect(h.sent).toEqual([]);
  });

  it("never answers a response, even one with id null (the client could not parse something we sent)", async () => {
    const h = new Harness();
    await h.receive({ jsonrpc: "2.0", id: null, error: { code: -32700, message: "Parse error" } });
    await h.receive({ id: 1.5, result: 1 });
    // Answering would invite an endless error ping-pong with a peer that does the same.
    expect(h.sent).toEqual([]);
  });

  it("rejects pending requests when the connection closes, and later ones at once", async () => {
    const h = new Harness();
    const a = h.peer.request("ask", { n: 1 });
    const b = h.peer.request("ask", { n: 2 });
    await settle();
    expect(h.take()).toHaveLength(2);
    h.peer.close();
    await expect(a).rejects.toMatchObject({ message: "connection closed" });
    await expect(b).rejects.toMatchObject({ message: "connection closed" });
    await expect(h.peer.request("ask", {})).rejects.toThrow(/closed/);
    h.peer.notify("late", {});
    await h.receive({ id: 1, method: "echo" });
    expect(h.sent).toEqual([]);
    expect(h.peer.isOpen).toBe(false);
  });

  it("sends notifications with jsonrpc, params and a top-level emittedAtMs", async () => {
    const h = new Harness();
    h.peer.notify("thread/started", { thread: { id: "t" } });
    const [f] = h.take();
    expect(f).toEqual({ jsonrpc: "2.0", method: "thread/started", params: { thread: { id: "t" } }, emittedAtMs: expect.any(Number) });
    expect(Number.isSafeInteger(f.emittedAtMs)).toBe(true);
  });
});

describe("Connection: handshake gate and params validation", () => {
  const initParams = { clientInfo: { name: "unit", version: "1" } };

  function connection() {
    const h = new Harness();
    const conn = new Connection((t) => h.sent.push(t), h.log);
    conn.handle("initialize", (p, { connection }) => {
      connection.completeHandshake(p.clientInfo.name, p.capabilities?.optOutNotificationMethods);
      return { userAgent: "ua", codexHome: "/h", platformFamily: "unix", platformOs: "linux" };
    });
    let listed = 0;
    conn.handle("thread/list", () => {
      listed++;
      return { data: [], nextCursor: null, backwardsCursor: null };
    });
    const receive = async (msg: unknown) => {
      conn.receive(JSON.stringify(msg));
      await settle();
    };
    return { h, conn, receive, listed: () => listed };
  }

  it("refuses every request before initialize with -32600 'Not initialized', then serves it", async () => {
    const { h, receive, listed } = connection();
    await receive({ id: 1, method: "thread/list", params: {} });
    await receive({ id: 2, method: "no/such/method" });
    expect(h.take()).toEqual([
      { jsonrpc: "2.0", id: 1, error: { code: -32600, message: "Not initialized" } },
      { jsonrpc: "2.0", id: 2, error: { code: -32600, message: "Not initialized" } },
    ]);
    expect(listed()).toBe(0);
    await receive({ id: 3, method: "initialize", params: initParams });
    await receive({ id: 4, method: "thread/list", params: {} });
    const frames = h.take();
    expect(frames[0]).toMatchObject({ id: 3, result: { codexHome: "/h" } });
    expect(frames[1]).toEqual({ jsonrpc: "2.0", id: 4, result: { data: [], nextCursor: null, backwardsCursor: null } });
  });

  it("answers a second initialize with -32600 'Already initialized'", async () => {
    const { h, receive } = connection();
    await receive({ id: 1, method: "initialize", params: initParams });
    await receive({ id: 2, method: "initialize", params: initParams });
    const frames = h.take();
    expect(frames[0].result).toBeDefined();
    expect(frames[1]).toEqual({ jsonrpc: "2.0", id: 2, error: { code: -32600, message: "Already initialized" } });
  });

  it("accepts only one of two initialize requests that arrive together (batch)", async () => {
    const { h, receive } = connection();
    await receive([
      { id: 1, method: "initialize", params: initParams },
      { id: 2, method: "initialize", params: initParams },
    ]);
    const [batch] = h.take();
    expect(batch).toHaveLength(2);
    expect(batch.filter((r: Frame) => r.result)).toHaveLength(1);
    expect(batch.filter((r: Frame) => r.error)).toEqual([{ jsonrpc: "2.0", id: 2, error: { code: -32600, message: "Already initialized" } }]);
  });

  it("lets a client retry initialize after one rejected for invalid params", async () => {
    const { h, receive } = connection();
    await receive({ id: 1, method: "initialize", params: { clientInfo: { name: 5 } } });
    await receive({ id: 2, method: "initialize", params: initParams });
    const frames = h.take();
    expect(frames[0].error.code).toBe(-32602);
    expect(frames[1].result).toBeDefined();
  });

  it("answers invalid params with -32602, naming the field, with the zod issues in error.data.issues", async () => {
    const { h, receive, listed } = connection();
    await receive({ id: 1, method: "initialize", params: initParams });
    h.take();
    await receive({ id: 2, method: "thread/list", params: { limit: 0, sortKey: "name" } });
    const [f] = h.take();
    expect(f.error.code).toBe(-32602);
    expect(f.error.message).toMatch(/limit/);
    expect(f.error.data.issues.map((i: Frame) => i.path)).toEqual(expect.arrayContaining([["limit"], ["sortKey"]]));
    expect(listed()).toBe(0);
  });

  it("drops opted-out notification methods for this connection only", async () => {
    const a = connection();
    const b = connection();
    await a.receive({ id: 1, method: "initialize", params: { ...initParams, capabilities: { optOutNotificationMethods: ["thread/started"] } } });
    await b.receive({ id: 1, method: "initialize", params: initParams });
    a.h.take();
    b.h.take();
    for (const c of [a, b]) {
      c.conn.notify("thread/started", { thread: {} });
      c.conn.notify("thread/started/extra", {});
    }
    expect(a.h.take().map((f) => f.method)).toEqual(["thread/started/extra"]);
    expect(b.h.take().map((f) => f.method)).toEqual(["thread/started", "thread/started/extra"]);
  });
});

describe("RpcPeer: $/cancelRequest", () => {
  /** A handler that runs until its signal aborts, recording the abort reason. */
  function slowHarness() {
    const h = new Harness();
    const aborted: unknown[] = [];
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    h.peer.addMethod("slow", async (_params, ctx) => {
      ctx.signal.addEventListener("abort", () => aborted.push(ctx.signal.reason));
      await released;
      return "late result";
    });
    return { h, aborted, release };
  }

  it("answers the cancelled request with -32800 at once, aborts its signal, and drops the handler's later result", async () => {
    const { h, aborted, release } = slowHarness();
    await h.receive({ jsonrpc: "2.0", id: 7, method: "slow" });
    expect(h.sent).toEqual([]);
    await h.receive({ jsonrpc: "2.0", method: "$/cancelRequest", params: { id: 7 } });
    expect(h.take()).toEqual([{ jsonrpc: "2.0", id: 7, error: { code: -32800, message: "Request cancelled" } }]);
    expect(aborted).toEqual([expect.objectContaining({ reason: "cancelled" })]);
    release();
    await settle();
    await h.peer.drain();
    expect(h.sent).toEqual([]); // nothing else for id 7
  });

  it("matches ids by type and exact text: a string id is not the number, a big id is its own", async () => {
    const { h, release } = slowHarness();
    await h.receive('{"id":"7","method":"slow"}');
    await h.receive('{"id":9007199254740993,"method":"slow"}');
    await h.receive('{"method":"$/cancelRequest","params":{"id":7}}');
    await h.receive('{"method":"$/cancelRequest","params":{"id":9007199254740992}}');
    expect(h.sent).toEqual([]);
    await h.receive('{"method":"$/cancelRequest","params":{"id":9007199254740993}}');
    expect(h.sent).toEqual(['{"jsonrpc":"2.0","id":9007199254740993,"error":{"code":-32800,"message":"Request cancelled"}}']);
    await h.receive('{"method":"$/cancelRequest","params":{"id":"7"}}');
    expect(h.sent[1]).toBe('{"jsonrpc":"2.0","id":"7","error":{"code":-32800,"message":"Request cancelled"}}');
    release();
    await h.peer.drain();
    expect(h.sent).toHaveLength(2);
  });

  it("ignores cancels of unknown or finished requests and malformed cancels, answering nothing", async () => {
    const h = new Harness();
    await h.receive({ id: 1, method: "echo", params: { a: 1 } });
    await h.receive({ method: "$/cancelRequest", params: { id: 1 } });
    await h.receive({ method: "$/cancelRequest", params: { id: 99 } });
    await h.receive({ method: "$/cancelRequest", params: {} });
    await h.receive({ method: "$/cancelRequest" });
    expect(h.take()).toEqual([{ jsonrpc: "2.0", id: 1, result: { a: 1 } }]);
  });

  it("aborts every running request's signal when the connection closes", async () => {
    const { h, aborted, release } = slowHarness();
    await h.receive({ id: 1, method: "slow" });
    await h.receive({ id: 2, method: "slow" });
    h.peer.close();
    expect(aborted).toEqual([expect.objectContaining({ reason: "connectionClosed" }), expect.objectContaining({ reason: "connectionClosed" })]);
    release();
    await h.peer.drain();
    expect(h.sent).toEqual([]);
  });

  it("keeps a cancelled request's in-flight slot until its handler returns", async () => {
    const h = new Harness();
    const limited = new RpcPeer((t) => h.sent.push(t), h.log, { maxInFlightRequests: 1, requestsPerSecond: 1000, requestBurst: 1000 });
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    limited.addMethod("slow", () => released.then(() => "done"));
    limited.receive('{"id":1,"method":"slow"}');
    limited.receive('{"method":"$/cancelRequest","params":{"id":1}}');
    await settle();
    limited.receive('{"id":2,"method":"slow"}');
    await settle();
    expect(h.take().map((f) => [f.id, f.error?.code])).toEqual([
      [1, -32800],
      [2, -32001],
    ]);
    release();
    await settle(); // the cancelled handler returns and frees its slot
    limited.receive('{"id":3,"method":"slow"}');
    await limited.drain();
    expect(h.take()).toEqual([{ jsonrpc: "2.0", id: 3, result: "done" }]);
  });
});
