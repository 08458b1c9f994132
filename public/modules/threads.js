// The thread list, and opening, starting and forking threads; a new thread that starts with the
// first message (Ctrl/⌘+K); the folders new threads ran in, offered again.

import { $, h, relativeTime, scrollToEnd, shortId, showBanner, truncate } from "./dom.js";
import { call } from "./connection.js";
import { state } from "./state.js";
import { ensureTurn, setThreadStatus, setTurnStatus, updateControls } from "./turns.js";
import { upsertItem } from "./items.js";
import { pickedModel, showModelOf } from "./models.js";

export const NO_MESSAGES = "(no messages yet)";
const NEW_THREAD = "New thread";
const RECENT_CWDS_KEY = "agent-app-server.recent-cwds";
const RECENT_CWDS = 8;

export async function loadThreads(reset) {
  if (!state.rpc) return;
  const requestNo = ++state.threads.requestNo;
  const params = { limit: 30, sortKey: "updated_at", sortDirection: "desc", archived: state.threads.archived };
  if (state.threads.search) params.searchTerm = state.threads.search;
  if (!reset && state.threads.cursor) params.cursor = state.threads.cursor;
  let page;
  try {
    page = await state.rpc.request("thread/list", params);
  } catch (err) {
    showBanner(`thread/list failed: ${err.message}`);
    return;
  }
  if (requestNo !== state.threads.requestNo) return; // a newer search superseded this one
  const list = $("thread-list");
  if (reset) list.replaceChildren();
  for (const t of page.data) {
    const label = threadLabel(t);
    // The open thread may already have a title from its first message (the server's preview comes later).
    list.append(threadEntry(t.id === state.threadId && label === NO_MESSAGES ? { ...t, preview: state.draftTitle ?? "" } : t));
    if (t.id === state.threadId && label !== NO_MESSAGES && $("rename-input").hidden) $("thread-title").textContent = truncate(label, 120);
  }
  if (reset && page.data.length === 0) {
    const none = state.threads.archived ? "No archived threads." : "No threads yet.";
    list.append(h("li", { class: "empty" }, state.threads.search ? "No thread matches." : none));
  }
  state.threads.cursor = page.nextCursor;
  $("more-threads").hidden = !page.nextCursor;
}

export function threadLabel(t) {
  return t.name || t.preview || NO_MESSAGES;
}

function threadEntry(t) {
  const archived = state.threads.archived;
  return h(
    "li",
    {},
    h(
      "button",
      {
        type: "button",
        class: `thread-entry${t.id === state.threadId ? " current" : ""}`,
        dataset: { threadId: t.id },
        title: `thread ${t.id}`,
        onclick: () => {
          document.body.classList.remove("sidebar-open");
          openThread(t.id, { archived }).catch(() => {});
        },
      },
      h("span", { class: "thread-entry-title" }, truncate(threadLabel(t), 80)),
      h(
        "span",
        { class: "thread-entry-meta" },
        `${relativeTime(t.updatedAt)} · ${shortId(t.id)}`,
        t.forkedFromId ? ` · fork of ${shortId(t.forkedFromId)}` : "",
        t.status?.type === "active" ? h("span", { class: "dot active", title: "running" }) : null,
      ),
    ),
  );
}

function markCurrentInList() {
  for (const el of document.querySelectorAll(".thread-entry")) el.classList.toggle("current", el.dataset.threadId === state.threadId);
}

/** The open thread has its first message: title it with that until the server has a preview. */
export function titleFromFirstMessage(text) {
  if ($("thread-title").textContent !== NO_MESSAGES || !text) return;
  state.draftTitle = truncate(text.split("\n")[0], 120);
  $("thread-title").textContent = state.draftTitle;
  const entry = document.querySelector(`.thread-entry[data-thread-id="${CSS.escape(state.threadId)}"] .thread-entry-title`);
  if (entry && entry.textContent === NO_MESSAGES) entry.textContent = truncate(text.split("\n")[0], 80);
}

function resetConversation() {
  state.turns.clear();
  state.items.clear();
  state.approvals.clear();
  state.activeTurnId = null;
  state.lastSeq = 0;
  state.draftTitle = null;
  $("conversation").replaceChildren();
}

/** Renders a thread/start, thread/resume or thread/fork response. */
export function showThread(response, { archived = false } = {}) {
  const { thread } = response;
  state.threadId = thread.id;
  state.settings = response;
  state.openArchived = archived;
  resetConversation();
  renderHeader(thread);
  showModelOf(response);
  for (const turn of thread.turns ?? []) {
    const t = ensureTurn(turn);
    for (const item of turn.items ?? []) upsertItem(turn.id, item, true);
    setTurnStatus(t, turn);
    if (turn.status === "inProgress") state.activeTurnId = turn.id;
  }
  if ((thread.turns ?? []).length === 0) $("conversation").append(h("p", { class: "empty" }, "No turns yet: type below to start one."));
  setThreadStatus(thread.status);
  markCurrentInList();
  updateControls();
  scrollToEnd(true);
}

export function renderHeader(thread) {
  $("thread-title").textContent = truncate(threadLabel(thread), 120);
  renderMeta(thread);
}

