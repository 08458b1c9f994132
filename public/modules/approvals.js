// The server's requests: approval cards for commands and file changes (answered by a click),
// and item/tool/call, which the playground does not implement.

import { $, h, scrollToEnd } from "./dom.js";
import { RpcError } from "./rpc.js";
import { state } from "./state.js";
import { changeDiff, diffView, displayPath } from "./items.js";

const DECISIONS = [
  ["accept", "Accept", "primary"],
  ["acceptForSession", "Accept for session", ""],
  ["decline", "Decline", ""],
  ["cancel", "Cancel turn", "danger"],
];

export function onServerRequest(method, params, id) {
  if (method === "item/commandExecution/requestApproval" || method === "item/fileChange/requestApproval") {
    return new Promise((resolve) => showApproval(method, params, id, resolve));
  }
  if (method === "item/tool/call") {
    return Promise.resolve({ contentItems: [{ type: "inputText", text: "The playground does not implement client-side tools." }], success: false });
  }
  return Promise.reject(new RpcError(-32601, `Method not found: ${method}`));
}

/**
 * The card goes inside the item it is about (under the command, above its output; under a patch's
 * diff), and the item's badge says "waiting for approval" until it is answered. The command and
 * the diff are already on screen there, so the card repeats them only when the item is not.
 */
function showApproval(method, params, id, answer) {
  const isCommand = method === "item/commandExecution/requestApproval";
  // A request re-sent after a resume replaces the stale card for the same item.
  for (const [oldId, card] of state.approvals) {
    if (card.itemId === params.itemId) {
      card.el.remove();
      state.approvals.delete(oldId);
    }
  }
  const item = state.items.get(params.itemId);
  const inItem = Boolean(item?.approvalSlot);
  const allowed = isCommand && params.availableDecisions?.length ? params.availableDecisions : DECISIONS.map((d) => d[0]);
  const status = h("div", { class: "approval-status" });
  const buttons = DECISIONS.filter(([d]) => allowed.includes(d)).map(([decision, label, cls]) =>
    h("button", { type: "button", class: cls, dataset: { decision }, onclick: () => choose(decision) }, label),
  );
  const changes = !isCommand && !inItem ? item?.lastItem?.changes : null;
  const el = h(
    "div",
    { class: "approval-card", dataset: { requestId: String(id), itemId: params.itemId } },
    h("div", { class: "approval-title" }, isCommand ? "Run this command?" : "Apply these file changes?"),
    isCommand && params.command && (!inItem || params.command !== item.lastItem?.command) ? h("pre", { class: "output" }, `$ ${params.command}`) : null,
    isCommand && params.cwd && (!inItem || params.cwd !== item.lastItem?.cwd) ? h("div", { class: "cwd" }, `in ${params.cwd}`) : null,
    !isCommand && params.grantRoot ? h("div", { class: "cwd" }, `grants write access to ${params.grantRoot}`) : null,
    changes ? changes.map((c) => h("div", { class: "file" }, h("div", { class: "file-name", title: c.path }, displayPath(c.path)), diffView(changeDiff(c)))) : null,
    params.reason ? h("div", { class: "reason" }, params.reason) : null,
    h("div", { class: "approval-buttons" }, buttons),
    status,
  );
  const finish = () => {
    card.done = true;
    el.classList.add("resolved");
    for (const b of buttons) b.disabled = true;
    item?.setWaiting?.(false);
  };
  const card = {
    el,
    itemId: params.itemId,
    turnId: params.turnId,
    done: false,
    resolve(how) {
      if (card.done) return;
      finish();
      status.textContent = how === "turn ended" ? "The turn ended before an answer." : "Answered by another client.";
    },
    markStale() {
      if (card.done) return;
      for (const b of buttons) b.disabled = true;
      status.textContent = "Disconnected: reconnect to answer (the request is sent again).";
    },
  };
  function choose(decision) {
    if (card.done) return;
    finish();
    status.textContent = `You chose: ${DECISIONS.find((d) => d[0] === decision)[1]}.`;
    answer({ decision });
  }
  state.approvals.set(id, card);
  if (inItem) {
    item.approvalSlot.replaceChildren(el);
    item.setWaiting(true);
  } else (state.turns.get(params.turnId)?.body ?? $("conversation")).append(el);
  scrollToEnd(true);
  buttons[0]?.focus({ preventScroll: true });
}
