// The page's state, shared by its modules.

export const state = {
  /** @type {import("./rpc.js").Rpc | null} */
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
  /** The open thread's title from its first message, until the server has a preview. */
  draftTitle: null,
  turns: new Map(), // turnId → { el, body, badge, fork, error, planEl, diffEl, turn }
  items: new Map(), // itemId → renderer
  approvals: new Map(), // request id → card
};
