// JSON-RPC 2.0 over the WebSocket: request/response matching, notifications, server requests.

export class RpcError extends Error {
  constructor(code, message, data) {
    super(message);
    this.code = code;
    this.data = data;
  }
}

export class Rpc {
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
