// Connecting: the token, the socket URL, initialize/initialized, reconnecting and resuming.
//
// A browser cannot set headers on a WebSocket, so the token (when the server requires one) goes
// in the socket URL's query, `ws://HOST:PORT/?token=…`, the server's documented browser form; the
// page never logs it, never puts it in the address bar, and keeps it in sessionStorage (this tab).

import { $, hideBanner, showBanner } from "./dom.js";
import { Rpc } from "./rpc.js";
import { state } from "./state.js";
import { loadModels, loadThreads, resumeOpenThread } from "./threads.js";
import { onNotification, updateControls } from "./turns.js";
import { onServerRequest } from "./approvals.js";

export const TOKEN_KEY = "agent-app-server.token";

/** A token in the fragment (#token=…, never sent to the server) is taken and removed from the address bar. */
export function tokenFromFragment() {
  const params = new URLSearchParams(location.hash.slice(1));
  const token = params.get("token");
  if (token === null) return null;
  params.delete("token");
  const rest = params.toString();
  history.replaceState(null, "", location.pathname + location.search + (rest ? `#${rest}` : ""));
  return token;
}

function setConnState(kind, text) {
  const el = $("conn-status");
  el.dataset.state = kind;
  el.textContent = text;
  state.connected = kind === "connected";
  updateControls();
}

/** The page's own origin; the token, if any, as `?token=` (browsers cannot send an Authorization header). */
function socketUrl(token) {
  const base = `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/`;
  return token ? `${base}?token=${encodeURIComponent(token)}` : base;
}

export async function connect() {
  if (state.rpc) {
    const old = state.rpc;
    state.rpc = null;
    old.close();
  }
  setConnState("connecting", "connecting…");
  const rpc = new Rpc(socketUrl(state.token), {
    notification: (method, params) => {
      if (state.rpc === rpc) onNotification(method, params);
    },
    request: (method, params, id) => onServerRequest(method, params, id),
    closed: ({ code, reason }) => {
      if (state.rpc !== rpc) return;
      state.rpc = null;
      const why = code === 1006 ? "could not reach the server or it refused the connection (is a token needed?)" : `closed (${code}${reason ? `: ${reason}` : ""})`;
      setConnState("disconnected", "disconnected");
      showBanner(`Disconnected: ${why}.`, state.threadId ? "Reconnect and resume" : "Reconnect", connect);
      for (const card of state.approvals.values()) card.markStale();
    },
  });
  state.rpc = rpc;
  try {
    await rpc.opened;
    await rpc.request("initialize", {
      clientInfo: { name: "agent-app-server-playground", title: "agent-app-server playground", version: "0.1.0" },
      capabilities: { experimentalApi: false },
    });
    rpc.notify("initialized", {});
  } catch (err) {
    if (state.rpc === rpc) {
      setConnState("disconnected", "disconnected");
      showBanner(`Could not connect: ${err.message}. Check the token and connect again.`, "Reconnect", connect);
    }
    return;
  }
  setConnState("connected", "connected");
  hideBanner();
  void loadModels();
  void loadThreads(true);
  if (state.threadId) await resumeOpenThread().catch(() => {});
}

/** A request whose failure is shown in the banner (and rethrown). */
export async function call(method, params) {
  if (!state.rpc) throw new Error("not connected");
  try {
    return await state.rpc.request(method, params);
  } catch (err) {
    showBanner(`${method} failed: ${err.message}`);
    throw err;
  }
}
