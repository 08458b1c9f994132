// Connecting: the token, the socket URL, initialize/initialized, reconnecting and resuming.
//
// A browser cannot set headers on a WebSocket, so the token (when the server requires one) goes
// in the socket URL's query, `ws://HOST:PORT/?token=…`, the server's documented browser form; the
// page never logs it, never puts it in the address bar, and keeps it in sessionStorage (this tab).
//
// The token field is shown only when the server needs one: a token is in use (from #token=… or
// typed earlier in this tab), or the server refused the socket while it is up and ready (a
// browser sees no HTTP status for a refused WebSocket, so GET /readyz tells "refused" from
// "starting" and "unreachable").

import { $, hideBanner, showBanner } from "./dom.js";
import { Rpc } from "./rpc.js";
import { state } from "./state.js";
import { loadThreads, resumeOpenThread } from "./threads.js";
import { loadCredentials, loadModels } from "./models.js";
import { onNotification, updateControls } from "./turns.js";
import { onServerRequest } from "./approvals.js";

export const TOKEN_KEY = "agent-app-server.token";

/** How often to try again while the server is still starting (once a second). */
const STARTING_RETRIES = 30;
let startingRetries = 0;

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

export function showTokenForm(show, focus = false) {
  $("connect-form").hidden = !show;
  if (show && focus) $("token").focus();
}

/** The token form was submitted: keep the token for this tab and connect with it. */
export function useToken(token) {
  state.token = token;
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
  void connect();
}

function setConnState(kind, text) {
  const el = $("conn-status");
  el.dataset.state = kind;
  el.textContent = text;
  el.title = kind === "connecting" ? "Connecting…" : "Connect again";
  document.body.dataset.conn = kind; // phones hide the token field while connected (style.css)
  state.connected = kind === "connected";
  updateControls();
}

/** The page's own origin; the token, if any, as `?token=` (browsers cannot send an Authorization header). */
function socketUrl(token) {
  const base = `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/`;
  return token ? `${base}?token=${encodeURIComponent(token)}` : base;
}

/** "ready" (it refused us: a token is needed or wrong), "starting", or "unreachable". */
async function serverHealth() {
  try {
    const res = await fetch("/readyz", { cache: "no-store" });
    return res.status === 503 ? "starting" : "ready";
  } catch {
    return "unreachable";
  }
}

/** The socket closed before it opened: say why, and show the token field when that is the cure. */
async function explainRefusal() {
  const health = await serverHealth();
  if (health === "starting" && startingRetries < STARTING_RETRIES) {
    startingRetries++;
    showBanner("The server is still starting: connecting again in a moment…");
    setTimeout(() => void connect(), 1000);
    return;
  }
  if (health !== "ready") {
    showBanner(health === "starting" ? "The server is still starting." : "Cannot reach the server: is it running?", "Connect again", connect);
    return;
  }
  showTokenForm(true, true);
  showBanner(
    state.token
      ? "The server refused the connection: the token was not accepted. Correct it above and press Connect."
      : "The server needs a token: enter it above (it is printed with the server's address, as …/#token=…) and press Connect.",
    "Connect again",
    connect,
  );
}

export async function connect() {
  if (state.rpc) {
    const old = state.rpc;
    state.rpc = null;
    old.close();
  }
  setConnState("connecting", "connecting…");
  let opened = false;
  const rpc = new Rpc(socketUrl(state.token), {
    notification: (method, params) => {
      if (state.rpc === rpc) onNotification(method, params);
    },
    request: (method, params, id) => onServerRequest(method, params, id),
    closed: ({ code, reason }) => {
      if (state.rpc !== rpc) return;
      state.rpc = null;
      setConnState("disconnected", "disconnected");
      for (const card of state.approvals.values()) card.markStale();
      if (!opened) {
        void explainRefusal();
        return;
      }
      const why = code === 1006 ? "the connection was lost" : `closed (${code}${reason ? `: ${reason}` : ""})`;
      showBanner(`Disconnected: ${why}.`, state.threadId ? "Reconnect and resume" : "Reconnect", connect);
    },
  });
  state.rpc = rpc;
  try {
    await rpc.opened;
    opened = true;
    await rpc.request("initialize", {
      clientInfo: { name: "agent-app-server-playground", title: "agent-app-server playground", version: "0.1.0" },
      capabilities: { experimentalApi: false },
    });
    rpc.notify("initialized", {});
  } catch (err) {
    if (state.rpc === rpc) {
      setConnState("disconnected", "disconnected");
      showBanner(`Could not connect: ${err.message}.`, "Connect again", connect);
    }
    return;
  }
  startingRetries = 0;
  setConnState("connected", "connected");
  hideBanner();
  showTokenForm(Boolean(state.token));
  void loadModels();
  void loadCredentials();
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
