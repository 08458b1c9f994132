// Models, the thread list, and opening, starting and forking threads.

import { $, h, relativeTime, scrollToEnd, shortId, showBanner, truncate } from "./dom.js";
import { call } from "./connection.js";
import { state } from "./state.js";
import { ensureTurn, setThreadStatus, setTurnStatus, updateControls } from "./turns.js";
import { upsertItem } from "./items.js";

export const NO_MESSAGES = "(no messages yet)";

export async function loadModels() {
  try {
    const { data } = await state.rpc.request("model/list", {});
    state.models = data;
  } catch {
    state.models = [];
  }
  const select = $("new-model");
  select.replaceChildren(
    ...state.models.map((m, i) => h("option", { value: String(i), selected: m.isDefault }, `${m.displayName} (${m.modelProvider})`)),
  );
}

export async function loadThreads(reset) {
  if (!state.rpc) return;
  const requestNo = ++state.threads.requestNo;
  const params = { limit: 30, sortKey: "updated_at", sortDirection: "desc" };
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
    if (t.id === state.threadId && label !== NO_MESSAGES) $("thread-title").textContent = truncate(label, 120);
  }
  if (reset && page.data.length === 0) list.append(h("li", { class: "empty" }, state.threads.search ? "No thread matches." : "No threads yet."));
  state.threads.cursor = page.nextCursor;
  $("more-threads").hidden = !page.nextCursor;
}

export function threadLabel(t) {
  return t.name || t.preview || NO_MESSAGES;
}

function threadEntry(t) {
  return h(
    "li",
    {},
    h(
      "button",
      {
        type: "button",
        class: `thread-entry${t.id === state.threadId ? " current" : ""}`,
        dataset: { threadId: t.id },
        title: t.id,
        onclick: () => {
          document.body.classList.remove("sidebar-open");
          openThread(t.id).catch(() => {});
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
export function showThread(response) {
  const { thread } = response;
  state.threadId = thread.id;
  state.settings = response;
  resetConversation();
  renderHeader(thread);
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
  const s = state.settings;
  const parts = [`thread ${thread.id}`];
  if (s) parts.push(`${s.model} (${s.modelProvider})`, `approval: ${typeof s.approvalPolicy === "string" ? s.approvalPolicy : "granular"}`);
  if (thread.forkedFromId) parts.push(`forked from ${shortId(thread.forkedFromId)}`);
  $("thread-meta").textContent = parts.join(" · ");
  // Where the agent's commands run: the thread's working directory.
  const cwd = $("thread-cwd");
  cwd.hidden = !s?.cwd;
  cwd.textContent = s?.cwd ? `runs in ${s.cwd}` : "";
  cwd.title = s?.cwd ? "The thread's working directory: commands and file changes happen here" : "";
}

async function leaveOpenThread() {
  const previous = state.threadId;
  if (previous && state.rpc) state.rpc.request("thread/unsubscribe", { threadId: previous }).catch(() => {});
}

export async function openThread(threadId) {
  if (threadId === state.threadId) return;
  await leaveOpenThread();
  const response = await call("thread/resume", { threadId });
  showThread(response);
}

/** After a reconnect: subscribe again, and replay what was missed (persisted events after lastSeq). */
export async function resumeOpenThread() {
  const threadId = state.threadId;
  if (state.lastSeq === 0) {
    state.threadId = null;
    return openThread(threadId);
  }
  const response = await call("thread/resume", { threadId, afterSeq: state.lastSeq, excludeTurns: true });
  state.settings = response;
  renderHeader(response.thread);
  setThreadStatus(response.thread.status);
}

function newThreadParams() {
  const params = {
    approvalPolicy: $("new-approval").value,
    sandbox: $("new-sandbox").value,
  };
  const cwd = $("new-cwd").value.trim();
  if (cwd) params.cwd = cwd;
  const model = state.models[Number($("new-model").value)];
  if (model) {
    params.model = model.model;
    params.modelProvider = model.modelProvider;
  }
  return params;
}

export async function startThread() {
  await leaveOpenThread();
  const response = await call("thread/start", newThreadParams());
  showThread(response);
  // The server's default directory, for the next thread's placeholder.
  if (!$("new-cwd").value.trim()) $("new-cwd").placeholder = `server default (${response.cwd})`;
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
