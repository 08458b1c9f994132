/**
 * fuzzyFileSearch and fuzzyFileSearch/session{Start,Update,Stop}: file search for `@` mentions,
 * with Codex's semantics.
 *   - fuzzyFileSearch answers the matches at once; a later request with the same
 *     `cancellationToken` cancels an earlier one still running (it is answered with no files).
 *   - A session lists its roots once (at sessionStart, in the background) and ranks every
 *     sessionUpdate's query against that list: the update is answered `{}` at once, then
 *     `fuzzyFileSearch/sessionUpdated {sessionId, query, files}` and
 *     `fuzzyFileSearch/sessionCompleted {sessionId}` follow — only for the session's latest query
 *     (a query superseded before its results were ready sends nothing). Starting a session with an
 *     id in use replaces it; sessionStop ends it (an unknown id is not an error, as in Codex);
 *     closing the connection ends all of its sessions.
 * Roots must be absolute paths of existing directories (-32602 otherwise); results never leave
 * them (walk.ts). An unknown session id in sessionUpdate is -32600.
 */
import type { AppContext } from "../../app-context.js";
import { FileSearchRootError, indexRoots, matchIndexed, resolveRoots, type IndexedRoot, type SearchRoot } from "../../files/file-search.js";
import type { Connection } from "../connection.js";
import { invalidParams, invalidRequest } from "../errors.js";

async function rootsOrInvalid(roots: readonly string[], hidden: readonly string[]): Promise<SearchRoot[]> {
  try {
    return await resolveRoots(roots, hidden);
  } catch (err) {
    if (err instanceof FileSearchRootError) throw invalidParams(`Invalid params: ${err.message}`);
    throw err;
  }
}

interface Session {
  controller: AbortController;
  index: Promise<IndexedRoot[]>;
  latestQuery: string;
}

/** `hidden`: the server's hidden paths (src/sandbox/boundary.ts), never listed. */
export function registerFileSearchHandlers(conn: Connection, app: AppContext, hidden: readonly string[] = []): void {
  const byToken = new Map<string, AbortController>();
  const sessions = new Map<string, Session>();
  conn.onClose(() => {
    for (const c of byToken.values()) c.abort();
    for (const s of sessions.values()) s.controller.abort();
    sessions.clear();
  });

  conn.handle("fuzzyFileSearch", async (p, { signal }) => {
    // The token is claimed before the first await: "later" means later on the wire. Claimed after
    // resolving the roots, two requests racing through that await could swap places, and the
    // later one would be cancelled by the earlier.
    const controller = new AbortController();
    const abort = () => controller.abort();
    signal.addEventListener("abort", abort, { once: true });
    const token = p.cancellationToken ?? null;
    if (token !== null) {
      byToken.get(token)?.abort();
      byToken.set(token, controller);
    }
    try {
      const roots = await rootsOrInvalid(p.roots, hidden);
      if (p.query.trim() === "") return { files: [] };
      const indexed = await indexRoots(roots, controller.signal, hidden);
      const files = await matchIndexed(indexed, p.query, controller.signal);
      return { files: controller.signal.aborted ? [] : files };
    } finally {
      signal.removeEventListener("abort", abort);
      if (token !== null && byToken.get(token) === controller) byToken.delete(token);
    }
  });

  conn.handle("fuzzyFileSearch/sessionStart", async (p) => {
    if (p.sessionId === "") throw invalidRequest("sessionId must not be empty");
    const roots = await rootsOrInvalid(p.roots, hidden);
    const controller = new AbortController();
    // Listing failures are logged and leave the session with no files rather than failing updates.
    const index = indexRoots(roots, controller.signal, hidden).catch((err: unknown) => {
      app.log.warn({ err, connectionId: conn.id }, "file search listing failed");
      return [] as IndexedRoot[];
    });
    sessions.get(p.sessionId)?.controller.abort();
    sessions.set(p.sessionId, { controller, index, latestQuery: "" });
    return {};
  });

  conn.handle("fuzzyFileSearch/sessionUpdate", async (p, { responded }) => {
    const session = sessions.get(p.sessionId);
    if (!session) throw invalidRequest(`fuzzy file search session not found: ${p.sessionId}`);
    session.latestQuery = p.query;
    const current = () => sessions.get(p.sessionId) === session && session.latestQuery === p.query && !session.controller.signal.aborted;
    void (async () => {
      const indexed = await session.index;
      await responded;
      if (!current()) return;
      const files = p.query.trim() === "" ? [] : await matchIndexed(indexed, p.query, session.controller.signal);
      if (!current()) return;
      conn.notify("fuzzyFileSearch/sessionUpdated", { sessionId: p.sessionId, query: p.query, files });
      conn.notify("fuzzyFileSearch/sessionCompleted", { sessionId: p.sessionId });
    })().catch((err: unknown) => app.log.warn({ err, connectionId: conn.id }, "file search session update failed"));
    return {};
  });

  conn.handle("fuzzyFileSearch/sessionStop", (p) => {
    sessions.get(p.sessionId)?.controller.abort();
    sessions.delete(p.sessionId);
    return {};
  });
}
