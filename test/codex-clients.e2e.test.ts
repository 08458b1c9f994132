// @needs-os-sandbox: runs shell commands (one of them under :read-only, which the OS sandbox must stop)
/**
 * What Codex's own clients rely on, over a real WebSocket (through the recording relay, so every
 * server message is also checked against Codex's JSON Schema): paged history (thread/turns/list,
 * thread/items/list, resume's initialTurnsPage), turn/completed's summary items, permission
 * profiles and their enforcement, thread/list sortKeys and source labels, and the start-up methods.
 */
import { existsSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { conformanceProblems, noCodex } from "./support/codex.js";
import { startRecordingRelay, type RecordingRelay } from "./support/recording-relay.js";
import { makeWorkspace } from "./support/approvals.js";
import { TestClient } from "./support/client.js";
import { BACKENDS } from "./support/db.js";
import { startTurnHarness, text, turnCompleted, type TurnHarness } from "./support/turns.js";

async function clientNamed(url: string, name: string): Promise<TestClient> {
  const c = await TestClient.connect(url);
  await c.request("initialize", { clientInfo: { name, title: null, version: "0.171.0" }, capabilities: { experimentalApi: true } });
  c.notify("initialized", {});
  return c;
}

async function rpcError(p: Promise<unknown>): Promise<{ code: number; message: string }> {
  try {
    await p;
  } catch (err: any) {
    return { code: err.code, message: err.message };
  }
  throw new Error("expected an error response");
}

interface Env {
  h: TurnHarness;
  relay: RecordingRelay;
  ws: ReturnType<typeof makeWorkspace>;
  c: TestClient;
}

async function setup(backend: (typeof BACKENDS)[number]): Promise<Env> {
  const ws = makeWorkspace();
  const h = await startTurnHarness(backend, "openai", { cwd: ws.dir });
  const relay = await startRecordingRelay(h.ts.url);
  const c = await clientNamed(relay.url, "vscode-like");
  return { h, relay, ws, c };
}
async function teardown(e: Partial<Env>) {
  await e.c?.close();
  await e.relay?.close();
  await e.h?.close();
  e.ws?.cleanup();
}

/** Runs one turn; returns the turn/completed params. */
async function runTurn(e: Env, threadId: string, prompt: string, ...steps: Parameters<TurnHarness["mock"]["enqueue"]>): Promise<any> {
  e.h.mock.enqueue(...steps);
  const { turn } = await e.c.request("turn/start", { threadId, input: text(prompt) });
  return (await turnCompleted(e.c, turn.id, 60_000)).params;
}

describe.each(BACKENDS)("paged history (%s)", (backend) => {
  const e: Partial<Env> = {};
  let threadId = "";
  let turnIds: string[] = [];
  let fullItems: any[] = []; // every item of the thread, in order
  let turnOfItem: string[] = []; // the turn of each of fullItems

  beforeAll(async () => {
    Object.assign(e, await setup(backend));
    const env = e as Env;
    threadId = (await env.c.request("thread/start", { cwd: env.ws.dir, approvalPolicy: "never", sandbox: "workspace-write" })).thread.id;
    for (let i = 1; i <= 5; i++) {
      const steps: any[] = i === 3 ? [{ toolCalls: [{ name: "shell", arguments: { command: "echo out-3" } }] }, { text: "answer 3" }] : [{ text: `answer ${i}` }];
      const done = await runTurn(env, threadId, `prompt ${i}`, ...steps);
      turnIds.push(done.turn.id);
    }
    const read = await env.c.request("thread/read", { threadId, includeTurns: true });
    fullItems = read.thread.turns.flatMap((t: any) => t.items);
    turnOfItem = read.thread.turns.flatMap((t: any) => t.items.map(() => t.id));
  });
  afterAll(() => teardown(e));

  it("turn/completed carries the summary view: the user message and the final answer, marked final_answer", async () => {
    const env = e as Env;
    const completed = env.relay.frames.filter((f) => f.frame?.method === "turn/completed").map((f) => f.frame.params.turn);
    expect(completed).toHaveLength(5);
    const third = completed[2];
    expect(third.itemsView).toBe("summary");
    expect(third.items.map((i: any) => i.type)).toEqual(["userMessage", "agentMessage"]);
    expect(third.items[1]).toMatchObject({ text: "answer 3", phase: "final_answer" });
    // The full turn has the command in between.
    expect(fullItems.filter((i) => i.type === "commandExecution")).toHaveLength(1);
  });

  it("thread/turns/list pages newest first with cursors both ways, in each items view", async () => {
    const env = e as Env;
    const p1 = await env.c.request("thread/turns/list", { threadId, limit: 2 });
    const p2 = await env.c.request("thread/turns/list", { threadId, limit: 2, cursor: p1.nextCursor });
    const p3 = await env.c.request("thread/turns/list", { threadId, limit: 2, cursor: p2.nextCursor });
    expect([p1, p2, p3].map((p) => p.data.map((t: any) => t.id))).toEqual([
      [turnIds[4], turnIds[3]],
      [turnIds[2], turnIds[1]],
      [turnIds[0]],
    ]);
    expect(p3.nextCursor).toBeNull();
    // Summary by default.
    expect(p2.data[0]).toMatchObject({ itemsView: "summary", status: "completed" });
    expect(p2.data[0].items.map((i: any) => i.type)).toEqual(["userMessage", "agentMessage"]);
    // The backwards cursor of page 3, read ascending, gives the turns after it.
    const back = await env.c.request("thread/turns/list", { threadId, limit: 2, cursor: p3.backwardsCursor, sortDirection: "asc" });
    expect(back.data.map((t: any) => t.id)).toEqual([turnIds[1], turnIds[2]]);
    const asc = await env.c.request("thread/turns/list", { threadId, limit: 10, sortDirection: "asc", itemsView: "full" });
    expect(asc.data.map((t: any) => t.id)).toEqual(turnIds);
    expect(asc.data.flatMap((t: any) => t.items)).toEqual(fullItems);
    expect(asc.nextCursor).toBeNull();
    const bare = await env.c.request("thread/turns/list", { threadId, limit: 1, itemsView: "notLoaded" });
    expect(bare.data[0]).toMatchObject({ id: turnIds[4], items: [], itemsView: "notLoaded" });
  });

  it("thread/items/list walks every item both ways, by cursor, anchor or turn, and can defer command output", async () => {
    const env = e as Env;
    const walk = async (params: Record<string, unknown>) => {
      const out: any[] = [];
      let cursor: string | null = null;
      for (let guard = 0; guard < 100; guard++) {
        const page: any = await env.c.request("thread/items/list", { threadId, limit: 3, ...params, ...(cursor ? { cursor } : {}) });
        expect(page.data.length).toBeLessThanOrEqual(3);
        out.push(...page.data);
        if (!page.nextCursor) return out;
        cursor = page.nextCursor;
      }
      throw new Error("nextCursor never ended");
    };
    const asc = await walk({});
    expect(asc.map((x) => x.item)).toEqual(fullItems);
    expect(asc.map((x) => x.turnId)).toEqual(turnOfItem);
    const desc = await walk({ sortDirection: "desc" });
    expect(desc.map((x) => x.item.id)).toEqual([...fullItems].reverse().map((i) => i.id));

    // An item anchor: what follows that item (asc) or precedes it (desc).
    const anchor = fullItems[4]!;
    const after = await env.c.request("thread/items/list", { threadId, cursor: { type: "item", itemId: anchor.id }, limit: 2 });
    expect(after.data.map((x: any) => x.item.id)).toEqual(fullItems.slice(5, 7).map((i) => i.id));
    const before = await env.c.request("thread/items/list", { threadId, cursor: { type: "item", itemId: anchor.id }, limit: 2, sortDirection: "desc" });
    expect(before.data.map((x: any) => x.item.id)).toEqual([fullItems[3].id, fullItems[2].id]);
    // backwardsCursor of a page, read the other way, gives what precedes the page.
    const mid = await env.c.request("thread/items/list", { threadId, cursor: after.backwardsCursor, sortDirection: "desc", limit: 1 });
    expect(mid.data.map((x: any) => x.item.id)).toEqual([anchor.id]);

    // One turn only, and its command output deferred.
    const third = await env.c.request("thread/items/list", { threadId, turnId: turnIds[2], deferOutput: { commandExecution: true } });
    expect(third.data.map((x: any) => x.item.type)).toEqual(fullItems.filter((_, n) => turnOfItem[n] === turnIds[2]).map((i) => i.type));
    const cmd = third.data.find((x: any) => x.item.type === "commandExecution");
    expect(cmd).toMatchObject({ outputDeferred: true, item: { aggregatedOutput: null, status: "completed" } });
    const plain = await env.c.request("thread/items/list", { threadId, turnId: turnIds[2] });
    expect(plain.data.find((x: any) => x.item.type === "commandExecution").item.aggregatedOutput).toBe("out-3\n");
  });

  it("refuses cursors it did not issue, anchors and turns of other threads, with -32602", async () => {
    const env = e as Env;
    const other = (await env.c.request("thread/start", {})).thread.id;
    const bad = [
      () => env.c.request("thread/turns/list", { threadId, cursor: "not-a-cursor" }),
      () => env.c.request("thread/turns/list", { threadId, cursor: Buffer.from(JSON.stringify({ x: 1 })).toString("base64url") }),
      () => env.c.request("thread/items/list", { threadId, cursor: "%%%" }),
      () => env.c.request("thread/items/list", { threadId: other, cursor: { type: "item", itemId: fullItems[0].id } }),
      () => env.c.request("thread/items/list", { threadId: other, turnId: turnIds[0] }),
      () => env.c.request("thread/turns/list", { threadId, limit: 0 }),
    ];
    for (const call of bad) expect((await rpcError(call())).code).toBe(-32602);
  });

  it("thread/resume with initialTurnsPage answers one page of turns and no full history", async () => {
    const env = e as Env;
    const c2 = await clientNamed(env.relay.url, "resumer");
    try {
      const r = await c2.request("thread/resume", { threadId, initialTurnsPage: { limit: 2, sortDirection: "desc", itemsView: "summary" } });
      expect(r.thread.turns).toEqual([]);
      expect(r.initialTurnsPage.data.map((t: any) => t.id)).toEqual([turnIds[4], turnIds[3]]);
      expect(r.initialTurnsPage.data[0].itemsView).toBe("summary");
      const next = await c2.request("thread/turns/list", { threadId, limit: 10, cursor: r.initialTurnsPage.nextCursor });
      expect(next.data.map((t: any) => t.id)).toEqual([turnIds[2], turnIds[1], turnIds[0]]);
    } finally {
      await c2.close();
    }
  });

  it.skipIf(noCodex)("every server message of these sessions is valid against Codex's schema (the refusals above aside)", () => {
    const problems = conformanceProblems(e.relay!.frames);
    expect(problems.filter((p) => !/answered -32602/.test(p))).toEqual([]);
    expect(problems).toHaveLength(6);
  });
});

describe("permission profiles", () => {
  const e: Partial<Env> = {};
  beforeAll(async () => Object.assign(e, await setup("pglite")));
  afterAll(() => teardown(e));

  const PROFILES = [
    [":read-only", "readOnly"],
    [":workspace", "workspaceWrite"],
    [":danger-full-access", "dangerFullAccess"],
  ] as const;

  it.each(PROFILES)("%s on thread/start, resume and fork sets the sandbox and is reported back", async (profile, type) => {
    const env = e as Env;
    const start = await env.c.request("thread/start", { permissions: profile });
    expect(start.sandbox.type).toBe(type);
    expect(start.activePermissionProfile).toEqual({ id: profile, extends: null });
    const id = start.thread.id;
    const other = PROFILES.find((p) => p[0] !== profile)!;
    const resumed = await env.c.request("thread/resume", { threadId: id, permissions: other[0] });
    expect(resumed.sandbox.type).toBe(other[1]);
    expect(resumed.activePermissionProfile).toEqual({ id: other[0], extends: null });
    const fork = await env.c.request("thread/fork", { threadId: id, permissions: profile });
    expect(fork.sandbox.type).toBe(type);
    expect(fork.activePermissionProfile).toEqual({ id: profile, extends: null });
  });

  it("an unknown profile, or a profile together with sandbox or sandboxPolicy, is -32602 everywhere", async () => {
    const env = e as Env;
    const id = (await env.c.request("thread/start", {})).thread.id;
    const cases: Array<[string, Record<string, unknown>]> = [
      ["thread/start", { permissions: ":nope" }],
      ["thread/start", { permissions: ":read-only", sandbox: "read-only" }],
      ["thread/resume", { threadId: id, permissions: "custom-profile" }],
      ["thread/resume", { threadId: id, permissions: ":workspace", sandbox: "workspace-write" }],
      ["thread/fork", { threadId: id, permissions: ":nope" }],
      ["turn/start", { threadId: id, input: text("x"), permissions: ":nope" }],
      ["turn/start", { threadId: id, input: text("x"), permissions: ":read-only", sandboxPolicy: { type: "readOnly" } }],
    ];
    for (const [method, params] of cases) {
      const err = await rpcError(env.c.request(method, params));
      expect(err.code, `${method} ${JSON.stringify(params)}`).toBe(-32602);
    }
    expect(e.h!.mock.requests).toHaveLength(0); // no turn started
  });

  it(":read-only given on turn/start is enforced by the sandbox: a write fails; :workspace then allows it", async () => {
    const env = e as Env;
    const id = (await env.c.request("thread/start", { cwd: env.ws.dir, approvalPolicy: "never", sandbox: "danger-full-access" })).thread.id;
    const file = path.join(env.ws.dir, "ro.txt");
    env.h.mock.enqueue({ toolCalls: [{ name: "shell", arguments: { command: "echo no > ro.txt" } }] }, { text: "tried" });
    let { turn } = await env.c.request("turn/start", { threadId: id, input: text("write"), permissions: ":read-only" });
    await turnCompleted(env.c, turn.id, 60_000);
    const failed = env.c.notifications("item/completed").map((f) => f.params).find((p) => p.turnId === turn.id && p.item.type === "commandExecution")!.item;
    expect(failed.status).toBe("failed");
    expect(existsSync(file)).toBe(false);
    const read = await env.c.request("thread/resume", { threadId: id });
    expect(read.activePermissionProfile).toEqual({ id: ":read-only", extends: null });

    env.h.mock.enqueue({ toolCalls: [{ name: "shell", arguments: { command: "echo yes > ro.txt" } }] }, { text: "wrote" });
    ({ turn } = await env.c.request("turn/start", { threadId: id, input: text("write again"), permissions: ":workspace" }));
    await turnCompleted(env.c, turn.id, 60_000);
    expect(existsSync(file)).toBe(true);
  });

  it.skipIf(noCodex)("every server message was valid against Codex's schema, errors aside", () => {
    expect(conformanceProblems(e.relay!.frames).filter((p) => !/answered -32602/.test(p))).toEqual([]);
  });
});

describe("thread/list: Codex's sort keys and source labels", () => {
  const e: Partial<Env> = {};
  beforeAll(async () => Object.assign(e, await setup("pglite")));
  afterAll(() => teardown(e));

  it("labels threads by the client that started them (exec, cli, vscode) and filters on sourceKinds", async () => {
    const env = e as Env;
    const started: Record<string, string> = {};
    for (const name of ["codex_exec", "codex-tui", "some-ide"]) {
      const c = await clientNamed(env.relay.url, name);
      started[name] = (await c.request("thread/start", {})).thread.id;
      await c.close();
    }
    const all = await env.c.request("thread/list", { sourceKinds: [] });
    const source = (id: string) => all.data.find((t: any) => t.id === id)?.source;
    expect([source(started.codex_exec!), source(started["codex-tui"]!), source(started["some-ide"]!)]).toEqual(["exec", "cli", "vscode"]);
    // The TUI's resume picker asks for cli + vscode; its start-up list asks for exec + appServer.
    const picker = await env.c.request("thread/list", { sortKey: "updated_at", sourceKinds: ["cli", "vscode"] });
    expect(picker.data.map((t: any) => t.id).sort()).toEqual([started["codex-tui"], started["some-ide"]].sort());
    const execs = await env.c.request("thread/list", { sortKey: "recency_at", sourceKinds: ["exec", "appServer"] });
    expect(execs.data.map((t: any) => t.id)).toEqual([started.codex_exec]);
    // Sub-agent threads and sections do not exist here: those filters match nothing.
    expect((await env.c.request("thread/list", { sourceKinds: ["subAgentThreadSpawn"] })).data).toEqual([]);
    expect((await env.c.request("thread/list", { sortKey: "section_position", sectionId: "01984de2-8f74-7c91-a3b2-5c5e937cf318" })).data).toEqual([]);
  });

  it("recency_at and section_position order by last activity, like updated_at", async () => {
    const env = e as Env;
    const a = (await env.c.request("thread/start", {})).thread.id;
    const b = (await env.c.request("thread/start", {})).thread.id;
    await new Promise((r) => setTimeout(r, 5));
    await env.c.request("thread/name/set", { threadId: a, name: "touched" }); // a is now the most recent
    for (const sortKey of ["updated_at", "recency_at", "section_position"]) {
      const page = await env.c.request("thread/list", { sortKey, limit: 2 });
      expect(page.data.map((t: any) => t.id), sortKey).toEqual([a, b]);
      const asc = await env.c.request("thread/list", { sortKey, sortDirection: "asc" });
      expect(asc.data.map((t: any) => t.id).slice(-2), sortKey).toEqual([b, a]);
    }
  });

  it.skipIf(noCodex)("every server message was valid against Codex's schema", () => {
    expect(conformanceProblems(e.relay!.frames)).toEqual([]);
  });
});

describe("start-up methods of Codex's clients", () => {
  const e: Partial<Env> = {};
  beforeAll(async () => Object.assign(e, await setup("pglite")));
  afterAll(() => teardown(e));

  it("each answers as Codex's schema says, with this server's settings", async () => {
    const env = e as Env;
    const from = env.relay.frames.length;
    const account = await env.c.request("account/read", {});
    // The mock provider has a key: an API-key account, and no OpenAI login is required.
    expect(account).toMatchObject({ account: { type: "apiKey" }, requiresOpenaiAuth: false });
    const config = await env.c.request("config/read", { includeLayers: true, cwd: env.ws.dir });
    expect(config.config).toMatchObject({ model: "mock-model", model_provider: "openai" });
    const req = await env.c.request("configRequirements/read");
    expect(req.requirements.allowedSandboxModes).toEqual(expect.arrayContaining(["read-only", "workspace-write", "danger-full-access"]));
    const skills = await env.c.request("skills/list", { cwds: [env.ws.dir], forceReload: true });
    expect(skills.data).toEqual([{ cwd: env.ws.dir, skills: [], errors: [] }]);
    const hooks = await env.c.request("hooks/list", { cwds: [env.ws.dir], threadId: null });
    expect(hooks.data[0].cwd).toBe(env.ws.dir);
    const modes = await env.c.request("collaborationMode/list", {});
    expect(modes.data.length).toBeGreaterThan(0);
    const models = await env.c.request("model/list", { includeHidden: true });
    expect(models.data.length).toBeGreaterThan(0);
    const id = (await env.c.request("thread/start", {})).thread.id;
    await env.c.request("thread/goal/get", { threadId: id });
    const terms = await env.c.request("thread/backgroundTerminals/list", { threadId: id });
    expect(terms.data).toEqual([]);
    await env.c.request("permissionProfile/list", {});
    const session = env.relay.frames.slice(from);
    expect(session.filter((f) => f.dir === "server→client" && f.frame.result !== undefined)).toHaveLength(11);
    expect(conformanceProblems(session)).toEqual([]);
  });
});
