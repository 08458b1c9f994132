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

let nextConnectionId = 1;

const UNSTORABLE_MESSAGES: Record<UnstorableText, string> = {
  nul: "Invalid params: strings must not contain the NUL character (U+0000)",
  unpairedSurrogate: "Invalid params: strings must be well-formed UTF-16 (an unpaired surrogate such as \\ud800 is not text)",
};

export type TypedHandler<M extends ClientRequestMethod> = (
  params: ParamsOf<M>,
  ctx: RequestContext & { connection: Connection },
) => Promise<ResultOf<M>> | ResultOf<M>;

export class Connection implements Subscriber {
  readonly id = nextConnectionId++;
  readonly peer: RpcPeer;
  initialized = false;
  clientName: string | null = null;
  private optOut = new Set<string>();
  private closeListeners: Array<() => void> = [];

  constructor(send: SendText, readonly log: PeerLogger, limits?: PeerLimits) {
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
      return handler(parsed.data as ParamsOf<M>, { ...ctx, connection: this });
    });
  }

  completeHandshake(clientName: string, optOutNotificationMethods: readonly string[] | null | undefined): void {
    this.initialized = true;
    this.clientName = clientName;
    this.optOut = new Set(optOutNotificationMethods ?? []);
  }

  request(method: string, params: object) {
    return this.peer.requestWithId(method, params);
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
