// Items: one renderer per item type (user and agent messages, reasoning, commands, file changes,
// tool calls …). Agent text and reasoning are rendered as Markdown (markdown.js); everything else
// from the model or the user goes into the page as text only.

import { scriptOf } from "./command-text.js";
import { h, truncate } from "./dom.js";
import { markdownView } from "./markdown.js";
import { state } from "./state.js";
import { ensureTurn } from "./turns.js";

/** `final`: the item's completed state (item/completed, or a stored turn's item). */
export function upsertItem(turnId, item, final) {
  let r = state.items.get(item.id);
  if (!r) {
    const t = state.turns.get(turnId) ?? ensureTurn({ id: turnId, status: "inProgress", error: null, items: [] });
    r = (RENDERERS[item.type] ?? renderUnknown)(item);
    r.el.classList.add("item", `item-${item.type}`);
    r.el.dataset.itemId = item.id;
    t.body.append(r.el);
    state.items.set(item.id, r);
  }
  r.lastItem = item;
  r.el.dataset.final = String(final);
  r.update(item, final);
  // A card still open for a finished item was answered elsewhere (or while we were away).
  if (final) for (const card of state.approvals.values()) if (card.itemId === item.id) card.resolve("answered");
}

function statusBadge() {
  return h("span", { class: "badge" });
}

function setBadge(badge, status, text) {
  badge.dataset.status = status;
  badge.textContent = text;
}

function textOfUserInput(content) {
  return (content ?? [])
    .map((c) => (c.type === "text" ? c.text : c.type === "image" || c.type === "localImage" ? "[image]" : `[${c.type}: ${c.name ?? ""}]`))
    .join("\n");
}

/** A path under the open thread's working directory, relative to it. */
export function displayPath(file) {
  const cwd = state.settings?.cwd;
  return cwd && file.startsWith(`${cwd.replace(/\/$/, "")}/`) ? file.slice(cwd.replace(/\/$/, "").length + 1) : file;
}

/** An added or deleted file's `diff` is its content: shown as added / removed lines. */
export function changeDiff(change) {
  const marker = change.kind.type === "add" ? "+" : change.kind.type === "delete" ? "-" : "";
  if (!marker) return change.diff;
  return change.diff
    .replace(/\n$/, "")
    .split("\n")
    .map((line) => marker + line)
    .join("\n");
}

export function diffView(diff) {
  const lines = (diff ?? "").replace(/\n$/, "").split("\n");
  return h(
    "pre",
    { class: "diff" },
    lines.map((line) => {
      const kind = line.startsWith("+++") || line.startsWith("---") ? "header" : line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : line.startsWith("@@") ? "hunk" : "context";
      return h("span", { class: `diff-line diff-${kind}` }, `${line}\n`);
    }),
  );
}

/**
 * Renderers of items that can wait for an approval have `approvalSlot` (where the card goes:
 * under the command, above its output) and `setWaiting(bool)` (their badge says so meanwhile).
 */
