// The agent-app-server playground: a plain ES module, no framework, no build step.
//
// It speaks the same JSON-RPC 2.0 protocol as any other client, over a WebSocket to the page's own
// origin: initialize → initialized → thread/start | thread/resume → turn/start, then renders the
// notifications as they stream and answers the server's approval requests.
//
// Model and user content is only ever put into the page as text (textContent, text nodes), never
// as HTML. A browser cannot set headers on a WebSocket, so the token (when the server requires one)
// goes in the socket URL's query, `ws://HOST:PORT/?token=…`, the server's documented browser form;
// the page never logs it, never puts it in the address bar, and keeps it in sessionStorage (this tab).

// ---- small DOM helpers ------------------------------------------------------------------------

const $ = (id) => /** @type {HTMLElement} */ (document.getElementById(id));

/**
 * Creates an element. `props`: class, dataset (object), hidden, title, type, disabled, open,
 * on<event> handlers. Children: nodes, or strings (added as text nodes), null/false skipped.
 */
function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "dataset") Object.assign(el.dataset, value);
    else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key in el) el[key] = value;
    else el.setAttribute(key, String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return el;
}

function relativeTime(unixSeconds) {
  if (!unixSeconds) return "";
  const s = Math.round(Date.now() / 1000 - unixSeconds);
  if (s < 60) return "just now";
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return new Date(unixSeconds * 1000).toLocaleDateString();
}

function shortId(id) {
  return id ? id.slice(-8) : "";
}

function truncate(text, n) {
  return text.length > n ? `${text.slice(0, n - 1)}…` : text;
}

// ---- the token ----------------------------------------------------------------------------------

const TOKEN_KEY = "agent-app-server.token";

/** A token in the fragment (#token=…, never sent to the server) is taken and removed from the address bar. */
function tokenFromFragment() {
  const params = new URLSearchParams(location.hash.slice(1));
  const token = params.get("token");
  if (token === null) return null;
  params.delete("token");
  const rest = params.toString();
  history.replaceState(null, "", location.pathname + location.search + (rest ? `#${rest}` : ""));
  return token;
}

// ---- JSON-RPC over the WebSocket ----------------------------------------------------------------

class RpcError extends Error {
  constructor(code, message, data) {
    super(message);
    this.code = code;
    this.data = data;
  }
}

class Rpc {
  constructor(url, handlers) {
    this.handlers = handlers; // { notification(method, params), request(method, params, id) → Promise<result>, closed(info) }
    this.pending = new Map();
    this.nextId = 1;
    this.ws = new WebSocket(url);
    this.opened = new Promise((resolve, reject) => {
      this.ws.addEventListener("open", () => resolve());
      this.ws.addEventListener("close", (e) => reject(new Error(`connection closed (${e.code}${e.reason ? `: ${e.reason}` : ""})`)));
    });
    this.opened.catch(() => {});
    this.ws.addEventListener("message", (e) => this.onMessage(e.data));
    this.ws.addEventListener("close", (e) => {
      for (const p of this.pending.values()) p.reject(new Error("connection closed"));
      this.pending.clear();
      this.handlers.closed({ code: e.code, reason: e.reason });
    });
  }

  get open() {
    return this.ws.readyState === WebSocket.OPEN;
  }

  send(message) {
    if (this.open) this.ws.send(JSON.stringify({ jsonrpc: "2.0", ...message }));
  }

  request(method, params) {
    if (!this.open) return Promise.reject(new Error("not connected"));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.send({ id, method, params });
    });
  }

  notify(method, params) {
    this.send({ method, params });
  }

  close() {
    this.ws.close(1000, "bye");
  }

  onMessage(data) {
    let message;
    try {
      message = JSON.parse(data);
    } catch {
      return;
    }
    for (const m of Array.isArray(message) ? message : [message]) {
      if (m.method && m.id !== undefined && m.id !== null) this.answer(m);
      else if (m.method) this.handlers.notification(m.method, m.params ?? {});
      else if (this.pending.has(m.id)) {
        const p = this.pending.get(m.id);
        this.pending.delete(m.id);
        if (m.error) p.reject(new RpcError(m.error.code, m.error.message, m.error.data));
        else p.resolve(m.result);
      }
    }
  }

  async answer(m) {
    try {
      const result = await this.handlers.request(m.method, m.params ?? {}, m.id);
      this.send({ id: m.id, result });
    } catch (err) {
      const code = err instanceof RpcError ? err.code : -32603;
      this.send({ id: m.id, error: { code, message: err instanceof Error ? err.message : String(err) } });
    }
  }
}

// ---- state --------------------------------------------------------------------------------------

