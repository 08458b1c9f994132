/** execpolicy/rule/list and execpolicy/rule/remove: the saved approval rules (src/protocol/execpolicy.ts). */
import type { AppContext } from "../../app-context.js";
import type { Connection } from "../connection.js";
import { invalidRequest } from "../errors.js";

export function registerExecPolicyHandlers(conn: Connection, app: AppContext): void {
  conn.handle("execpolicy/rule/list", async () => ({ data: await app.execPolicy.list() }));

  conn.handle("execpolicy/rule/remove", async (p) => {
    if (!(await app.execPolicy.remove(p.id))) throw invalidRequest(`no saved approval rule with id ${p.id}`);
    return {};
  });
}
