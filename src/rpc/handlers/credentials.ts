/**
 * account/read and modelProvider/list: the model credentials, as Codex's clients ask for them.
 * No OpenAI login is ever required (the server uses the SDKs' keys); `account` says whether the
 * default provider has a key, and each provider says which variable its key comes from — or that
 * it needs none (a local server) — so a client can warn before the first turn fails.
 */
import type { AppContext } from "../../app-context.js";
import { displayableBaseURL } from "../../runtime/provider-credentials.js";
import type { Connection } from "../connection.js";

export function registerCredentialHandlers(conn: Connection, app: AppContext): void {
  conn.handle("account/read", (_p, { connection }) => {
    const current = app.providers.credentials().find((c) => c.id === app.runtime.defaults.modelProvider);
    const who = connection.principal;
    // `user` (our extension): who this connection is signed in as (the playground shows it).
    const user = { userId: who.id, name: who.name, admin: who.admin, roots: who.roots ? [...who.roots] : null, dangerFullAccess: who.dangerFullAccess, signIn: who.signIn };
    // `userId` keeps Codex's meaning (a ChatGPT user id: none here).
    return { account: current?.hasKey ? { type: "apiKey" as const } : null, userId: null, requiresOpenaiAuth: false, workspaceRouting: null, user };
  });

  conn.handle("modelProvider/list", () => ({
    data: app.providers.credentials().map((c) => ({
      id: c.id,
      name: c.name,
      canEdit: false,
      baseUrl: displayableBaseURL(c.baseURL),
      settings: { type: "customGateway" as const, auth: c.keyless ? { mode: "none" as const } : { mode: "environmentVariable" as const, envKey: c.envKey } },
    })),
    defaultProviderId: app.runtime.defaults.modelProvider,
    canChangeDefault: false,
  }));
}
