// What the open thread's header does: rename it (thread/name/set), archive or unarchive it
// (thread/archive, thread/unarchive), copy its full id.

import { $, showBanner, truncate } from "./dom.js";
import { call } from "./connection.js";
import { copyWithFeedback } from "./clipboard.js";
import { state } from "./state.js";
import { loadThreads, newDraft, NO_MESSAGES, openThread, renderHeader } from "./threads.js";

export function renaming() {
  return !$("rename-input").hidden;
}

/** The title becomes a field: Enter (or leaving it) saves, Esc cancels. */
export function startRename() {
  if (!state.threadId || renaming()) return;
  const title = $("thread-title");
  const input = $("rename-input");
  input.value = title.textContent === NO_MESSAGES ? "" : title.textContent;
  input.placeholder = "Name this thread";
  title.hidden = true;
  $("rename").hidden = true;
  input.hidden = false;
  input.focus();
  input.select();
}

function endRename() {
  $("rename-input").hidden = true;
  $("thread-title").hidden = false;
  $("rename").hidden = !state.threadId;
}

async function commitRename() {
  if (!renaming()) return;
  const threadId = state.threadId;
  const name = $("rename-input").value.trim();
  const before = $("thread-title").textContent;
  endRename();
  if (!threadId || !name || name === before) return;
  $("thread-title").textContent = truncate(name, 120);
  try {
    await call("thread/name/set", { threadId, name });
  } catch {
    $("thread-title").textContent = before; // the banner says why
    return;
  }
  void loadThreads(true);
}

export function initRename() {
  $("rename").addEventListener("click", startRename);
  $("thread-title").addEventListener("dblclick", startRename);
  const input = $("rename-input");
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.isComposing) {
      e.preventDefault();
      void commitRename();
    } else if (e.key === "Escape") {
      // Only the rename is cancelled, not the running turn.
      e.preventDefault();
      e.stopPropagation();
      endRename();
    }
  });
  input.addEventListener("blur", () => void commitRename());
}

/** Archive: the thread leaves the list and the page, with Undo; an archived thread: Unarchive. */
async function toggleArchive() {
  const threadId = state.threadId;
  if (!threadId) return;
  if (state.openArchived) {
    await call("thread/unarchive", { threadId });
    state.openArchived = false;
    renderHeader((await call("thread/read", { threadId })).thread);
    void loadThreads(true);
    return;
  }
  const title = $("thread-title").textContent;
  await call("thread/archive", { threadId });
  await newDraft();
  void loadThreads(true);
  showBanner(`Archived “${truncate(title, 60)}”.`, "Undo", async () => {
    await call("thread/unarchive", { threadId });
    await openThread(threadId);
    void loadThreads(true);
  });
}

export function initThreadActions() {
  initRename();
  $("archive").addEventListener("click", () => void toggleArchive().catch(() => {}));
  $("thread-id").addEventListener("click", () => {
    const id = $("thread-id").dataset.threadId;
    if (id) void copyWithFeedback($("thread-id"), id, "copied");
  });
}
