/** initialize: the handshake. */
import os from "node:os";
import type { Connection } from "../connection.js";
import type { AppContext } from "../../app-context.js";

export function registerSessionHandlers(conn: Connection, app: AppContext): void {
  conn.handle("initialize", (p, { connection }) => {
    connection.completeHandshake(p.clientInfo.name, p.capabilities?.optOutNotificationMethods);
    app.log.info({ connectionId: connection.id, client: p.clientInfo.name, clientVersion: p.clientInfo.version }, "client initialized");
    return {
      userAgent: `agent-app-server/${app.version} (${os.platform()} ${os.release()}; ${os.arch()}) ${p.clientInfo.name}/${p.clientInfo.version}`,
      codexHome: app.home,
      platformFamily: process.platform === "win32" ? "windows" : "unix",
      platformOs: process.platform === "darwin" ? "macos" : process.platform === "win32" ? "windows" : process.platform,
    };
  });
  conn.peer.onNotification("initialized", () => {});
}
