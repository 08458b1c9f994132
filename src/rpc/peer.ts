/**
 * A bidirectional JSON-RPC 2.0 peer over any text channel (a WebSocket or a stdio line stream),
 * built on json-rpc-2.0's server and client halves. This adapter owns the wire rules the library
 * leaves open (see notes/dependencies.md §3):
 * - incoming messages are accepted with or without `"jsonrpc":"2.0"`; outgoing ones always carry it;
 * - request ids may be anything JSON-RPC allows (string, number, null) and are echoed exactly as
 *   received, integers beyond 2^53 included (see ids.ts);
 * - parse errors are answered with id null; malformed envelopes with -32600; responses (replies to
 *   our requests) are never answered, even malformed ones;
 * - every request gets an AbortSignal; `$/cancelRequest {id}` (LSP, sent by vscode-jsonrpc and
 *   python-lsp-jsonrpc) aborts it and answers it at once with -32800, and nothing else is sent for
 *   it afterwards (the handler may still be finishing; its outcome is dropped);
 * - any non-RpcError thrown by a handler becomes -32603 "Internal error", never a stack trace (one
 *   that means the database cannot be reached says so, so the client knows to retry);
 * - batches are answered with an array (or nothing, when they held only notifications);
 * - server notifications carry a top-level `emittedAtMs`.
 */
import {
  JSONRPCClient,
  JSONRPCServer,
  type JSONRPCError,
  type JSONRPCRequest,
  type JSONRPCResponse,
  JSONRPCErrorException,
} from "json-rpc-2.0";
import { ErrorCode, type RequestId } from "../protocol/jsonrpc.js";
import { isDatabaseUnreachable } from "../store/unreachable.js";
import { REQUEST_CANCELLED, RpcError } from "./errors.js";
import { idKey, isRequestId, messageStarts, rawTextAt, stringifyMessage, wireId, type WireId } from "./ids.js";
import type { PreparedNotification } from "./prepared-notification.js";
import { TokenBucket } from "./token-bucket.js";

export interface PeerLogger {
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
  debug(obj: object, msg: string): void;
}

/**
 * What a transport provides: send one message (one frame / one line). `message` is the object
 * behind `text`, for transports that buffer and may merge deltas (see transport/outbound.ts), or
 * the PreparedNotification `text` came from (shared by every connection: a transport may send
 * its bytes instead). A sender that only wants the text ignores it.
 */
export type SendText = (text: string, message?: Record<string, unknown> | PreparedNotification) => void;

/** Ingress limits per connection (DESIGN.md §10: -32001 "Server overloaded; retry later"). */
export interface PeerLimits {
  /** Requests being handled at once; more are answered -32001. */
  maxInFlightRequests: number;
  /** Sustained requests per second (token bucket) and the burst allowed above it. */
  requestsPerSecond: number;
  requestBurst: number;
}

export const DEFAULT_PEER_LIMITS: PeerLimits = { maxInFlightRequests: 64, requestsPerSecond: 500, requestBurst: 1000 };

export interface RequestContext {
  /** The request's id as the client sent it. */
  id: WireId;
  /** Resolves once the response to this request has been written (or the request failed). */
  responded: Promise<void>;
  /**
   * Aborted when the client cancels the request (`$/cancelRequest`) or the connection closes:
   * long handlers stop their work (command/exec kills its process). The response is already
   * sent (-32800) or pointless by then; whatever the handler returns afterwards is dropped.
   */
  signal: AbortSignal;
}
export type MethodHandler = (params: unknown, ctx: RequestContext) => Promise<unknown> | unknown;
export type NotificationHandler = (params: unknown) => void;
/** Runs before every request; return an RpcError to reject it (the handshake gate). */
export type RequestGate = (method: string) => RpcError | null;

type Obj = Record<string, unknown>;

/** LSP's cancellation notification, which vscode-jsonrpc and python-lsp-jsonrpc send on their own. */
export const CANCEL_METHOD = "$/cancelRequest";

const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);
/** Ids of replies to our own requests: we only ever send safe integers. */
const validId = (id: unknown): id is RequestId =>
  typeof id === "string" || (typeof id === "number" && Number.isSafeInteger(id));

/** The raw JSON text at a member path of the message being handled (for ids a number cannot keep). */
type RawAt = (path: readonly string[]) => string | undefined;