const state = {
  /** @type {Rpc | null} */
  rpc: null,
  connected: false,
  token: "",
  threads: { search: "", cursor: null, requestNo: 0 },
  models: [],
  // The open thread.
  threadId: null,
  settings: null,
  lastSeq: 0,
  activeTurnId: null,
  turns: new Map(), // turnId → { el, body, badge, fork, error, planEl, diffEl, turn }
  items: new Map(), // itemId → renderer
  approvals: new Map(), // request id → card
};

// ---- connecting ---------------------------------------------------------------------------------

function setConnState(kind, text) {
  const el = $("conn-status");
  el.dataset.state = kind;
  el.textContent = text;
  state.connected = kind === "connected";
  updateControls();
}

/** The page's own origin; the token, if any, as `?token=` (browsers cannot send an Authorization header). */
function socketUrl(token) {
  const base = `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/`;
  return token ? `${base}?token=${encodeURIComponent(token)}` : base;
}

async function connect() {
  if (state.rpc) {
    const old = state.rpc;
    state.rpc = null;
    old.close();
  }
  setConnState("connecting", "connecting…");
  const rpc = new Rpc(socketUrl(state.token), {
    notification: (method, params) => {
      if (state.rpc === rpc) onNotification(method, params);
    },
    request: (method, params, id) => onServerRequest(method, params, id),
    closed: ({ code, reason }) => {
      if (state.rpc !== rpc) return;
      state.rpc = null;
      const why = code === 1006 ? "could not reach the server or it refused the connection (is a token needed?)" : `closed (${code}${reason ? `: ${reason}` : ""})`;
      setConnState("disconnected", "disconnected");
      showBanner(`Disconnected: ${why}.`, state.threadId ? "Reconnect and resume" : "Reconnect", connect);
      for (const card of state.approvals.values()) card.markStale();
    },
  });
  state.rpc = rpc;
  try {
    await rpc.opened;
    await rpc.request("initialize", {
      clientInfo: { name: "agent-app-server-playground", title: "agent-app-server playground", version: "0.1.0" },
      capabilities: { experimentalApi: false },
    });
    rpc.notify("initialized", {});
  } catch (err) {
    if (state.rpc === rpc) {
      setConnState("disconnected", "disconnected");
      showBanner(`Could not connect: ${err.message}. Check the token and connect again.`, "Reconnect", connect);
    }
    return;
  }
  setConnState("connected", "connected");
  hideBanner();
  void loadModels();
  void loadThreads(true);
  if (state.threadId) await resumeOpenThread().catch(() => {});
}

async function call(method, params) {
  if (!state.rpc) throw new Error("not connected");
  try {
    return await state.rpc.request(method, params);
  } catch (err) {
    showBanner(`${method} failed: ${err.message}`);
    throw err;
  }
}

// ---- banner -------------------------------------------------------------------------------------

function showBanner(text, actionLabel, action) {
  $("banner").hidden = false;
  $("banner-text").textContent = text;
  const button = $("banner-action");
  button.hidden = !actionLabel;
  button.textContent = actionLabel ?? "";
  button.onclick = action
    ? () => {
        hideBanner();
        void action();
      }
    : null;
}

function hideBanner() {
  $("banner").hidden = true;
}

// ---- models and the thread list ----------------------------------------------------------------

async function loadModels() {
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

async function loadThreads(reset) {
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
    list.append(threadEntry(t));
    if (t.id === state.threadId) $("thread-title").textContent = truncate(threadLabel(t), 120);
  }
  if (reset && page.data.length === 0) list.append(h("li", { class: "empty" }, state.threads.search ? "No thread matches." : "No threads yet."));
  state.threads.cursor = page.nextCursor;
  $("more-threads").hidden = !page.nextCursor;
}

function threadLabel(t) {
  return t.name || t.preview || "(no messages yet)";
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
        onclick: () => openThread(t.id).catch(() => {}),
      },
      h("span", { class: "thread-entry-title" }, truncate(threadLabel(t), 80)),
      h(
        "span",
        { class: "thread-entry-meta" },
        `${relativeTime(t.updatedAt)} · ${shortId(t.id)}`,
        t.forkedFromId ? " · fork" : "",
        t.status?.type === "active" ? h("span", { class: "dot active", title: "running" }) : null,
      ),
    ),
  );
}

function markCurrentInList() {
  for (const el of document.querySelectorAll(".thread-entry")) el.classList.toggle("current", el.dataset.threadId === state.threadId);
}

// ---- opening, starting, forking -----------------------------------------------------------------

