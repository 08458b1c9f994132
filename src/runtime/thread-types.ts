/**
 * The small types every part of the thread runtime shares (and the cluster, turn and rpc code
 * beside it): who receives notifications, what is recorded, the logger, the defaults of a new
 * thread. A leaf: it imports nothing of runtime/, so any file may import it without a cycle.
 */
import type { AskForApproval, SandboxMode } from "../protocol/common.js";
import type { ServerNotificationMethod } from "../protocol/methods.js";
import type { RequestingSubscriber } from "./server-requests.js";

export interface Subscriber extends RequestingSubscriber {
  readonly id: number;
  /** `emittedAtMs`: when the notification was first emitted (replays keep the original time). */
  notify(method: string, params: object, emittedAtMs?: number): void;
  /**
   * The same, as one object shared by every subscriber of the delivery, so that a transport can
   * serialise it once for all of them (issue 16). Optional; without it `notify` is called.
   */
  notifyShared?(n: SharedNotification): void;
}

/** A notification as delivered to all subscribers at once; its members never change after delivery. */
export interface SharedNotification {
  readonly method: string;
  readonly params: object;
  readonly emittedAtMs: number;
  /** Filled by the first connection that serialises it, reused by the others (src/rpc/prepared-notification.ts). */
  serialised?: unknown;
}

/** What the turn runner keeps on a loaded thread (an ActiveTurn, active-turn.ts). */
export interface ActiveTurnHandle {
  readonly id: string;
}

export interface ThreadDefaults {
  modelProvider: string;
  model: string;
  cwd: string;
  approvalPolicy: AskForApproval;
  sandbox: SandboxMode;
}

export interface RuntimeLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export class ThreadNotFoundError extends Error {
  constructor(readonly threadId: string) {
    super(`thread not found: ${threadId}`);
    this.name = "ThreadNotFoundError";
  }
}

/** A notification to record and publish; `seq` is added by the runtime. */
export interface ThreadEvent {
  method: ServerNotificationMethod;
  params: Record<string, unknown>;
  /** How it is stored when that differs: params referring to item rows instead of repeating them (event-refs.ts). */
  stored?: { params: Record<string, unknown>; itemIds: string[] };
}
