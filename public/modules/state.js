// The page's state, shared by its modules.

export const state = {
  /** @type {import("./rpc.js").Rpc | null} */
  rpc: null,
  connected: false,
  token: "",
  /** archived: the list shows archived threads instead. */
  threads: { search: "", cursor: null, requestNo: 0, archived: false },
  /** model/list's models; modelOptions: the picker's entries ({model, modelProvider, label, isDefault}). */
  models: [],
  modelOptions: [],
  /** From account/read and modelProvider/list: { hasKey, defaultProviderId, providers } (null: unknown). */
  credentials: null,
  /** The server's default working directory, once a thread/start without cwd has shown it. */
  serverCwd: null,
  // The open thread (threadId null: a new thread, started by the first message).
  threadId: null,
  settings: null,
  /** The open thread came from the archived list (its header offers Unarchive). */
  openArchived: false,
  lastSeq: 0,
  activeTurnId: null,
  /** The open thread's title from its first message, until the server has a preview. */
  draftTitle: null,
  turns: new Map(), // turnId → { el, body, badge, fork, error, planEl, diffEl, turn }
  items: new Map(), // itemId → renderer
  approvals: new Map(), // request id → card
};
