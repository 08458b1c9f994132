/** execpolicy/rule/list and execpolicy/rule/remove: the saved approval rules (src/protocol/execpolicy.ts). */
import type { AppContext } from "../../app-context.js";
import type { Connection } from "../connection.js";
import { invalidRequest } from "../errors.js";

/** A user sees and removes its own rules (docs/teams.md); an admin, every rule. */
export function registerExecPolicyHandlers(conn: Connection, app: AppContext): void {
  const owner = (c: Connection) => (c.principal.admin ? null : c.principal.id);
  conn.handle("execpolicy/rule/list", async (_p, { connection }) => ({ data: await app.execPolicy.list(owner(connection)) }));

  conn.handle("execpolicy/rule/remove", async (p, { connection }) => {
    if (!(await app.execPolicy.remove(p.id, owner(connection)))) throw invalidRequest(`no saved approval rule with id ${p.id}`);
    return {};
  });
}