/** Why a request's signal was aborted. */
export class RequestAbortedError extends Error {
  constructor(readonly reason: "cancelled" | "connectionClosed") {
    super(reason === "cancelled" ? "request cancelled by the client" : "connection closed");
    this.name = "RequestAbortedError";
  }
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

function errorObject(code: number, message: string, data?: unknown): JSONRPCError {
  const error: JSONRPCError = { code, message };
  if (data !== undefined) error.data = data;
  return error;
}

function errorResponse(id: WireId, code: number, message: string, data?: unknown): Obj {
  return { jsonrpc: "2.0", id, error: errorObject(code, message, data) };
}

/** An error member as JSON-RPC 2.0 §5.1 has it: an object with a number `code` and a string `message`. */
const isErrorObject = (e: unknown): e is JSONRPCError => isObj(e) && typeof e.code === "number" && typeof e.message === "string";

/**
 * A client's reply to one of our requests, as json-rpc-2.0's client takes it (it reads `id`,
 * `result` and `error`): an error reply when `error` is set (not null), with the error object as
 * sent, or -32603 carrying the value as data when that is not a JSON-RPC error object; else a
 * result reply (`result` undefined when absent, which request() rejects as unexpected).
 */
function clientReply(msg: Obj, id: RequestId): JSONRPCResponse {
  const error = msg.error;
  if (!error) return { jsonrpc: "2.0", id, result: msg.result };
  return { jsonrpc: "2.0", id, error: isErrorObject(error) ? error : errorObject(ErrorCode.InternalError, "Malformed error in the client's reply", error) };
}

export class RpcPeer {
  private readonly server = new JSONRPCServer<RequestContext>({ errorListener: () => {} });
  private readonly client: JSONRPCClient<void>;
  private readonly notificationHandlers = new Map<string, NotificationHandler>();
  private gate: RequestGate = () => null;
  private open = true;
  /** Messages received whose handling (and response, if any) has not finished yet. */
  private readonly inFlight = new Set<Promise<void>>();

  private activeRequests = 0;
  /** Requests being handled, by idKey (ids need not be unique: several may share one). */
  private readonly running = new Map<string, Set<AbortController>>();
  /** json-rpc-2.0 sees these ids instead of the client's (which may be null or a RawNumberId). */
  private nextInternalId = 1;
  private readonly bucket: TokenBucket;

  constructor(
    private readonly sendText: SendText,
    private readonly log: PeerLogger,
    private readonly limits: PeerLimits = DEFAULT_PEER_LIMITS,
  ) {
    this.bucket = new TokenBucket(limits.requestsPerSecond, limits.requestBurst);
    this.client = new JSONRPCClient<void>((payload) => {
      if (!this.open) throw new Error("connection closed");
      this.write(payload);
    });
    // Handlers' errors are RpcErrors by then (addMethod); `id` is the internal one, replaced in dispatchRequest.
    this.server.mapErrorToJSONRPCErrorResponse = (id, error) => {
      const e = this.toRpcError(error, id);
      return { jsonrpc: "2.0", id, error: errorObject(e.code, e.message, e.data) };
    };
  }

  setGate(gate: RequestGate): void {
    this.gate = gate;
  }

  addMethod(method: string, handler: MethodHandler): void {
    this.server.addMethod(method, async (params, ctx) => {
      try {
        return await handler(params, ctx);
      } catch (err) {
        throw this.toRpcError(err, ctx.id);
      }
    });
  }

  onNotification(method: string, handler: NotificationHandler): void {
    this.notificationHandlers.set(method, handler);
  }

  get isOpen(): boolean {
    return this.open;
  }

  notify(method: string, params: unknown, emittedAtMs = Date.now()): void {
    if (!this.open) return;
    this.write({ jsonrpc: "2.0", method, params, emittedAtMs });
  }

  /** A notification serialised once for all its recipients (the same text as notify's). */
  notifyPrepared(n: PreparedNotification): void {
    if (!this.open) return;
    this.sendText(n.text, n);
  }

  /** A server → client request. Rejects with RpcError on an error reply, timeout or close. */
  async request(method: string, params: unknown, timeoutMs?: number): Promise<unknown> {
    const c = timeoutMs ? this.client.timeout(timeoutMs) : this.client;
    try {
      return await c.request(method, params as Obj);
    } catch (err) {
      if (err instanceof JSONRPCErrorException) throw new RpcError(err.code, err.message, err.data);
      throw err;
    }
  }

  private nextRequestId = 1;