/** Everything in the header but the title: id, model, policy, fork, folder, actions. */
export function renderMeta(thread) {
  const s = state.settings;
  // The id is long: its last 8 characters, the whole id on hover and copied on click.
  const id = $("thread-id");
  id.hidden = false;
  delete id.dataset.copied;
  id.textContent = `#${shortId(thread.id)}`;
  id.title = `thread ${thread.id} — click to copy the full id`;
  id.dataset.threadId = thread.id;
  const parts = [];
  if (s) parts.push(`${s.model} (${s.modelProvider})`, `approval: ${typeof s.approvalPolicy === "string" ? s.approvalPolicy : "granular"}`);
  if (thread.forkedFromId) parts.push(`forked from ${shortId(thread.forkedFromId)}`);
  if (state.openArchived) parts.push("archived");
  $("thread-meta").textContent = parts.join(" · ");
  // Where the agent's commands run: the thread's working directory.
  const cwd = $("thread-cwd");
  cwd.hidden = !s?.cwd;
  cwd.textContent = s?.cwd ? `runs in ${s.cwd}` : "";
  cwd.title = s?.cwd ? "The thread's working directory: commands and file changes happen here" : "";
  $("rename").hidden = false;
  $("archive").hidden = false;
  $("archive").textContent = state.openArchived ? "Unarchive" : "Archive";
}

async function leaveOpenThread() {
  const previous = state.threadId;
  if (previous && state.rpc) state.rpc.request("thread/unsubscribe", { threadId: previous }).catch(() => {});
}

export async function openThread(threadId, { archived = false } = {}) {
  if (threadId === state.threadId) return;
  await leaveOpenThread();
  const response = await call("thread/resume", { threadId });
  showThread(response, { archived });
}

/** After a reconnect: subscribe again, and replay what was missed (persisted events after lastSeq). */
export async function resumeOpenThread() {
  const threadId = state.threadId;
  if (state.lastSeq === 0) {
    state.threadId = null;
    return openThread(threadId, { archived: state.openArchived });
  }
  const response = await call("thread/resume", { threadId, afterSeq: state.lastSeq, excludeTurns: true });
  state.settings = response;
  renderHeader(response.thread);
  setThreadStatus(response.thread.status);
}

/**
 * No thread open: the first message starts one, with the settings on the left and the picked
 * model (Ctrl/⌘+K). Nothing is created before that, so trying it leaves no empty threads behind.
 */
export async function newDraft() {
  await leaveOpenThread();
  state.threadId = null;
  state.settings = null;
  state.openArchived = false;
  resetConversation();
  $("thread-title").textContent = NEW_THREAD;
  $("thread-id").hidden = true;
  $("thread-meta").textContent = "starts with your first message";
  $("thread-cwd").hidden = true;
  $("rename").hidden = true;
  $("archive").hidden = true;
  setThreadStatus(null);
  $("conversation").append(
    h("p", { class: "empty" }, "Type below to start a new thread. Its folder, approval policy and sandbox are set on the left.", h("span", { class: "draft-cwd" })),
  );
  showDraftCwd();
  markCurrentInList();
  updateControls();
  document.body.classList.remove("sidebar-open");
  $("input").focus();
}

/** The new thread's folder, as the working-directory field says now. */
export function showDraftCwd() {
  const el = document.querySelector("#conversation .draft-cwd");
  if (!el || state.threadId) return;
  const folder = $("new-cwd").value.trim() || (state.serverCwd ? `${state.serverCwd} (the server's default)` : "the server's default folder");
  el.textContent = `runs in ${folder}`;
}

function newThreadParams() {
  const params = { approvalPolicy: $("new-approval").value, sandbox: $("new-sandbox").value };
  const cwd = $("new-cwd").value.trim();
  if (cwd) params.cwd = cwd;
  const model = pickedModel();
  if (model) Object.assign(params, model);
  return params;
}

export async function startThread() {
  await leaveOpenThread();
  const params = newThreadParams();
  const response = await call("thread/start", params);
  if (!params.cwd) {
    state.serverCwd = response.cwd;
    $("new-cwd").placeholder = `server default (${response.cwd})`;
  }
  rememberCwd(response.cwd);
  showThread(response);
  document.body.classList.remove("sidebar-open");
  void loadThreads(true);
  $("input").focus();
  return response.thread.id;
}

/** A fork gets its own name ("… (fork)"), so that it can be told from its parent in every list. */
export async function forkAt(turnId) {
  const from = state.threadId;
  const parentTitle = $("thread-title").textContent;
  const response = await call("thread/fork", { threadId: from, lastTurnId: turnId });
  if (from) state.rpc?.request("thread/unsubscribe", { threadId: from }).catch(() => {});
  const name = `${truncate(parentTitle === NO_MESSAGES ? `thread ${shortId(from)}` : parentTitle, 100)} (fork)`;
  await state.rpc?.request("thread/name/set", { threadId: response.thread.id, name }).catch(() => {});
  showThread({ ...response, thread: { ...response.thread, name } });
  void loadThreads(true);
}

// ---- the folders new threads ran in (this browser's localStorage), newest first ----

function recentCwds() {
  try {
    const list = JSON.parse(localStorage.getItem(RECENT_CWDS_KEY) ?? "[]");
    return Array.isArray(list) ? list.filter((x) => typeof x === "string") : [];
  } catch {
    return [];
  }
}

function rememberCwd(cwd) {
  if (!cwd) return;
  const list = [cwd, ...recentCwds().filter((x) => x !== cwd)].slice(0, RECENT_CWDS);
  try {
    localStorage.setItem(RECENT_CWDS_KEY, JSON.stringify(list));
  } catch {
    // storage disabled: nothing remembered
  }
  renderRecentCwds();
}

/** The working-directory field offers them (a datalist: type, or pick one). */
export function renderRecentCwds() {
  $("recent-cwds").replaceChildren(...recentCwds().map((cwd) => h("option", { value: cwd })));
}
