/** The in-memory state of a running turn (one per thread), and the tool-call scope. */
import { AsyncLocalStorage } from "node:async_hooks";
import type { UserMessage } from "../agent/messages.js";
import type { UserInput } from "../protocol/common.js";
import type { ThreadItem } from "../protocol/items.js";
import type { Turn } from "../protocol/thread.js";
import type { ActiveTurnHandle } from "./threads.js";

export interface StreamingItem {
  id: string;
  kind: "agentMessage" | "reasoning";
  text: string;
  summary: string[];
  startedAtMs: number;
  /** Already completed on the wire because a later block of the same message started. */
  done?: boolean;
}

export interface SteerInput {
  input: UserInput[];
  clientId: string | null;
  message: UserMessage;
}

export class ActiveTurn implements ActiveTurnHandle {
  readonly abort = new AbortController();
  readonly steering: SteerInput[] = [];
  /** clientUserMessageIds of steer input already taken (a repeated turn/steer adds nothing). */
  readonly steerClientIds = new Set<string>();
  /** Items of the current model-call attempt, by content-block index. */
  readonly streaming = new Map<number, StreamingItem>();
  nextItemOrdinal = 0;
  /** The turn's position in its thread (set when it is recorded). */
  ordinal = 0;
  /** Approval requests out right now (the thread shows waitingOnApproval while > 0). */
  pendingApprovals = 0;
  /** performance.now() when the current model call started (metrics). */
  modelCallStartedAt = 0;
  /** Restored after a restart: call id → the item id recorded for it before the restart. */
  readonly restoredItems = new Map<string, string>();
  /** Item ids whose item/started is already recorded (restored), so starting them again is a no-op. */
  readonly alreadyRecorded = new Set<string>();
  /** Completed items whose record could not be written (retried once more when the turn ends). */
  readonly unrecorded = new Map<string, ThreadItem>();
  /** The provider's final error, already announced with an `error` notification. */
  announcedFailure = false;
  /** False once the turn is ending: turn/steer is refused from then on. */
  steerable = true;
  finished!: Promise<void>;
  private resolveRecorded!: (view: Turn) => void;
  private rejectRecorded!: (err: unknown) => void;
  /** Settles when turn/start has recorded this turn (or failed to): a duplicate turn/start waits on it. */
  readonly recorded = new Promise<Turn>((resolve, reject) => {
    this.resolveRecorded = resolve;
    this.rejectRecorded = reject;
  });
  constructor(
    readonly id: string,
    readonly startedAtMs: number,
    readonly clientUserMessageId: string | null,
  ) {
    this.recorded.catch(() => {}); // nobody may be waiting
  }
  recordedAs(view: Turn): void {
    this.resolveRecorded(view);
  }
  notRecorded(err: unknown): void {
    this.rejectRecorded(err);
  }
}

/** The tool call whose execution is running (see toolsFor). */
export const currentCall = new AsyncLocalStorage<string>();