  /**
   * A server → client request whose id the caller needs (to announce `serverRequest/resolved`).
   * The promise resolves with the reply: `{ result }` or `{ error }`; it rejects only when the
   * connection closes first.
   */
  requestWithId(method: string, params: unknown): { id: number; reply: Promise<{ result?: unknown; error?: { code: number; message: string; data?: unknown } }> } {
    const id = this.nextRequestId++;
    if (!this.open) return { id, reply: Promise.reject(new Error("connection closed")) };
    const reply = Promise.resolve(this.client.requestAdvanced({ jsonrpc: "2.0", id, method, params: params as Obj })).then((res) => {
      if (!res) throw new Error("no reply");
      if ("error" in res && res.error) {
        if (res.error.code === 0 && /connection closed/.test(res.error.message)) throw new Error("connection closed");
        return { error: res.error };
      }
      return { result: (res as { result?: unknown }).result };
    });
    return { id, reply };
  }

  /** The transport closed: fail every pending server → client request. */
  close(): void {
    if (!this.open) return;
    this.open = false;
    this.client.rejectAllPendingRequests("connection closed");
    for (const controllers of this.running.values()) for (const c of controllers) c.abort(new RequestAbortedError("connectionClosed"));
  }

  /** Handles one incoming text message (a WebSocket frame or a stdio line). */
  receive(text: string): void {
    let msg: unknown;
    try {
      msg = JSON.parse(text);
    } catch {
      this.write(errorResponse(null, ErrorCode.ParseError, "Parse error"));
      return;
    }
    // Raw text is looked up only for messages that need it (an id a JS number cannot keep).
    let starts: number[] | undefined;
    const rawAt = (index: number): RawAt => (path) => rawTextAt(text, (starts ??= messageStarts(text))[index]!, path);
    if (Array.isArray(msg)) {
      this.track(this.receiveBatch(msg, rawAt));
      return;
    }
    const responded = deferred();
    this.track(
      this.receiveOne(msg, responded.promise, rawAt(0)).then((res) => {
        if (res) this.write(res);
        responded.resolve();
      }),
    );
  }

  private track(handling: Promise<void>): void {
    const done = handling.catch((err) => this.log.error({ err }, "message handling failed"));
    this.inFlight.add(done);
    void done.finally(() => this.inFlight.delete(done));
  }

  /**
   * Resolves once every request received so far has been answered (stdio: the client closed
   * stdin after writing its last requests; their answers must still go out before we exit).
   */
  async drain(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.all([...this.inFlight]);
  }

  private async receiveBatch(batch: unknown[], rawAt: (index: number) => RawAt): Promise<void> {
    if (batch.length === 0) {
      this.write(errorResponse(null, ErrorCode.InvalidRequest, "Invalid Request: empty batch"));
      return;
    }
    const responded = deferred();
    const responses = (await Promise.all(batch.map((m, i) => this.receiveOne(m, responded.promise, rawAt(i))))).filter((r): r is Obj => r !== null);
    if (responses.length > 0) this.write(responses);
    responded.resolve();
  }

  /** Returns the response to send for a request (null for notifications and replies). */
  private async receiveOne(msg: unknown, responded: Promise<void>, raw: RawAt): Promise<Obj | null> {
    if (!isObj(msg)) return errorResponse(null, ErrorCode.InvalidRequest, "Invalid Request: expected an object");
    const hasId = "id" in msg && msg.id !== undefined;
    if (!("method" in msg) && ("result" in msg || "error" in msg)) {
      // A response is never answered (JSON-RPC 2.0 §5), not even a malformed one: an error reply
      // with id null means the client could not parse something we sent, and answering it
      // could start an endless error exchange with a client that does the same.
      if (validId(msg.id)) this.client.receive(clientReply(msg, msg.id));
      else this.log.warn({ id: msg.id, error: msg.error }, "ignored a response without a valid id");
      return null;
    }
    if (hasId && !isRequestId(msg.id)) return errorResponse(null, ErrorCode.InvalidRequest, "Invalid Request: id must be a string, a number or null");
    // The id to answer with, exactly as sent (absent: a notification, or an error we cannot attribute).
    const id: WireId = hasId ? wireId(msg.id as string | number | null, () => raw(["id"])) : null;
    if (msg.jsonrpc !== undefined && msg.jsonrpc !== "2.0") return errorResponse(id, ErrorCode.InvalidRequest, 'Invalid Request: jsonrpc must be "2.0"');
    if (typeof msg.method === "string") {
      // JSON-RPC 2.0 §4.2: params, when present, is a structured value. null is taken as "no
      // params" (python-lsp-jsonrpc sends `"params": null` for requests without any).
      if (msg.params !== undefined && typeof msg.params !== "object")
        return hasId ? errorResponse(id, ErrorCode.InvalidRequest, "Invalid Request: params must be an object or array") : null;
      if (!hasId) {
        if (msg.method === CANCEL_METHOD) this.cancel(msg.params, raw);
        else this.dispatchNotification(msg.method, msg.params);
        return null;
      }
      return this.dispatchRequest(id, msg.method, msg.params, responded);
    }
    if ("method" in msg) return errorResponse(id, ErrorCode.InvalidRequest, "Invalid Request: method must be a string");
    return errorResponse(id, ErrorCode.InvalidRequest, "Invalid Request");
  }

