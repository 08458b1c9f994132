// The agent-app-server playground: plain ES modules loaded natively by the browser — no framework,
// no build step. It speaks the same JSON-RPC 2.0 protocol as any other client, over a WebSocket to
// the page's own origin: initialize → initialized → thread/start | thread/resume → turn/start, then
// renders the notifications as they stream and answers the server's approval requests.
//
//   modules/dom.js             DOM helpers, the banner
//   modules/rpc.js             JSON-RPC over the WebSocket
//   modules/state.js           the page's state
//   modules/connection.js      token (shown when needed), connect, reconnect + resume
//   modules/threads.js         thread list, open / start / fork, a new thread, recent folders
//   modules/thread-actions.js  rename, archive, copy the id
//   modules/models.js          the model picker, the missing-key warning
//   modules/turns.js           send, stop, steer, notifications, turns
//   modules/items.js           one renderer per item type
//   modules/markdown.js        agent text as Markdown (markdown-it, raw HTML off; highlight.js)
//   modules/clipboard.js       copy buttons
//   modules/approvals.js       approval cards
//   modules/theme.js           light / dark / the system's
//   modules/shortcuts.js       keyboard shortcuts
//
// Model and user content goes into the page as text (textContent, text nodes); the one exception
// is agent text and reasoning, rendered by markdown-it with raw HTML disabled (modules/markdown.js).

import { $, hideBanner } from "./modules/dom.js";
import { connect, showTokenForm, TOKEN_KEY, tokenFromFragment, useToken } from "./modules/connection.js";
import { handleCodeCopyClicks } from "./modules/clipboard.js";
import { updateKeyWarning } from "./modules/models.js";
import { state } from "./modules/state.js";
import { initShortcuts } from "./modules/shortcuts.js";
import { initTheme } from "./modules/theme.js";
import { initThreadActions } from "./modules/thread-actions.js";
import { loadThreads, newDraft, renderRecentCwds, showDraftCwd, startThread } from "./modules/threads.js";
import { interrupt, send, updateControls } from "./modules/turns.js";

function init() {
  initTheme();
  const fromFragment = tokenFromFragment();
  state.token = fromFragment ?? sessionStorage.getItem(TOKEN_KEY) ?? "";
  if (fromFragment !== null) sessionStorage.setItem(TOKEN_KEY, fromFragment);
  $("token").value = state.token;
  showTokenForm(Boolean(state.token));

  $("connect-form").addEventListener("submit", (e) => {
    e.preventDefault();
    useToken($("token").value);
  });
  $("conn-status").addEventListener("click", () => void connect());
  // Another user's token: the token field, emptied, focused.
  $("signed-in").addEventListener("click", () => {
    $("token").value = "";
    showTokenForm(true, true);
  });
  $("new-thread").addEventListener("click", () => void startThread().catch(() => {}));
  $("stop").addEventListener("click", () => void interrupt());
  $("steer").addEventListener("click", () => void send());
  $("turn-model").addEventListener("change", updateKeyWarning);
  $("new-cwd").addEventListener("input", showDraftCwd);
  $("refresh-threads").addEventListener("click", () => void loadThreads(true));
  $("more-threads").addEventListener("click", () => void loadThreads(false));
  $("show-archived").addEventListener("change", (e) => {
    state.threads.archived = e.target.checked;
    $("threads-heading").textContent = state.threads.archived ? "Archived" : "Threads";
    void loadThreads(true);
  });
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
  handleCodeCopyClicks($("conversation"));
  initThreadActions();
  initShortcuts();
  renderRecentCwds();

  void newDraft();
  updateControls();
  void connect();
}

init();
