/**
 * A bidirectional JSON-RPC 2.0 peer over any text channel (a WebSocket or a stdio line stream),
 * built on json-rpc-2.0's server and client halves. This adapter owns the wire rules the library
 * leaves open (see notes/dependencies.md §3):
 * - incoming messages are accepted with or without `"jsonrpc":"2.0"`; outgoing ones always carry it;
 * - ids are validated (string or safe integer) and echoed with their exact type;
 * - parse errors are answered with id null; malformed envelopes with -32600; responses (replies to
 *   our requests) are never answered, even malformed ones;
 * - any non-RpcError thrown by a handler becomes -32603 "Internal error", never a stack trace;
 * - batches are answered with an array (or nothing, when they held only notifications);
 * - server notifications carry a top-level `emittedAtMs`.
 */
import {
  JSONRPCClient,
  JSONRPCServer,
  type JSONRPCErrorResponse,
  type JSONRPCRequest,
  type JSONRPCResponse,
  JSONRPCErrorException,
} from "json-rpc-2.0";
import { ErrorCode, type RequestId } from "../protocol/jsonrpc.js";
import { RpcError } from "./errors.js";

export interface PeerLogger {
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
  debug(obj: object, msg: string): void;
}

/**
 * What a transport provides: send one message (one frame / one line). `message` is the object
 * behind `text`, for transports that buffer and may merge deltas (see transport/outbound.ts).
 */
export type SendText = (text: string, message?: Record<string, unknown>) => void;

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
  id: RequestId;
  /** Resolves once the response to this request has been written (or the request failed). */
  responded: Promise<void>;
}
export type MethodHandler = (params: unknown, ctx: RequestContext) => Promise<unknown> | unknown;
export type NotificationHandler = (params: unknown) => void;
/** Runs before every request; return an RpcError to reject it (the handshake gate). */
export type RequestGate = (method: string) => RpcError | null;

type Obj = Record<string, unknown>;

const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);
const validId = (id: unknown): id is RequestId =>
  typeof id === "string" || (typeof id === "number" && Number.isSafeInteger(id));

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