function resetConversation() {
  state.turns.clear();
  state.items.clear();
  state.approvals.clear();
  state.activeTurnId = null;
  state.lastSeq = 0;
  $("conversation").replaceChildren();
}

/** Renders a thread/start, thread/resume or thread/fork response. */
function showThread(response) {
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

function renderHeader(thread) {
  $("thread-title").textContent = truncate(threadLabel(thread), 120);
  const s = state.settings;
  const parts = [`thread ${thread.id}`];
  if (s) parts.push(`${s.model} (${s.modelProvider})`, s.cwd, `approval: ${typeof s.approvalPolicy === "string" ? s.approvalPolicy : "granular"}`);
  if (thread.forkedFromId) parts.push(`forked from ${shortId(thread.forkedFromId)}`);
  $("thread-meta").textContent = parts.join(" · ");
}

async function leaveOpenThread() {
  const previous = state.threadId;
  if (previous && state.rpc) state.rpc.request("thread/unsubscribe", { threadId: previous }).catch(() => {});
}

async function openThread(threadId) {
  if (threadId === state.threadId) return;
  await leaveOpenThread();
  const response = await call("thread/resume", { threadId });
  showThread(response);
}

/** After a reconnect: subscribe again, and replay what was missed (persisted events after lastSeq). */
async function resumeOpenThread() {
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

async function startThread() {
  await leaveOpenThread();
  const response = await call("thread/start", newThreadParams());
  showThread(response);
  void loadThreads(true);
  $("input").focus();
  return response.thread.id;
}

async function forkAt(turnId) {
  const from = state.threadId;
  const response = await call("thread/fork", { threadId: from, lastTurnId: turnId });
  if (from) state.rpc?.request("thread/unsubscribe", { threadId: from }).catch(() => {});
  showThread(response);
  void loadThreads(true);
}

// ---- sending ------------------------------------------------------------------------------------

async function send() {
  const input = $("input");
  const text = input.value.trim();
  if (!text || !state.connected) return;
  const userInput = [{ type: "text", text, text_elements: [] }];
  $("send").disabled = true;
  try {
    const threadId = state.threadId ?? (await startThread());
    if (state.activeTurnId) {
      await call("turn/steer", { threadId, expectedTurnId: state.activeTurnId, input: userInput });
    } else {
      const { turn } = await call("turn/start", { threadId, input: userInput });
      ensureTurn(turn);
      state.activeTurnId = turn.id;
    }
    input.value = "";
  } catch {
    // shown in the banner
  } finally {
    updateControls();
  }
}

async function interrupt() {
  if (!state.threadId || !state.activeTurnId) return;
  $("interrupt").disabled = true;
  try {
    await call("turn/interrupt", { threadId: state.threadId, turnId: state.activeTurnId });
  } catch {
    $("interrupt").disabled = false;
  }
}

function updateControls() {
  const running = Boolean(state.activeTurnId);
  $("send").textContent = running ? "Steer" : "Send";
  $("send").title = running ? "Add this to the running turn (turn/steer)" : "Start a turn (turn/start)";
  $("send").disabled = !state.connected;
  $("new-thread").disabled = !state.connected;
  const interruptButton = $("interrupt");
  interruptButton.hidden = !running;
  if (!running) interruptButton.disabled = false;
  for (const t of state.turns.values()) t.fork.disabled = !state.connected || t.turn.status === "inProgress";
}

// ---- notifications ------------------------------------------------------------------------------

function threadIdOf(params) {
  return params.threadId ?? params.thread?.id ?? null;
}

function onNotification(method, params) {
  const threadId = threadIdOf(params);
  if (method === "thread/started" || method === "thread/archived" || method === "thread/unarchived") void loadThreads(true);
  if (!threadId || threadId !== state.threadId) return;
  if (typeof params.seq === "number") state.lastSeq = Math.max(state.lastSeq, params.seq);

  switch (method) {
    case "thread/status/changed":
      setThreadStatus(params.status);
      break;
    case "thread/name/updated":
      $("thread-title").textContent = params.threadName || $("thread-title").textContent;
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
      if (t) t.body.append(h("div", { class: "notice error" }, `${params.error?.message ?? "error"}${params.willRetry ? " — retrying…" : ""}`));
      break;
    }
  }
  scrollToEnd();
}

function setThreadStatus(status) {
  const badge = $("thread-status");
  badge.hidden = !status;
  if (!status) return;
  const waiting = status.type === "active" && status.activeFlags?.includes("waitingOnApproval");
  const text = waiting ? "waiting for approval" : status.type === "active" ? "running" : status.type === "notLoaded" ? "not loaded" : status.type === "systemError" ? "error" : "idle";
  badge.textContent = text;
  badge.dataset.status = waiting ? "waiting" : status.type;
}

// ---- turns --------------------------------------------------------------------------------------

function ensureTurn(turn) {
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

function setTurnStatus(t, turn) {
  t.turn = turn;
  t.el.dataset.status = turn.status;
  const labels = { inProgress: "running", completed: "completed", interrupted: "interrupted", failed: "failed" };
  t.badge.textContent = labels[turn.status] ?? turn.status;
  t.badge.dataset.status = turn.status;
  if (turn.durationMs != null && turn.status !== "inProgress") t.badge.textContent += ` · ${(turn.durationMs / 1000).toFixed(1)} s`;
  t.error.hidden = !turn.error;
  t.error.textContent = turn.error ? turn.error.message : "";
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

// ---- items --------------------------------------------------------------------------------------

/** `final`: the item's completed state (item/completed, or a stored turn's item). */
function upsertItem(turnId, item, final) {
  let r = state.items.get(item.id);
  if (!r) {
    const t = state.turns.get(turnId) ?? ensureTurn({ id: turnId, status: "inProgress", error: null, items: [] });
    r = (RENDERERS[item.type] ?? renderUnknown)(item);
    r.el.classList.add("item", `item-${item.type}`);
    r.el.dataset.itemId = item.id;
    t.body.append(r.el);
    state.items.set(item.id, r);
  }
  r.lastItem = item; // the approval card shows a file change's diff from here
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
function displayPath(file) {
  const cwd = state.settings?.cwd;
  return cwd && file.startsWith(`${cwd.replace(/\/$/, "")}/`) ? file.slice(cwd.replace(/\/$/, "").length + 1) : file;
}

/** An added or deleted file's `diff` is its content: shown as added / removed lines. */
function changeDiff(change) {
  const marker = change.kind.type === "add" ? "+" : change.kind.type === "delete" ? "-" : "";
  if (!marker) return change.diff;
  return change.diff
    .replace(/\n$/, "")
    .split("\n")
    .map((line) => marker + line)
    .join("\n");
}

function diffView(diff) {
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

const RENDERERS = {
  userMessage(item) {
    const text = h("div", { class: "text" });
    return {
      el: h("div", {}, h("div", { class: "who" }, "You"), text),
      update: (i) => (text.textContent = textOfUserInput(i.content)),
      delta() {},
    };
  },

  agentMessage() {
    const text = h("div", { class: "text" });
    const el = h("div", { class: "streaming" }, h("div", { class: "who" }, "Agent"), text);
    return {
      el,
      update(i, final) {
        // item/started carries "" (deltas follow); item/completed the authoritative text.
        if (i.text || final) text.textContent = i.text;
        el.classList.toggle("streaming", !final);
      },
      delta: (_m, p) => text.append(p.delta),
    };
  },

  reasoning() {
    const label = h("span", { class: "reasoning-preview" });
    const text = h("div", { class: "text" });
    const el = h("details", {}, h("summary", {}, h("span", { class: "kind" }, "Reasoning"), label), text);
    let summary = [];
    let content = [];
    const render = () => {
      const shown = summary.some((s) => s) ? summary.join("\n\n") : content.join("\n\n");
      text.textContent = shown;
      label.textContent = shown ? ` — ${truncate(shown.split("\n")[0], 90)}` : "";
    };
    return {
      el,
      update(i) {
        summary = [...i.summary];
        content = [...i.content];
        render();
      },
      delta(method, p) {
        const parts = method === "item/reasoning/summaryTextDelta" ? summary : content;
        const index = method === "item/reasoning/summaryTextDelta" ? p.summaryIndex : p.contentIndex;
        while (parts.length <= index) parts.push("");
        parts[index] += p.delta;
        render();
      },
    };
  },

  commandExecution() {
    const command = h("code", { class: "command" });
    const badge = statusBadge();
    const cwd = h("div", { class: "cwd" });
    const output = h("pre", { class: "output", hidden: true });
    return {
      el: h("div", {}, h("div", { class: "item-head" }, h("span", { class: "prompt" }, "$"), command, h("span", { class: "spacer" }), badge), cwd, output),
      update(i) {
        command.textContent = i.command;
        cwd.textContent = i.cwd ? `in ${i.cwd}` : "";
        if (i.aggregatedOutput !== null && i.aggregatedOutput !== undefined) output.textContent = i.aggregatedOutput;
        output.hidden = output.textContent === "";
        const took = i.durationMs != null ? ` · ${i.durationMs} ms` : "";
        if (i.status === "inProgress") setBadge(badge, "inProgress", "running");
        else if (i.status === "declined") setBadge(badge, "declined", "declined");
        else setBadge(badge, i.status, `${i.exitCode === null ? i.status : `exit ${i.exitCode}`}${took}`);
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
    return {
      el: h("div", {}, h("div", { class: "item-head" }, h("span", { class: "kind" }, "File changes"), h("span", { class: "spacer" }), badge), files),
      update(i) {
        files.replaceChildren(
          ...i.changes.map((c) => {
            const kind = c.kind.type === "update" && c.kind.move_path ? `move → ${displayPath(c.kind.move_path)}` : c.kind.type;
            return h("div", { class: "file" }, h("div", { class: "file-name", title: c.path }, displayPath(c.path), h("span", { class: "file-kind" }, ` (${kind})`)), diffView(changeDiff(c)));
          }),
        );
        const labels = { inProgress: "pending", completed: "applied", failed: "failed", declined: "declined" };
        setBadge(badge, i.status, labels[i.status] ?? i.status);
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

// ---- approvals ----------------------------------------------------------------------------------

const DECISIONS = [
  ["accept", "Accept", "primary"],
  ["acceptForSession", "Accept for session", ""],
  ["decline", "Decline", ""],
  ["cancel", "Cancel turn", "danger"],
];

function onServerRequest(method, params, id) {
  if (method === "item/commandExecution/requestApproval" || method === "item/fileChange/requestApproval") {
    return new Promise((resolve) => showApproval(method, params, id, resolve));
  }
  if (method === "item/tool/call") {
    return Promise.resolve({ contentItems: [{ type: "inputText", text: "The playground does not implement client-side tools." }], success: false });
  }
  return Promise.reject(new RpcError(-32601, `Method not found: ${method}`));
}

function showApproval(method, params, id, answer) {
  const isCommand = method === "item/commandExecution/requestApproval";
  // A request re-sent after a resume replaces the stale card for the same item.
  for (const [oldId, card] of state.approvals) {
    if (card.itemId === params.itemId) {
      card.el.remove();
      state.approvals.delete(oldId);
    }
  }
  const allowed = isCommand && params.availableDecisions?.length ? params.availableDecisions : DECISIONS.map((d) => d[0]);
  const status = h("div", { class: "approval-status" });
  const buttons = DECISIONS.filter(([d]) => allowed.includes(d)).map(([decision, label, cls]) =>
    h("button", { type: "button", class: cls, dataset: { decision }, onclick: () => choose(decision) }, label),
  );
  const item = state.items.get(params.itemId);
  const changes = !isCommand ? item?.lastItem?.changes : null;
  const el = h(
    "div",
    { class: "approval-card", dataset: { requestId: String(id), itemId: params.itemId } },
    h("div", { class: "approval-title" }, isCommand ? "Run this command?" : "Apply these file changes?"),
    isCommand && params.command ? h("pre", { class: "output" }, `$ ${params.command}`) : null,
    isCommand && params.cwd ? h("div", { class: "cwd" }, `in ${params.cwd}`) : null,
    !isCommand && params.grantRoot ? h("div", { class: "cwd" }, `grants write access to ${params.grantRoot}`) : null,
    changes ? changes.map((c) => h("div", { class: "file" }, h("div", { class: "file-name", title: c.path }, displayPath(c.path)), diffView(changeDiff(c)))) : null,
    params.reason ? h("div", { class: "reason" }, params.reason) : null,
    h("div", { class: "approval-buttons" }, buttons),
    status,
  );
  const card = {
    el,
    itemId: params.itemId,
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
      status.textContent = "Disconnected: reconnect to answer (the request is sent again).";
    },
  };
  function choose(decision) {
    if (card.done) return;
    card.done = true;
    el.classList.add("resolved");
    for (const b of buttons) b.disabled = true;
    status.textContent = `You chose: ${DECISIONS.find((d) => d[0] === decision)[1]}.`;
    answer({ decision });
  }
  state.approvals.set(id, card);
  const anchor = item?.el;
  if (anchor) anchor.after(el);
  else (state.turns.get(params.turnId)?.body ?? $("conversation")).append(el);
  scrollToEnd(true);
  buttons[0]?.focus({ preventScroll: true });
}

// ---- scrolling ----------------------------------------------------------------------------------

function scrollToEnd(force = false) {
  const c = $("conversation");
  const nearEnd = c.scrollHeight - c.scrollTop - c.clientHeight < 120;
  if (force || nearEnd) c.scrollTop = c.scrollHeight;
}

// ---- wiring -------------------------------------------------------------------------------------

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
