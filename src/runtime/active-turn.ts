/** The in-memory state of a running turn (one per thread), and the tool-call scope. */
import { AsyncLocalStorage } from "node:async_hooks";
import type { MessagePhase, UserMessage } from "../agent/messages.js";
import { SteeringQueue, type SteeringEntry } from "../agent/steering.js";
import type { UserInput } from "../protocol/common.js";
import type { ThreadItem } from "../protocol/items.js";
import type { Turn } from "../protocol/thread.js";
import type { Transaction } from "../store/transaction.js";
import type { ActiveTurnHandle, ThreadEvent } from "./thread-types.js";

export interface StreamingItem {
  id: string;
  kind: "agentMessage" | "reasoning";
  text: string;
  summary: string[];
  startedAtMs: number;
  /** agentMessage: the provider's phase for the text (OpenAI Responses), when it gave one. */
  phase?: MessagePhase | null;
  /** A reasoning item already completed on the wire because a later block of the same message started. */
  done?: boolean;
  /**
   * Settles once its item/started is recorded (and published), or its record failed: then
   * `failed` is set, nothing of the item was published, and it is never completed.
   */
  recorded?: Promise<void>;
  failed?: boolean;
}

export interface SteerInput extends SteeringEntry {
  input: UserInput[];
  clientId: string | null;
}

export class ActiveTurn implements ActiveTurnHandle {
  readonly abort = new AbortController();
  /** turn/steer input: queued here, taken by the loop before its next model call. */
  readonly steering = new SteeringQueue<SteerInput>();
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
  /** A streamed item's item/started that could not be recorded: the turn fails with it (turn-stream.ts). */
  recordError: unknown = null;
  /**
   * The last model message's record when no tool call follows it: held for the next transaction
   * (usually the end of the turn, so a message-only turn ends with one transaction, turn-end.ts).
   * `items`: the items it completes, in order (the turn/completed summary reads them from here).
   */
  deferred: {
    events: ThreadEvent[];
    /** `end`: the end of the turn's change to the thread row, made by the same UPDATE. */
    write: (tx: Transaction, end?: { systemError: boolean; updatedAtMs: number }) => Promise<void>;
    items: ThreadItem[];
  } | null = null;
  /**
   * The turn's user and agent messages as recorded, by id, with their ordinals: what turn/completed
   * summarises (turn-view.ts) without reading the items back. Null when not all of them passed
   * through this process (a turn restored after a restart): then they are read from the store.
   */
  messages: Map<string, { ordinal: number; item: ThreadItem }> | null = new Map();
  /** Notes an item recorded as started (with its ordinal) or completed (keeping the ordinal). */
  noteItem(item: ThreadItem, ordinal?: number): void {
    if (!this.messages || (item.type !== "userMessage" && item.type !== "agentMessage")) return;
    const known = ordinal ?? this.messages.get(item.id)?.ordinal;
    if (known === undefined) this.messages = null; // completed but never seen starting: ask the store
    else this.messages.set(item.id, { ordinal: known, item });
  }
  /** Forgets an item noted as started whose record failed (it was never announced). */
  forgetItem(id: string): void {
    this.messages?.delete(id);
  }
  /** The noted messages in turn order, or null (read them from the store). */
  knownMessages(): ThreadItem[] | null {
    return this.messages ? [...this.messages.values()].sort((a, b) => a.ordinal - b.ordinal).map((m) => m.item) : null;
  }
  /** The stop hooks ran for this turn's end (the loop's final answer): the end does not run them again. */
  stopHooksRan = false;
  /** A stop hook sent the model back to work in this turn (their input says so: `stop_hook_active`). */
  stopHookContinued = false;
  /** The provider's final error, already announced with an `error` notification. */
  announcedFailure = false;
  /** False once the turn is ending: turn/steer is refused from then on. */
  steerable = true;
  finished!: Promise<void>;
  /** User shell commands run inside this turn (thread/shellCommand while it ran): what the model is told of each, or null. */
  readonly userShell: Array<Promise<UserMessage | null>> = [];
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
    // Often nobody waits on it (only a duplicate turn/start does, and gets the error there); the failure
    // itself is thrown to the turn/start that hit it (TurnLifecycle.begin), so nothing is lost here.
    this.recorded.catch(() => {});
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