function errorResponse(id: RequestId | null, code: number, message: string, data?: unknown): Obj {
  const error: Obj = { code, message };
  if (data !== undefined) error.data = data;
  return { jsonrpc: "2.0", id, error };
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
  private tokens: number;
  private tokensAt = Date.now();

  constructor(
    private readonly sendText: SendText,
    private readonly log: PeerLogger,
    private readonly limits: PeerLimits = DEFAULT_PEER_LIMITS,
  ) {
    this.tokens = limits.requestBurst;
    this.client = new JSONRPCClient<void>((payload) => {
      if (!this.open) throw new Error("connection closed");
      this.write(payload);
    });
    this.server.mapErrorToJSONRPCErrorResponse = (id, error) => this.mapError(id, error);
  }

  setGate(gate: RequestGate): void {
    this.gate = gate;
  }

  addMethod(method: string, handler: MethodHandler): void {
    this.server.addMethod(method, (params, ctx) => handler(params, ctx));
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
    if (Array.isArray(msg)) {
      this.track(this.receiveBatch(msg));
      return;
    }
    const responded = deferred();
    this.track(
      this.receiveOne(msg, responded.promise).then((res) => {
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

  private async receiveBatch(batch: unknown[]): Promise<void> {
    if (batch.length === 0) {
      this.write(errorResponse(null, ErrorCode.InvalidRequest, "Invalid Request: empty batch"));
      return;
    }
    const responded = deferred();
    const responses = (await Promise.all(batch.map((m) => this.receiveOne(m, responded.promise)))).filter((r): r is Obj => r !== null);
    if (responses.length > 0) this.write(responses);
    responded.resolve();
  }

  /** Returns the response to send for a request (null for notifications and replies). */
  private async receiveOne(msg: unknown, responded: Promise<void>): Promise<Obj | null> {
    if (!isObj(msg)) return errorResponse(null, ErrorCode.InvalidRequest, "Invalid Request: expected an object");
    const hasId = "id" in msg && msg.id !== undefined;
    if (!("method" in msg) && ("result" in msg || "error" in msg)) {
      // A response is never answered (JSON-RPC 2.0 §5), not even a malformed one: an error reply
      // with id null means the client could not parse something we sent, and answering it
      // could start an endless error exchange with a client that does the same.
      if (validId(msg.id)) this.client.receive({ ...msg, jsonrpc: "2.0" } as unknown as JSONRPCResponse);
      else this.log.warn({ id: msg.id, error: msg.error }, "ignored a response without a valid id");
      return null;
    }
    if (msg.jsonrpc !== undefined && msg.jsonrpc !== "2.0")
      return errorResponse(validId(msg.id) ? msg.id : null, ErrorCode.InvalidRequest, 'Invalid Request: jsonrpc must be "2.0"');
    if (hasId && !validId(msg.id)) return errorResponse(null, ErrorCode.InvalidRequest, "Invalid Request: id must be a string or an integer");
    if (typeof msg.method === "string") {
      if (msg.params !== undefined && typeof msg.params !== "object")
        return hasId ? errorResponse(msg.id as RequestId, ErrorCode.InvalidRequest, "Invalid Request: params must be an object or array") : null;
      if (!hasId) {
        this.dispatchNotification(msg.method, msg.params);
        return null;
      }
      return this.dispatchRequest(msg.id as RequestId, msg.method, msg.params, responded);
    }
    if ("method" in msg) return errorResponse(hasId ? (msg.id as RequestId) : null, ErrorCode.InvalidRequest, "Invalid Request: method must be a string");
    return errorResponse(hasId ? (msg.id as RequestId) : null, ErrorCode.InvalidRequest, "Invalid Request");
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

  /** Token bucket: refills at requestsPerSecond up to requestBurst. */
  private takeToken(): boolean {
    const now = Date.now();
    this.tokens = Math.min(this.limits.requestBurst, this.tokens + ((now - this.tokensAt) / 1000) * this.limits.requestsPerSecond);
    this.tokensAt = now;
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }

  private async dispatchRequest(id: RequestId, method: string, params: unknown, responded: Promise<void>): Promise<Obj> {
    if (!this.takeToken()) return errorResponse(id, ErrorCode.ServerOverloaded, "Server overloaded; retry later", { reason: "rateLimited" });
    if (this.activeRequests >= this.limits.maxInFlightRequests)
      return errorResponse(id, ErrorCode.ServerOverloaded, "Server overloaded; retry later", { reason: "tooManyInFlightRequests", limit: this.limits.maxInFlightRequests });
    const rejected = this.gate(method);
    if (rejected) return errorResponse(id, rejected.code, rejected.message, rejected.data);
    const request: JSONRPCRequest = { jsonrpc: "2.0", id, method, ...(params !== undefined ? { params } : {}) };
    this.activeRequests++;
    try {
      const res = await this.server.receive(request, { id, responded });
      return (res as Obj | null) ?? errorResponse(id, ErrorCode.InternalError, "Internal error");
    } catch (err) {
      return this.mapError(id, err) as unknown as Obj;
    } finally {
      this.activeRequests--;
    }
  }

  private mapError(id: RequestId | null, err: unknown): JSONRPCErrorResponse {
    if (err instanceof RpcError) return errorResponse(id, err.code, err.message, err.data) as unknown as JSONRPCErrorResponse;
    if (err instanceof JSONRPCErrorException) return errorResponse(id, err.code, err.message, err.data) as unknown as JSONRPCErrorResponse;
    this.log.error({ err, id }, "request handler failed");
    return errorResponse(id, ErrorCode.InternalError, "Internal error") as unknown as JSONRPCErrorResponse;
  }

  private write(payload: unknown): void {
    if (!this.open) return;
    const withVersion = Array.isArray(payload)
      ? payload.map((p) => ({ jsonrpc: "2.0", ...(p as Obj) }))
      : { jsonrpc: "2.0", ...(payload as Obj) };
    this.sendText(JSON.stringify(withVersion), Array.isArray(withVersion) ? undefined : withVersion);
  }
}
