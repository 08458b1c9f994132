/** thread/* request handlers: thin, they validate (via Connection.handle) and call the runtime. */
import path from "node:path";
import type { AppContext } from "../../app-context.js";
import { BUILTIN_TOOL_NAMES } from "../../tools/builtin.js";
import { decodeCursor, ThreadNotFoundError } from "../../runtime/threads.js";
import { OverloadedError, TurnRequestError } from "../../runtime/turns.js";
import { ErrorCode } from "../../protocol/jsonrpc.js";
import type { Connection } from "../connection.js";
import { invalidParams, invalidRequest, RpcError, threadNotFound } from "../errors.js";
import { PermissionsError, resolveSandbox } from "../../runtime/permissions.js";
import { CursorError } from "../../runtime/turn-pages.js";
import { threadSourceFor } from "../../runtime/thread-source.js";
import { normalizeThreadConfig, ThreadMcpConfigError } from "../../runtime/thread-mcp.js";
import { threadView } from "../../runtime/thread-view.js";
import { SHELL_COMMAND_DEFAULT_TIMEOUT_MS } from "../../protocol/shell-command.js";
import { workspaceBase } from "../../identity/workspace.js";
import { threadAccessView, visibleIds, visibleTo } from "./teams.js";

function decodeSearchCursor(text: string): { value: number; id: string } | null {
  try {
    const c = (JSON.parse(Buffer.from(text, "base64url").toString("utf8")) as { search?: { value: unknown; id: unknown } }).search;
    if (c && Number.isSafeInteger(c.value) && typeof c.id === "string") return { value: c.value as number, id: c.id };
  } catch {
    /* not one of ours: null, which thread/search refuses as an invalid cursor */
  }
  return null;
}

/** Unknown thread ids are answered with -32600 and a message naming the id. */
export async function withThread<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof ThreadNotFoundError) throw threadNotFound(err.threadId);
    throw err;
  }
}

/** Also maps client-caused turn errors (a turn is running, a bad turn id) to -32600. */
export async function guardTurns<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await withThread(fn);
  } catch (err) {
    if (err instanceof TurnRequestError) throw invalidRequest(err.message);
    if (err instanceof OverloadedError) throw new RpcError(ErrorCode.ServerOverloaded, "Server overloaded; retry later", { reason: err.message });
    throw err;
  }
}

/** A cursor or anchor this thread does not have is the client's error: -32602. */
async function pagesOrInvalid<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof CursorError) throw invalidParams(`Invalid params: ${err.message}`);
    throw err;
  }
}

/** A bad permission profile (unknown, or given with a sandbox) is the client's error: -32602. */
export function permissionsOrInvalid<T>(fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    if (err instanceof PermissionsError) throw invalidParams(`Invalid params: ${err.message}`);
    throw err;
  }
}

/** A config whose thread MCP servers (config.mcp_servers) are malformed is the client's error: -32602. */
function threadConfigOrInvalid(config: Record<string, unknown> | null | undefined): Record<string, unknown> | null {
  try {
    return normalizeThreadConfig(config);
  } catch (err) {
    if (err instanceof ThreadMcpConfigError) throw invalidParams(`Invalid params: ${err.message}`);
    throw err;
  }
}

export function registerThreadHandlers(conn: Connection, app: AppContext): void {
  registerRecordHandlers(conn, app);
  registerHistoryHandlers(conn, app);
  registerSearchHandler(conn, app);
}

