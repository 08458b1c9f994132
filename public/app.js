// The agent-app-server playground: plain ES modules loaded natively by the browser — no framework,
// no build step. It speaks the same JSON-RPC 2.0 protocol as any other client, over a WebSocket to
// the page's own origin: initialize → initialized → thread/start | thread/resume → turn/start, then
// renders the notifications as they stream and answers the server's approval requests.
//
//   modules/dom.js          DOM helpers, the banner
//   modules/rpc.js          JSON-RPC over the WebSocket
//   modules/state.js        the page's state
//   modules/connection.js   token, connect, reconnect + resume
//   modules/threads.js      models, thread list, open / start / fork
//   modules/turns.js        send, interrupt, notifications, turns
//   modules/items.js        one renderer per item type
//   modules/markdown.js     agent text as Markdown (markdown-it, raw HTML off)
//   modules/approvals.js    approval cards
//
// Model and user content goes into the page as text (textContent, text nodes); the one exception
// is agent text and reasoning, rendered by markdown-it with raw HTML disabled (modules/markdown.js).

import { $, hideBanner } from "./modules/dom.js";
import { connect, TOKEN_KEY, tokenFromFragment } from "./modules/connection.js";
import { state } from "./modules/state.js";
import { loadThreads, startThread } from "./modules/threads.js";
import { interrupt, send, updateControls } from "./modules/turns.js";

function init() {
  const fromFragment = tokenFromFragment();
  state.token = fromFragment ?? sessionStorage.getItem(TOKEN_KEY) ?? "";
  if (fromFragment !== null) sessionStorage.setItem(TOKEN_KEY, fromFragment);
  $("token").value = state.token;

  $("connect-form").addEventListener("submit", (e) => {
    e.preventDefault();
    state.token = $("token").value;
    if (state.token) sessionStorage.setItem(TOKEN_KEY, state.token);
    else sessionStorage.removeItem(TOKEN_KEY);
    void connect();
  });
  $("new-thread").addEventListener("click", () => void startThread().catch(() => {}));
  $("interrupt").addEventListener("click", () => void interrupt());
  $("refresh-threads").addEventListener("click", () => void loadThreads(true));
  $("more-threads").addEventListener("click", () => void loadThreads(false));
  $("banner-close").addEventListener("click", hideBanner);
  // Narrow screens: the side panel is a drawer behind this button.
  $("toggle-sidebar").addEventListener("click", () => {
    const open = document.body.classList.toggle("sidebar-open");
    $("toggle-sidebar").setAttribute("aria-expanded", String(open));
  });

  let searchTimer = 0;
  $("thread-search").addEventListener("input", (e) => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(() => {
      state.threads.search = e.target.value.trim();
      void loadThreads(true);
    }, 200);
  });

  $("composer").addEventListener("submit", (e) => {
    e.preventDefault();
    void send();
  });
  $("input").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      void send();
    }
  });

  updateControls();
  void connect();
}

init();
