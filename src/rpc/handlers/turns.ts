/** turn/* and model/list request handlers. */
import type { AppContext } from "../../app-context.js";
import { UserInputError } from "../../runtime/user-input.js";
import type { Connection } from "../connection.js";
import { invalidParams } from "../errors.js";
import { guardTurns, permissionsOrInvalid } from "./threads.js";
import { resolveSandbox } from "../../runtime/permissions.js";

async function guarded<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await guardTurns(fn);
  } catch (err) {
    if (err instanceof UserInputError) throw invalidParams(`Invalid params: ${err.message}`);
    throw err;
  }
}

/** Refuses oversized input with a clear -32602 before anything is recorded. */
function checkInputSize(input: unknown, limit: number): void {
  const bytes = Buffer.byteLength(JSON.stringify(input));
  if (bytes > limit) throw invalidParams(`Invalid params: input is ${bytes} bytes; the limit per turn is ${limit}`, { bytes, limit });
}

export function registerTurnHandlers(conn: Connection, app: AppContext): void {
  const { runtime } = app;
  conn.handle("turn/start", (p, { connection, responded }) =>
    guarded(async () => {
      checkInputSize(p.input, app.limits.maxInputBytes);
      if (p.modelProvider && !app.providers.has(p.modelProvider))
        throw invalidParams(`unknown modelProvider: ${p.modelProvider} (known: ${[...app.providers.ids()].join(", ")})`);
      const current = p.runtimeWorkspaceRoots?.length ? (await runtime.getRecord(p.threadId)).sandbox : runtime.defaults.sandbox;
      const sandbox = permissionsOrInvalid(() => resolveSandbox(p, current));
      return app.turns.start({ ...p, ...sandbox }, connection, responded);
    }),
  );

  // A review is a turn of the thread itself (delivery "inline"): reviewThreadId is the thread's id.
  conn.handle("review/start", (p, { connection, responded }) =>
    guarded(async () => {
      const { turn } = await app.turns.review(p.threadId, p.target, connection, responded);
      return { turn, reviewThreadId: p.threadId };
    }),
  );

  conn.handle("turn/interrupt", (p) => guarded(() => app.turns.interrupt(p.threadId, p.turnId)));

  conn.handle("turn/steer", (p) =>
    guarded(async () => {
      checkInputSize(p.input, app.limits.maxInputBytes);
      return app.turns.steer(p.threadId, p.expectedTurnId, p.input, p.clientUserMessageId ?? null);
    }),
  );

  conn.handle("model/list", (p) => {
    const models = app.models.filter((m) => !p.modelProvider || m.modelProvider === p.modelProvider);
    const start = p.cursor ? Number.parseInt(p.cursor, 10) : 0;
    if (!Number.isSafeInteger(start) || start < 0) throw invalidParams("Invalid params: bad cursor");
    const limit = p.limit ?? models.length;
    const data = models.slice(start, start + limit);
    return { data, nextCursor: start + limit < models.length ? String(start + limit) : null };
  });
}