/** Threads as records: start, read, list, archive, name, which are loaded, unsubscribe. */
function registerRecordHandlers(conn: Connection, app: AppContext): void {
  const { runtime } = app;

  conn.handle("thread/start", async (p, { connection, responded }) => {
    if (p.modelProvider && !app.providers.has(p.modelProvider))
      throw invalidParams(`unknown modelProvider: ${p.modelProvider} (known: ${[...app.providers.ids()].join(", ")})`);
    const names = (p.dynamicTools ?? []).map((t) => t.name);
    const clash = names.find((n) => (BUILTIN_TOOL_NAMES as readonly string[]).includes(n));
    if (clash) throw invalidParams(`Invalid params: dynamic tool ${clash} has the name of a built-in tool`);
    const dup = names.find((n, i) => names.indexOf(n) !== i);
    if (dup) throw invalidParams(`Invalid params: dynamic tool ${dup} is declared twice`);
    const sandbox = permissionsOrInvalid(() => resolveSandbox(p, runtime.defaults.sandbox));
    const config = threadConfigOrInvalid(p.config);
    const source = threadSourceFor(connection.clientName);
    // The thread is the caller's, in the caller's workspace unless it names a cwd (checked by the guard).
    const base = workspaceBase(connection.principal, app.defaultCwd);
    return runtime.startThread({ ...p, ...sandbox, config, source, cwd: path.resolve(base, p.cwd ?? base), userId: connection.principal.id }, connection, responded);
  });

  conn.handle("thread/read", (p, { connection }) =>
    withThread(async () => {
      const thread = await runtime.readThread(p.threadId, p.includeTurns ? await app.turnsOf(p.threadId) : []);
      return { thread, access: await threadAccessView(app, connection, p.threadId) };
    }),
  );

  conn.handle("thread/list", async (p, { connection }) => {
    const cursor = p.cursor ? decodeCursor(p.cursor) : null;
    if (p.cursor && !cursor) throw invalidParams("Invalid params: cursor is not a cursor returned by thread/list");
    if (cursor && cursor.key !== (p.sortKey ?? "created_at"))
      throw invalidParams("Invalid params: cursor was made for a different sortKey");
    return runtime.listThreads(p, cursor, visibleTo(connection.principal));
  });

  conn.handle("thread/archive", (p, { connection }) =>
    withThread(async () => {
      await runtime.updateMetadata(p.threadId, { archived: true }, { method: "thread/archived", params: { threadId: p.threadId } }, connection);
      return {};
    }),
  );

  conn.handle("thread/unarchive", (p, { connection }) =>
    withThread(async () => {
      await runtime.updateMetadata(p.threadId, { archived: false }, { method: "thread/unarchived", params: { threadId: p.threadId } }, connection);
      return { thread: await runtime.readThread(p.threadId) };
    }),
  );

  conn.handle("thread/name/set", (p, { connection }) =>
    withThread(async () => {
      const name = p.name.trim();
      const event = { method: "thread/name/updated" as const, params: name ? { threadId: p.threadId, threadName: name } : { threadId: p.threadId } };
      await runtime.updateMetadata(p.threadId, { name: name || null }, event, connection);
      return {};
    }),
  );

  conn.handle("thread/loaded/list", async (p, { connection }) => {
    const ids = await visibleIds(app, connection.principal, runtime.loadedIds());
    const start = p.cursor ? ids.findIndex((id) => id > p.cursor!) : 0;
    const from = start < 0 ? ids.length : start;
    const limit = p.limit ?? ids.length;
    const data = ids.slice(from, from + limit);
    const more = from + limit < ids.length;
    return { data, nextCursor: more ? data[data.length - 1]! : null };
  });

  conn.handle("thread/unsubscribe", (p, { connection }) => ({ status: runtime.unsubscribe(p.threadId, connection) }));
}

