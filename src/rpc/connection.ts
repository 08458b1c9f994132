/**
 * One client connection: a JSON-RPC peer plus the per-connection protocol state (handshake,
 * notification opt-outs). It is the runtime's Subscriber for the threads it watches.
 */
import type { z } from "zod";
import { clientRequests, type ClientRequestMethod, type ParamsOf, type ResultOf } from "../protocol/methods.js";
import type { SharedNotification, Subscriber } from "../runtime/threads.js";
import { invalidParams, invalidRequest, paramsError } from "./errors.js";
import { unstorableTextIn, type UnstorableText } from "../store/text.js";
import { RpcPeer, type PeerLimits, type PeerLogger, type RequestContext, type SendText } from "./peer.js";
import { prepared } from "./prepared-notification.js";
import { localPrincipal, type Principal } from "../identity/principal.js";
import type { ClientReply } from "../protocol/jsonrpc.js";

let nextConnectionId = 1;

const UNSTORABLE_MESSAGES: Record<UnstorableText, string> = {
  nul: "Invalid params: strings must not contain the NUL character (U+0000)",
  unpairedSurrogate: "Invalid params: strings must be well-formed UTF-16 (an unpaired surrogate such as \\ud800 is not text)",
};

export type TypedHandler<M extends ClientRequestMethod> = (
  params: ParamsOf<M>,
  ctx: RequestContext & { connection: Connection },
) => Promise<ResultOf<M>> | ResultOf<M>;

/**
 * What every request of a connection goes through before its handler (src/identity/request-guard.ts:
 * who may call what, on which thread, in which workspace, within which quota), and what it is
 * told afterwards (the audit trail). Also decides which server requests the connection is sent.
 */
export interface RequestGuard {
  /**
   * Throws the request's refusal; returns `answer` to answer without the handler, and what to do
   * after it. Synchronous where nothing needs looking up: the handler then runs in the same tick,
   * as it did without a guard (two `initialize` in one batch: the second sees the first's effect).
   */
  admit(method: ClientRequestMethod, params: unknown, connection: Connection): AdmittedRequest | Promise<AdmittedRequest>;
  /** Whether this connection is sent a server request (approvals go to the thread's owner only). */
  acceptsServerRequest(method: string, params: object, connection: Connection): boolean;
  /** The connection answered a server request it was sent. */
  serverRequestAnswered(method: string, params: object, reply: ClientReply, connection: Connection): void;
}

export interface AdmittedRequest {
  /** Answer this instead of running the handler (another user's thread that answers as unknown). */
  answer?: unknown;
  /** After the handler succeeded (before the response is sent). */
  succeeded?(result: unknown): Promise<void>;
  /** After the handler failed. */
  failed?(): void;
}

/** No rules: the connections of unit tests that build a Connection by hand. */
const OPEN: RequestGuard = { admit: () => ({}), acceptsServerRequest: () => true, serverRequestAnswered: () => {} };

export interface ConnectionOptions {
  /** Who the connection acts for (default: the local user). */
  principal?: Principal;
  guard?: RequestGuard;
  /** The client's address, for the audit trail. */
  remote?: string | null;
}

export class Connection implements Subscriber {
  readonly id = nextConnectionId++;
  readonly peer: RpcPeer;
  initialized = false;
  clientName: string | null = null;
  readonly principal: Principal;
  readonly remote: string | null;
  private readonly guard: RequestGuard;
  private optOut = new Set<string>();
  private closeListeners: Array<() => void> = [];

  constructor(send: SendText, readonly log: PeerLogger, limits?: PeerLimits, opts: ConnectionOptions = {}) {
    this.principal = opts.principal ?? localPrincipal("local");
    this.guard = opts.guard ?? OPEN;
    this.remote = opts.remote ?? null;
    this.peer = new RpcPeer(send, log, limits);
    this.peer.setGate((method) => {
      if (method === "initialize") return this.initialized ? invalidRequest("Already initialized") : null;
      return this.initialized ? null : invalidRequest("Not initialized");
    });
  }

  /** Registers a request handler whose params are validated against the method's zod schema. */
  handle<M extends ClientRequestMethod>(method: M, handler: TypedHandler<M>): void {
    const schema = clientRequests[method].params as z.ZodType;
    this.peer.addMethod(method, async (raw, ctx) => {
      // Strings PostgreSQL cannot store: refuse them up front with a clear error (store/text.ts).
      const unstorable = unstorableTextIn(raw);
      if (unstorable) throw invalidParams(UNSTORABLE_MESSAGES[unstorable]);
      const parsed = schema.safeParse(raw ?? {});
      if (!parsed.success) throw paramsError(parsed.error);
      const pending = this.guard.admit(method, parsed.data, this);
      const admitted = pending instanceof Promise ? await pending : pending;
      if ("answer" in admitted) return admitted.answer;
      let result: ResultOf<M>;
      try {
        result = await handler(parsed.data as ParamsOf<M>, { ...ctx, connection: this });
      } catch (err) {
        admitted.failed?.();
        throw err;
      }
      await admitted.succeeded?.(result);
      return result;
    });
  }

  completeHandshake(clientName: string, optOutNotificationMethods: readonly string[] | null | undefined): void {
    this.initialized = true;
    this.clientName = clientName;
    this.optOut = new Set(optOutNotificationMethods ?? []);
  }

  request(method: string, params: object) {
    const sent = this.peer.requestWithId(method, params);
    // A reply that never came (the connection closed) reaches the caller through `sent.reply`; the guard hears only answers.
    void sent.reply.then((reply) => this.guard.serverRequestAnswered(method, params, reply, this), () => {});
    return sent;
  }

  /** Server requests reach only connections the guard accepts (the thread's owner). */
  accepts(method: string, params: object): boolean {
    return this.guard.acceptsServerRequest(method, params, this);
  }

  notify(method: string, params: object, emittedAtMs?: number): void {
    if (this.optOut.has(method)) return;
    this.peer.notify(method, params, emittedAtMs);
  }

  notifyShared(n: SharedNotification): void {
    if (this.optOut.has(n.method)) return;
    this.peer.notifyPrepared(prepared(n));
  }

  receive(text: string): void {
    this.peer.receive(text);
  }

  onClose(listener: () => void): void {
    this.closeListeners.push(listener);
  }

  /** The transport is gone. */
  close(): void {
    if (!this.peer.isOpen) return;
    this.peer.close();
    for (const l of this.closeListeners) {
      try {
        l();
      } catch (err) {
        this.log.warn({ err }, "close listener failed");
      }
    }
  }
}
