/** The ACP agent app: each ACP method the agent answers, handed to the bridge (bridge.ts). */
import { agent, type AgentApp } from "@agentclientprotocol/sdk/unstable";
import type { AcpBridge } from "./bridge.js";

export function acpAgent(bridge: AcpBridge): AgentApp {
  return agent({ name: "agent-app-server" })
    .onConnect((connection) => bridge.attach(connection.client))
    .onRequest("initialize", ({ params }) => bridge.initialize(params.clientCapabilities))
    .onRequest("authenticate", async ({ params }) => {
      await bridge.authenticate(params.methodId);
      return {};
    })
    .onRequest("session/new", ({ params }) => bridge.newSession(params))
    .onRequest("session/load", ({ params }) => bridge.loadSession(params, true))
    .onRequest("session/resume", ({ params }) => bridge.loadSession(params, false))
    .onRequest("session/fork", ({ params }) => bridge.forkSession(params))
    .onRequest("session/list", ({ params }) => bridge.listSessions(params))
    .onRequest("session/close", async ({ params }) => {
      await bridge.closeSession(params.sessionId);
      return {};
    })
    .onRequest("session/archive", async ({ params }) => {
      await bridge.archive(params.sessionId, true);
      return {};
    })
    .onRequest("session/unarchive", async ({ params }) => {
      await bridge.archive(params.sessionId, false);
      return {};
    })
    .onRequest("session/set_title", ({ params }) => bridge.setTitle(params.sessionId, params.title))
    .onRequest("session/set_mode", ({ params }) => {
      bridge.setMode(params.sessionId, params.modeId);
      return {};
    })
    .onRequest("session/set_config_option", ({ params }) => bridge.setConfigOption(params.sessionId, params.configId, params.value))
    .onRequest("session/prompt", ({ params, signal }) => bridge.prompt(params.sessionId, params.prompt, signal))
    .onNotification("session/cancel", ({ params }) => bridge.cancel(params.sessionId));
}