/** A thread's turns and history: resume, pages of turns and items, fork, compact, shell command, rollback, events. */
function registerHistoryHandlers(conn: Connection, app: AppContext): void {
  const { runtime } = app;

  conn.handle("thread/resume", (p, { connection, responded }) =>
    guardTurns(async () => {
      const current = (await runtime.getRecord(p.threadId)).sandbox;
      const sandbox = permissionsOrInvalid(() => resolveSandbox(p, current));
      threadConfigOrInvalid(p.config);
      // With a first page asked for, the response carries that page instead of every turn.
      const paged = p.initialTurnsPage ? { excludeTurns: true } : {};
      const response = await app.history.resume({ ...p, ...sandbox, ...paged }, connection, responded);
      const initialTurnsPage = p.initialTurnsPage
        ? await pagesOrInvalid(() => app.pages.listTurns({ threadId: p.threadId, limit: p.initialTurnsPage!.limit, sortDirection: p.initialTurnsPage!.sortDirection, itemsView: p.initialTurnsPage!.itemsView }))
        : null;
      return { ...response, initialTurnsPage };
    }),
  );

  conn.handle("thread/turns/list", (p) => withThread(() => pagesOrInvalid(() => app.pages.listTurns(p))));
  conn.handle("thread/items/list", (p) => withThread(() => pagesOrInvalid(() => app.pages.listItems(p))));

  conn.handle("thread/fork", (p, { connection, responded }) =>
    guardTurns(async () => {
      if (p.modelProvider && !app.providers.has(p.modelProvider)) throw invalidParams(`unknown modelProvider: ${p.modelProvider}`);
      const current = (await runtime.getRecord(p.threadId)).sandbox;
      const sandbox = permissionsOrInvalid(() => resolveSandbox(p, current));
      threadConfigOrInvalid(p.config);
      return app.history.fork({ ...p, ...sandbox, userId: connection.principal.id }, connection, responded);
    }),
  );

  conn.handle("thread/compact/start", (p, { connection }) =>
    guardTurns(async () => {
      await app.turns.compactThread(p.threadId, connection);
      return {};
    }),
  );

  // Answered {} once the command's turn has started; the command streams as that turn's item.
  conn.handle("thread/shellCommand", (p, { connection }) =>
    guardTurns(async () => {
      const command = p.command.trim();
      if (command === "") throw invalidRequest("command must not be empty");
      await app.turns.shellCommand(p.threadId, command, p.timeoutMs ?? SHELL_COMMAND_DEFAULT_TIMEOUT_MS, connection);
      return {};
    }),
  );

  conn.handle("thread/rollback", (p) =>
    guardTurns(async () => {
      const turns = await app.history.rollback(p.threadId, p.numTurns);
      return { thread: await runtime.readThread(p.threadId, turns) };
    }),
  );

  conn.handle("thread/events/list", (p) =>
    withThread(async () => {
      await runtime.getRecord(p.threadId);
      const data = await runtime.store.listEvents(p.threadId, p.afterSeq, p.limit);
      return { data, nextAfterSeq: data.length === p.limit ? data[data.length - 1]!.seq : null };
    }),
  );
}

/** Our extension: full-text search with snippets (src/store/thread-search.ts). */
function registerSearchHandler(conn: Connection, app: AppContext): void {
  const { runtime } = app;
  conn.handle("thread/search", async (p, { connection }) => {
    const cursor = p.cursor ? decodeSearchCursor(p.cursor) : null;
    if (p.cursor && !cursor) throw invalidParams("Invalid params: cursor is not a cursor returned by thread/search");
    const page = await runtime.store.searchThreads({ query: (p.query ?? p.searchTerm)!, limit: p.limit ?? 25, cursor, archived: p.archived ?? false, visibleTo: visibleTo(connection.principal) });
    const records = page.rows.map((r) => r.record);
    const statuses = await runtime.statusesOf(records);
    const rows = page.rows.map(({ record, snippet }) => ({
      // The row as stored, unless this process leases the thread (as thread/list does).
      thread: threadView(runtime.loaded.get(record.id)?.lease ? runtime.loaded.get(record.id)!.record : record, statuses.get(record.id)!),
      snippet,
    }));
    const nextCursor = page.next ? Buffer.from(JSON.stringify({ search: page.next })).toString("base64url") : null;
    // Codex's form (searchTerm): its snippet is a string, and it has a backwards cursor (none here).
    if (p.searchTerm !== undefined) return { data: rows.map((r) => ({ thread: r.thread, snippet: r.snippet?.text ?? "" })), nextCursor, backwardsCursor: null };
    return { data: rows, nextCursor };
  });
}