  /** `$/cancelRequest {id}`: aborts the in-flight request(s) with that id; unknown ids are ignored (it may have finished). */
  private cancel(params: unknown, raw: RawAt): void {
    if (!isObj(params) || !isRequestId(params.id)) {
      this.log.debug({ params }, "ignored a $/cancelRequest without an id");
      return;
    }
    const controllers = this.running.get(idKey(wireId(params.id, () => raw(["params", "id"]))));
    if (!controllers) return;
    for (const c of controllers) c.abort(new RequestAbortedError("cancelled"));
  }

  private dispatchNotification(method: string, params: unknown): void {
    const handler = this.notificationHandlers.get(method);
    if (!handler) {
      this.log.debug({ method }, "ignored unknown client notification");
      return;
    }
    try {
      handler(params);
    } catch (err) {
      this.log.warn({ method, err }, "client notification handler failed");
    }
  }

  private async dispatchRequest(id: WireId, method: string, params: unknown, responded: Promise<void>): Promise<Obj> {
    if (!this.bucket.take()) return errorResponse(id, ErrorCode.ServerOverloaded, "Server overloaded; retry later", { reason: "rateLimited" });
    if (this.activeRequests >= this.limits.maxInFlightRequests)
      return errorResponse(id, ErrorCode.ServerOverloaded, "Server overloaded; retry later", { reason: "tooManyInFlightRequests", limit: this.limits.maxInFlightRequests });
    const rejected = this.gate(method);
    if (rejected) return errorResponse(id, rejected.code, rejected.message, rejected.data);

    const controller = new AbortController();
    const key = idKey(id);
    const sameId = this.running.get(key) ?? new Set<AbortController>();
    this.running.set(key, sameId.add(controller));
    // A cancelled request is answered at once; its handler keeps its in-flight slot until it
    // actually returns (it still holds resources), which the limit above is about.
    const cancelled = new Promise<Obj>((resolve) =>
      controller.signal.addEventListener("abort", () => resolve(errorResponse(id, REQUEST_CANCELLED, "Request cancelled")), { once: true }),
    );
    const request: JSONRPCRequest = { jsonrpc: "2.0", id: this.nextInternalId++, method, ...(params !== undefined ? { params } : {}) };
    this.activeRequests++;
    const handled = Promise.resolve(this.server.receive(request, { id, responded, signal: controller.signal }))
      .then(
        (res): Obj => (res ? { ...res, id } : errorResponse(id, ErrorCode.InternalError, "Internal error")),
        (err) => this.mapError(id, err),
      )
      .finally(() => this.activeRequests--);
    try {
      return await Promise.race([handled, cancelled]);
    } finally {
      sameId.delete(controller);
      if (sameId.size === 0 && this.running.get(key) === sameId) this.running.delete(key);
    }
  }

  /** What a handler threw, as the error to answer with; anything but an RpcError is logged and hidden. */
  private toRpcError(err: unknown, id: WireId): RpcError | JSONRPCErrorException {
    if (err instanceof RpcError || err instanceof JSONRPCErrorException) return err;
    if (isDatabaseUnreachable(err)) {
      this.log.warn({ err, id }, "request failed: the database is unavailable");
      return new RpcError(ErrorCode.InternalError, "The database is unavailable; retry when it is back");
    }
    this.log.error({ err, id }, "request handler failed");
    return new RpcError(ErrorCode.InternalError, "Internal error");
  }

  private mapError(id: WireId, err: unknown): Obj {
    const e = this.toRpcError(err, id);
    return errorResponse(id, e.code, e.message, e.data);
  }

  private write(payload: unknown): void {
    if (!this.open) return;
    if (Array.isArray(payload)) {
      this.sendText(`[${payload.map((p) => stringifyMessage({ jsonrpc: "2.0", ...(p as Obj) })).join(",")}]`);
      return;
    }
    const message = { jsonrpc: "2.0", ...(payload as Obj) };
    this.sendText(stringifyMessage(message), message);
  }
}