const RENDERERS = {
  userMessage() {
    const text = h("div", { class: "text" });
    return {
      el: h("div", {}, h("div", { class: "who" }, "You"), text),
      update: (i) => (text.textContent = textOfUserInput(i.content)),
      delta() {},
    };
  },

  agentMessage() {
    const text = h("div", { class: "text" });
    const view = markdownView(text);
    const el = h("div", { class: "streaming" }, h("div", { class: "who" }, "Agent"), text);
    return {
      el,
      update(i, final) {
        // item/started carries "" (deltas follow); item/completed the authoritative text.
        if (i.text || final) view.set(i.text);
        el.classList.toggle("streaming", !final);
      },
      delta: (_m, p) => view.append(p.delta),
    };
  },

  reasoning() {
    const label = h("span", { class: "reasoning-preview" });
    const text = h("div", { class: "text" });
    const view = markdownView(text);
    const el = h("details", {}, h("summary", {}, h("span", { class: "kind" }, "Reasoning"), label), text);
    let summary = [];
    let content = [];
    const render = (now) => {
      const shown = summary.some((s) => s) ? summary.join("\n\n") : content.join("\n\n");
      if (now) view.set(shown);
      else view.append(shown.slice(view.text.length)); // deltas only add at the end of the last part
      label.textContent = shown ? ` — ${truncate(shown.split("\n")[0].replace(/[*_`#]/g, ""), 90)}` : "";
    };
    return {
      el,
      update(i) {
        summary = [...i.summary];
        content = [...i.content];
        render(true);
      },
      delta(method, p) {
        const parts = method === "item/reasoning/summaryTextDelta" ? summary : content;
        const index = method === "item/reasoning/summaryTextDelta" ? p.summaryIndex : p.contentIndex;
        while (parts.length <= index) parts.push("");
        parts[index] += p.delta;
        const shown = summary.some((s) => s) ? summary.join("\n\n") : content.join("\n\n");
        render(!shown.startsWith(view.text));
      },
    };
  },

  commandExecution() {
    const command = h("code", { class: "command" });
    const prompt = h("span", { class: "prompt" }, "$");
    const badge = statusBadge();
    const cwd = h("div", { class: "cwd" });
    const approvalSlot = h("div", { class: "approval-slot" });
    const output = h("pre", { class: "output", hidden: true });
    let last = null;
    let waiting = false;
    const showBadge = () => {
      const i = last;
      if (!i) return;
      const took = i.durationMs != null ? ` · ${i.durationMs} ms` : "";
      if (i.status === "inProgress") setBadge(badge, waiting ? "waiting" : "inProgress", waiting ? "waiting for approval" : "running");
      else if (i.status === "declined") setBadge(badge, "declined", "declined");
      else setBadge(badge, i.status, `${i.exitCode === null ? i.status : `exit ${i.exitCode}`}${took}`);
    };
    return {
      el: h("div", {}, h("div", { class: "item-head" }, prompt, command, h("span", { class: "spacer" }), badge), cwd, approvalSlot, output),
      approvalSlot,
      setWaiting(on) {
        waiting = on;
        showBadge();
      },
      update(i) {
        last = i;
        command.textContent = scriptOf(i.command);
        // The user's own command (thread/shellCommand, the TUI's !cmd) rather than the model's.
        prompt.textContent = i.source === "userShell" ? "you ran $" : "$";
        cwd.textContent = i.cwd ? `in ${i.cwd}` : "";
        if (i.aggregatedOutput !== null && i.aggregatedOutput !== undefined) output.textContent = i.aggregatedOutput;
        output.hidden = output.textContent === "";
        if (i.status !== "inProgress") waiting = false;
        showBadge();
      },
      delta(_m, p) {
        output.hidden = false;
        output.append(p.delta);
      },
    };
  },

  fileChange() {
    const badge = statusBadge();
    const files = h("div", { class: "files" });
    const approvalSlot = h("div", { class: "approval-slot" });
    let last = null;
    let waiting = false;
    const showBadge = () => {
      if (!last) return;
      const labels = { inProgress: waiting ? "waiting for approval" : "pending", completed: "applied", failed: "failed", declined: "declined" };
      setBadge(badge, last.status === "inProgress" && waiting ? "waiting" : last.status, labels[last.status] ?? last.status);
    };
    return {
      el: h("div", {}, h("div", { class: "item-head" }, h("span", { class: "kind" }, "File changes"), h("span", { class: "spacer" }), badge), files, approvalSlot),
      approvalSlot,
      setWaiting(on) {
        waiting = on;
        showBadge();
      },
      update(i) {
        last = i;
        files.replaceChildren(
          ...i.changes.map((c) => {
            const kind = c.kind.type === "update" && c.kind.move_path ? `move → ${displayPath(c.kind.move_path)}` : c.kind.type;
            return h("div", { class: "file" }, h("div", { class: "file-name", title: c.path }, displayPath(c.path), h("span", { class: "file-kind" }, ` (${kind})`)), diffView(changeDiff(c)));
          }),
        );
        if (i.status !== "inProgress") waiting = false;
        showBadge();
      },
      delta() {},
    };
  },

  plan() {
    const text = h("div", { class: "text" });
    return {
      el: h("div", {}, h("div", { class: "item-head" }, h("span", { class: "kind" }, "Plan")), text),
      update: (i) => (text.textContent = i.text),
      delta() {},
    };
  },

  mcpToolCall: toolCallRenderer,
  dynamicToolCall: toolCallRenderer,

  contextCompaction() {
    return { el: h("div", { class: "divider" }, "context compacted"), update() {}, delta() {} };
  },

  // review/start: the turn's work between two dividers. The review itself is the agent message
  // before exitedReviewMode (which repeats it), or the turn's error when there is none.
  enteredReviewMode() {
    const el = h("div", { class: "divider" });
    return { el, update: (i) => (el.textContent = `review started: ${i.review}`), delta() {} };
  },

  exitedReviewMode() {
    return { el: h("div", { class: "divider" }, "review finished"), update() {}, delta() {} };
  },
};

function toolCallRenderer() {
  const name = h("code", {});
  const badge = statusBadge();
  const args = h("pre", { class: "output" });
  const result = h("pre", { class: "output", hidden: true });
  return {
    el: h("div", {}, h("div", { class: "item-head" }, h("span", { class: "kind" }, "Tool"), name, h("span", { class: "spacer" }), badge), args, result),
    update(i) {
      name.textContent = i.server ? `${i.server}.${i.tool}` : i.namespace ? `${i.namespace}.${i.tool}` : i.tool;
      args.textContent = JSON.stringify(i.arguments, null, 2);
      const out = i.contentItems ? i.contentItems.map((c) => (c.type === "inputText" ? c.text : "[image]")).join("\n") : i.error ? i.error.message : i.result != null ? JSON.stringify(i.result, null, 2) : "";
      result.textContent = out;
      result.hidden = !out;
      setBadge(badge, i.status, i.status === "inProgress" ? "running" : i.status);
    },
    delta() {},
  };
}

function renderUnknown(item) {
  const pre = h("pre", { class: "output" });
  return { el: h("div", {}, h("div", { class: "item-head" }, h("span", { class: "kind" }, item.type)), pre), update: (i) => (pre.textContent = JSON.stringify(i, null, 2)), delta() {} };
}
