/**
 * A server a team shares, for tests: the real server (WebSocket, or stdio in-process) on a fresh
 * database with three named users — alice and bob (confined to their own roots) and carol (an
 * admin) — and clients that sign in with their API tokens.
 */
import { mkdirSync, mkdtempSync, realpathSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { PassThrough } from "node:stream";
import { issueToken } from "../../src/identity/tokens.js";
import type { RunningServer, StartOptions } from "../../src/server.js";
import type { UserRecord, UserStore } from "../../src/store/user-store.js";
import { TestClient } from "../support/client.js";
import type { Backend } from "../support/db.js";
import { startMockModelServer, type MockModelServer } from "../support/mock-model-server.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { mockProviders } from "../support/turns.js";

/** The server's own token: the local user (an admin). */
export const SERVER_TOKEN = "server-token-for-team-tests-0123456789";

export interface TeamUser {
  record: UserRecord;
  token: string;
  /** Its first root (where its threads start by default); null for the admin. */
  root: string | null;
}

export interface TeamUsers {
  alice: TeamUser;
  bob: TeamUser;
  carol: TeamUser;
}

/** A directory with one root per user (`<dir>/<name>`), real paths, removed by cleanup. */
export function makeRoots(): { dir: string; rootOf(name: string): string; cleanup(): void } {
  const dir = realpathSync(mkdtempSync(path.join(os.tmpdir(), "aas-team-roots-")));
  return {
    dir,
    rootOf: (name) => {
      const root = path.join(dir, name);
      mkdirSync(root, { recursive: true });
      return root;
    },
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** Adds a user with an API token, as `app-server users add` does. */
export async function addUser(users: UserStore, name: string, opts: { admin?: boolean; roots?: string[]; dangerFullAccess?: boolean } = {}): Promise<TeamUser> {
  const issued = await issueToken();
  const record = await users.add({ name, admin: opts.admin ?? false, roots: opts.roots ?? [], dangerFullAccess: opts.dangerFullAccess ?? false, tokenId: issued.tokenId, tokenHash: issued.hash });
  return { record, token: issued.token, root: opts.roots?.[0] ?? null };
}

/** alice and bob, each confined to its own root; carol, an admin. */
export async function addTeam(users: UserStore, rootOf: (name: string) => string): Promise<TeamUsers> {
  return {
    alice: await addUser(users, "alice", { roots: [rootOf("alice")] }),
    bob: await addUser(users, "bob", { roots: [rootOf("bob")] }),
    carol: await addUser(users, "carol", { admin: true }),
  };
}

/** Connects with `token` (Authorization: Bearer) and completes the handshake. */
export async function connectAs(url: string, token: string, clientName = "team-test"): Promise<TestClient> {
  const c = await TestClient.connect(url, { headers: { authorization: `Bearer ${token}` } });
  await c.request("initialize", { clientInfo: { name: clientName, title: null, version: "0.0.1" }, capabilities: {} });
  c.notify("initialized", {});
  return c;
}

export interface TeamServer {
  ts: TestServer;
  mock: MockModelServer;
  users: TeamUsers;
  roots: ReturnType<typeof makeRoots>;
  clients: TestClient[];
  /** A signed-in client of a user (closed by close()). */
  as(user: TeamUser | string, clientName?: string): Promise<TestClient>;
  close(): Promise<void>;
}

/** A WebSocket server with the team, its providers on a mock model; the server token is the local user's. */
export async function startTeamServer(backend: Backend, overrides: Partial<StartOptions> = {}): Promise<TeamServer> {
  const mock = await startMockModelServer();
  const roots = makeRoots();
  const ts = await startTestServer(backend, {
    auth: "token-any-user",
    authToken: SERVER_TOKEN,
    modelProvider: "openai",
    model: "mock-model",
    providers: mockProviders(mock),
    turns: { retry: { maxRetries: 0, baseDelayMs: 5, maxDelayMs: 20, maxRetryAfterMs: 50 } },
    ...overrides,
  });
  const users = await addTeam(ts.server.app.team.users, roots.rootOf);
  // Known to the server now, not at its next users refresh (which `users add` would wait for).
  await ts.server.app.team.directory.refresh();
  const clients: TestClient[] = [];
  return {
    ts,
    mock,
    users,
    roots,
    clients,
    as: async (user, clientName) => {
      const c = await connectAs(ts.url, typeof user === "string" ? user : user.token, clientName);
      clients.push(c);
      return c;
    },
    close: async () => {
      for (const c of clients) await c.close().catch(() => {});
      await ts.close();
      await mock.close();
      roots.cleanup();
    },
  };
}

/** A JSON-RPC client over an in-process stdio server's streams (JSON lines). */
export class StdioClient {
  readonly input = new PassThrough();
  readonly output = new PassThrough();
  private nextId = 1;
  private buffer = "";
  private readonly pending = new Map<number, (frame: Record<string, any>) => void>();

  constructor() {
    this.output.setEncoding("utf8");
    this.output.on("data", (chunk: string) => {
      this.buffer += chunk;
      let nl: number;
      while ((nl = this.buffer.indexOf("\n")) >= 0) {
        const line = this.buffer.slice(0, nl);
        this.buffer = this.buffer.slice(nl + 1);
        if (!line.trim()) continue;
        const frame = JSON.parse(line) as Record<string, any>;
        if (frame.id !== undefined && frame.method === undefined) this.pending.get(frame.id)?.(frame);
      }
    });
  }

  get streams(): { input: NodeJS.ReadableStream; output: NodeJS.WritableStream } {
    return { input: this.input, output: this.output };
  }

  /** The full response frame. */
  requestRaw(method: string, params?: unknown): Promise<Record<string, any>> {
    const id = this.nextId++;
    const answer = new Promise<Record<string, any>>((resolve) => this.pending.set(id, resolve));
    this.input.write(`${JSON.stringify({ jsonrpc: "2.0", id, method, ...(params === undefined ? {} : { params }) })}\n`);
    return answer;
  }

  async request<T = any>(method: string, params?: unknown): Promise<T> {
    const f = await this.requestRaw(method, params);
    if (f.error) throw Object.assign(new Error(f.error.message), { code: f.error.code, data: f.error.data });
    return f.result as T;
  }

  async initialize(): Promise<void> {
    await this.request("initialize", { clientInfo: { name: "stdio-team-test", title: null, version: "0.0.1" }, capabilities: {} });
  }
}

/** Starts the server of `db` (reopened) over stdio in this process, acting as `user` (APP_SERVER_USER). */
export async function startStdioAs(start: (overrides: Partial<StartOptions>) => Promise<RunningServer>, user: string | null): Promise<{ client: StdioClient; server: RunningServer }> {
  const client = new StdioClient();
  const server = await start({ listen: "stdio://", stdio: client.streams, team: { stdioUser: user } });
  await client.initialize();
  return { client, server };
}

/** Normalises an error frame for byte-for-byte comparison: the thread id in question becomes <id>. */
export function errorBytes(frame: Record<string, any>, threadId: string): string {
  if (!frame.error) throw new Error(`expected an error, got ${JSON.stringify(frame).slice(0, 300)}`);
  return JSON.stringify(frame.error).replaceAll(threadId, "<id>");
}
