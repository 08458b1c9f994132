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
  conn.handle("account/read", () => {
    const current = app.providers.credentials().find((c) => c.id === app.runtime.defaults.modelProvider);
    return { account: current?.hasKey ? { type: "apiKey" as const } : null, userId: null, requiresOpenaiAuth: false, workspaceRouting: null };
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
