// The server's requests: approval cards for commands and file changes (answered by a click),
// MCP elicitations (an MCP tool call to approve, or a question from an MCP server: a small form),
// and item/tool/call, which the playground does not implement.

import { scriptOf } from "./command-text.js";
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
  if (method === "mcpServer/elicitation/request") {
    return new Promise((resolve) => showElicitation(params, id, resolve));
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
    h("button", { type: "button", class: cls, dataset: { decision }, onclick: () => choose(decision, label) }, label),
  );
  // "Don't ask again for commands like this": the server proposes a prefix rule (Codex's
  // acceptWithExecpolicyAmendment); choosing it saves the rule and runs this command.
  const rule = allowed.find((d) => typeof d === "object" && d !== null && Array.isArray(d.acceptWithExecpolicyAmendment?.execpolicy_amendment));
  if (rule) {
    const prefix = rule.acceptWithExecpolicyAmendment.execpolicy_amendment.join(" ");
    const label = `Always allow “${prefix} …”`;
    buttons.splice(1, 0, h("button", { type: "button", dataset: { decision: "rule" }, title: `Saves a rule: commands that start with ${prefix} run without asking`, onclick: () => choose(rule, label) }, label));
  }
  const changes = !isCommand && !inItem ? item?.lastItem?.changes : null;
  const el = h(
    "div",
    { class: "approval-card", dataset: { requestId: String(id), itemId: params.itemId } },
    h("div", { class: "approval-title" }, isCommand ? "Run this command?" : "Apply these file changes?"),
    isCommand && params.command && (!inItem || params.command !== item.lastItem?.command) ? h("pre", { class: "output" }, `$ ${scriptOf(params.command)}`) : null,
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
  function choose(decision, label) {
    if (card.done) return;
    finish();
    status.textContent = `You chose: ${label}.`;
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

/**
 * An elicitation in form mode. A schema with one enum property (how MCP tool approvals come:
 * "Approve Once", "Approve this Session", "Deny") becomes one button per choice; any other schema
 * becomes text fields with Submit. Decline and Cancel are always offered.
 */
function showElicitation(params, id, answer) {
  const props = Object.entries(params.requestedSchema?.properties ?? {});
  const [choiceKey, choiceProp] = props.length === 1 && Array.isArray(props[0][1].enum) ? props[0] : [null, null];
  const status = h("div", { class: "approval-status" });
  const fields = choiceKey ? [] : props.map(([key, prop]) => h("label", { class: "elicit-field" }, h("span", {}, prop.title ?? key), h("input", { type: "text", name: key })));
  const buttons = [];
  const settle = (reply, text) => {
    if (card.done) return;
    card.done = true;
    el.classList.add("resolved");
    for (const b of buttons) b.disabled = true;
    status.textContent = text;
    answer(reply);
  };
  if (choiceKey) {
    choiceProp.enum.forEach((value, i) =>
      buttons.push(h("button", { type: "button", class: i === 0 ? "primary" : "", onclick: () => settle({ action: "accept", content: { [choiceKey]: value }, _meta: null }, `You chose: ${value}.`) }, value)),
    );
  } else {
    buttons.push(
      h("button", {
        type: "button",
        class: "primary",
        onclick: () => settle({ action: "accept", content: Object.fromEntries(fields.map((f) => [f.querySelector("input").name, f.querySelector("input").value])), _meta: null }, "Sent."),
      }, "Submit"),
    );
  }
  if (!choiceKey || !choiceProp.enum.some((v) => /deny|decline/i.test(String(v))))
    buttons.push(h("button", { type: "button", onclick: () => settle({ action: "decline", content: null, _meta: null }, "You declined.") }, "Decline"));
  buttons.push(h("button", { type: "button", class: "danger", onclick: () => settle({ action: "cancel", content: null, _meta: null }, "You cancelled the turn.") }, "Cancel turn"));
  const el = h(
    "div",
    { class: "approval-card", dataset: { requestId: String(id) } },
    h("div", { class: "approval-title" }, `MCP server ${params.serverName}`),
    h("pre", { class: "output" }, params.message),
    fields.length ? h("div", { class: "elicit-fields" }, fields) : null,
    h("div", { class: "approval-buttons" }, buttons),
    status,
  );
  const card = {
    el,
    itemId: null,
    turnId: params.turnId,
    done: false,
    resolve(how) {
      if (card.done) return;
      card.done = true;
      el.classList.add("resolved");
      for (const b of buttons) b.disabled = true;
      status.textContent = how === "turn ended" ? "The turn ended before an answer." : "Answered by another client.";
    },
    markStale() {
      if (card.done) return;
      for (const b of buttons) b.disabled = true;
      status.textContent = "Disconnected: reconnect to answer.";
    },
  };
  state.approvals.set(id, card);
  (state.turns.get(params.turnId)?.body ?? $("conversation")).append(el);
  scrollToEnd(true);
  buttons[0]?.focus({ preventScroll: true });
}
