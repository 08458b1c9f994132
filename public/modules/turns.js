// Sending, interrupting, the notifications of the open thread, and the turns they build.

import { $, h, scrollToEnd, truncate } from "./dom.js";
import { call } from "./connection.js";
import { state } from "./state.js";
import { loadThreads, startThread, forkAt, renderMeta, titleFromFirstMessage } from "./threads.js";
import { modelOverrides } from "./models.js";
import { diffView, upsertItem } from "./items.js";

/**
 * Enter or Send: a new turn (starting the thread first when none is open), with the picked model
 * when it differs from the thread's. While a turn runs, the message is added to it instead
 * (turn/steer: "Add to turn"), read by the agent before its next step.
 */
export async function send() {
  const input = $("input");
  const text = input.value.trim();
  if (!text || !state.connected) return;
  const userInput = [{ type: "text", text, text_elements: [] }];
  $("send").disabled = true;
  $("steer").disabled = true;
  try {
    const threadId = state.threadId ?? (await startThread());
    if (state.activeTurnId) {
      await call("turn/steer", { threadId, expectedTurnId: state.activeTurnId, input: userInput });
    } else {
      const model = modelOverrides();
      const { turn } = await call("turn/start", { threadId, input: userInput, ...model });
      if (model.model) {
        // The thread runs on it from now on.
        state.settings = { ...state.settings, ...model };
        renderMeta(state.settings.thread);
      }
      ensureTurn(turn);
      state.activeTurnId = turn.id;
      titleFromFirstMessage(text);
    }
    input.value = "";
  } catch {
    // shown in the banner
  } finally {
    updateControls();
  }
}

/** Stop (or Esc): interrupts the running turn. */
export async function interrupt() {
  if (!state.threadId || !state.activeTurnId) return;
  $("stop").disabled = true;
  try {
    await call("turn/interrupt", { threadId: state.threadId, turnId: state.activeTurnId });
  } catch {
    $("stop").disabled = false;
  }
}

/** While a turn runs, Stop takes Send's place and "Add to turn" (steer) appears beside it. */
export function updateControls() {
  const running = Boolean(state.activeTurnId);
  $("send").hidden = running;
  $("send").disabled = !state.connected;
  $("stop").hidden = !running;
  if (!running) $("stop").disabled = false;
  $("steer").hidden = !running;
  $("steer").disabled = !state.connected;
  $("input").placeholder = running ? "The agent is working… a message here is added to the running turn" : state.threadId ? "Ask the agent…" : "Ask the agent… (starts a new thread)";
  $("composer-hint").textContent = running ? "Enter adds to the turn · Esc stops" : "Enter sends · Shift+Enter new line";
  $("new-thread").disabled = !state.connected;
  for (const t of state.turns.values()) t.fork.disabled = !state.connected || t.turn.status === "inProgress";
}

function threadIdOf(params) {
  return params.threadId ?? params.thread?.id ?? null;
}

export function onNotification(method, params) {
  const threadId = threadIdOf(params);
  if (method === "thread/started" || method === "thread/archived" || method === "thread/unarchived") void loadThreads(true);
  if (!threadId || threadId !== state.threadId) return;
  if (typeof params.seq === "number") state.lastSeq = Math.max(state.lastSeq, params.seq);

  switch (method) {
    case "thread/status/changed":
      setThreadStatus(params.status);
      break;
    case "thread/name/updated":
      if (params.threadName) $("thread-title").textContent = truncate(params.threadName, 120);
      void loadThreads(true);
      break;
    case "turn/started": {
      const t = ensureTurn(params.turn);
      setTurnStatus(t, params.turn);
      state.activeTurnId = params.turn.id;
      updateControls();
      break;
    }
    case "turn/completed": {
      const t = ensureTurn(params.turn);
      setTurnStatus(t, params.turn);
      if (state.activeTurnId === params.turn.id) state.activeTurnId = null;
      for (const card of state.approvals.values()) if (card.turnId === params.turn.id) card.resolve("turn ended");
      updateControls();
      void loadThreads(true);
      break;
    }
    case "item/started":
    case "item/completed":
      upsertItem(params.turnId, params.item, method === "item/completed");
      if (params.item.type === "userMessage") titleFromFirstMessage(params.item.content?.find((c) => c.type === "text")?.text ?? "");
      break;
    case "item/agentMessage/delta":
    case "item/reasoning/summaryTextDelta":
    case "item/reasoning/textDelta":
    case "item/commandExecution/outputDelta":
      state.items.get(params.itemId)?.delta(method, params);
      break;
    case "turn/plan/updated":
      renderPlan(params);
      break;
    case "turn/diff/updated":
      renderTurnDiff(params);
      break;
    case "thread/tokenUsage/updated": {
      const total = params.tokenUsage?.total;
      if (total) $("thread-status").title = `tokens: ${total.totalTokens} total (${total.inputTokens} in, ${total.cachedInputTokens} cached, ${total.outputTokens} out)`;
      break;
    }
    case "serverRequest/resolved":
      state.approvals.get(params.requestId)?.resolve("answered");
      break;
    case "error": {
      const t = state.turns.get(params.turnId);
      if (!t) break;
      const message = params.error?.message ?? "error";
      if (params.willRetry) t.body.append(h("div", { class: "notice warn" }, `${message} — retrying…`));
      else {
        // The turn's own error slot: turn/completed carries the same error, shown once.
        t.error.hidden = false;
        t.error.textContent = message;
      }
      break;
    }
  }
  scrollToEnd();
}

export function setThreadStatus(status) {
  const badge = $("thread-status");
  badge.hidden = !status;
  if (!status) return;
  const waiting = status.type === "active" && status.activeFlags?.includes("waitingOnApproval");
  const text = waiting ? "waiting for approval" : status.type === "active" ? "running" : status.type === "notLoaded" ? "not loaded" : status.type === "systemError" ? "error" : "idle";
  badge.textContent = text;
  badge.dataset.status = waiting ? "waiting" : status.type;
}

export function ensureTurn(turn) {
  let t = state.turns.get(turn.id);
  if (t) return t;
  const conversation = $("conversation");
  conversation.querySelector(":scope > .empty")?.remove();
  const badge = h("span", { class: "badge" });
  const fork = h("button", { type: "button", class: "small", title: "Start a new thread with the history up to the end of this turn", onclick: () => forkAt(turn.id).catch(() => {}) }, "Fork from here");
  const body = h("div", { class: "turn-body" });
  const error = h("div", { class: "notice error", hidden: true });
  const el = h(
    "section",
    { class: "turn", dataset: { turnId: turn.id, status: turn.status } },
    h("div", { class: "turn-head" }, h("span", { class: "turn-label" }, `Turn ${state.turns.size + 1}`), badge, h("span", { class: "spacer" }), fork),
    body,
    error,
  );
  conversation.append(el);
  t = { el, body, badge, fork, error, turn, planEl: null, diffEl: null };
  state.turns.set(turn.id, t);
  setTurnStatus(t, turn);
  return t;
}

export function setTurnStatus(t, turn) {
  t.turn = turn;
  t.el.dataset.status = turn.status;
  const labels = { inProgress: "running", completed: "completed", interrupted: "interrupted", failed: "failed" };
  t.badge.textContent = labels[turn.status] ?? turn.status;
  t.badge.dataset.status = turn.status;
  if (turn.durationMs != null && turn.status !== "inProgress") t.badge.textContent += ` · ${(turn.durationMs / 1000).toFixed(1)} s`;
  if (turn.error) {
    t.error.hidden = false;
    t.error.textContent = turn.error.message;
  } else if (turn.status === "completed") {
    t.error.hidden = true;
    t.error.textContent = "";
  }
  t.fork.disabled = !state.connected || turn.status === "inProgress";
}

function renderPlan(params) {
  const t = state.turns.get(params.turnId);
  if (!t) return;
  const marks = { pending: "○", inProgress: "◐", completed: "●" };
  const el = h(
    "div",
    { class: "item item-plan-update" },
    h("div", { class: "item-head" }, h("span", { class: "kind" }, "Plan")),
    params.explanation ? h("div", { class: "plan-explanation" }, params.explanation) : null,
    h("ol", { class: "plan" }, params.plan.map((s) => h("li", { dataset: { status: s.status } }, h("span", { class: "mark" }, marks[s.status] ?? "○"), s.step))),
  );
  if (t.planEl) t.planEl.replaceWith(el);
  else t.body.append(el);
  t.planEl = el;
}

function renderTurnDiff(params) {
  const t = state.turns.get(params.turnId);
  if (!t) return;
  const el = h("details", { class: "item turn-diff" }, h("summary", {}, "All changes in this turn"), diffView(params.diff));
  if (t.diffEl) {
    el.open = t.diffEl.open;
    t.diffEl.replaceWith(el);
  } else t.el.append(el);
  t.diffEl = el;
}
