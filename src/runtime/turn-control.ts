/**
 * What clients do to a running turn: interrupt it, steer it (input for the model's next call),
 * wait for it; and the shutdown's interrupt of every turn. A request about a thread whose turn
 * runs on another process goes to that owner (`toOwnerIfElsewhere`); the owner runs the
 * `…Local` form.
 */
import type { UserInput } from "../protocol/common.js";
import type { ActiveTurn } from "./active-turn.js";
import type { RemoteCommand } from "./remote-commands.js";
import type { ThreadRuntime } from "./threads.js";
import { TurnRequestError } from "./turn-errors.js";
import type { TurnDeps } from "./turn-deps.js";
import { toUserMessage } from "./user-input.js";

/**
 * Sends `command` to the process that owns its thread, unless this process runs a turn of the
 * thread (or there is no cluster): then, as when no live process holds the lease, null — the
 * caller runs the request here. `beforeSend` runs first when it is sent.
 */
export async function toOwnerIfElsewhere(runtime: ThreadRuntime, command: RemoteCommand, beforeSend?: () => Promise<void>): Promise<{ result: unknown } | null> {
  const cluster = runtime.cluster;
  if (!cluster || runtime.loaded.get(command.threadId)?.activeTurn) return null;
  await beforeSend?.();
  return cluster.toOwner(command.threadId, command);
}

export class TurnControl {
  constructor(private readonly deps: TurnDeps) {}

  async interrupt(threadId: string, turnId: string): Promise<Record<string, never>> {
    // A turn running on another process: the request goes to its owner.
    if (await toOwnerIfElsewhere(this.deps.runtime, { kind: "interrupt", threadId, turnId })) return {};
    return this.interruptLocal(threadId, turnId);
  }

  async interruptLocal(threadId: string, turnId: string): Promise<Record<string, never>> {
    const { runtime, turns } = this.deps;
    const thread = runtime.loaded.get(threadId);
    const active = thread?.activeTurn as ActiveTurn | null | undefined;
    if (active && active.id === turnId) {
      active.abort.abort();
      return {};
    }
    // Idempotent: interrupting a turn that already ended is not an error.
    const stored = await turns.getTurn(turnId);
    if (stored && stored.threadId === threadId) return {};
    await runtime.getRecord(threadId); // unknown thread → ThreadNotFoundError
    throw new TurnRequestError(`turn not found on thread ${threadId}: ${turnId}`);
  }

  async steer(threadId: string, expectedTurnId: string, input: UserInput[], clientId: string | null): Promise<{ turnId: string }> {
    const forwarded = await toOwnerIfElsewhere(this.deps.runtime, { kind: "steer", threadId, turnId: expectedTurnId, input, clientId });
    if (forwarded) return forwarded.result as { turnId: string };
    return this.steerLocal(threadId, expectedTurnId, input, clientId);
  }

  async steerLocal(threadId: string, expectedTurnId: string, input: UserInput[], clientId: string | null): Promise<{ turnId: string }> {
    const { runtime } = this.deps;
    const thread = runtime.loaded.get(threadId);
    if (!thread) await runtime.getRecord(threadId);
    const active = thread?.activeTurn as ActiveTurn | null | undefined;
    if (!active) throw new TurnRequestError(`no active turn on thread ${threadId}`);
    if (active.id !== expectedTurnId) throw new TurnRequestError(`expected turn ${expectedTurnId} but the active turn is ${active.id}`);
    // Idempotent: the same clientUserMessageId again (a client retrying) adds nothing.
    if (clientId !== null && active.steerClientIds.has(clientId)) return { turnId: active.id };
    if (active.abort.signal.aborted) throw new TurnRequestError(`turn ${active.id} is being interrupted`);
    const message = await toUserMessage(input, thread!.record.cwd);
    // Checked again after the await: a turn that began ending meanwhile would never take the input.
    if (!active.steerable || active.abort.signal.aborted) throw new TurnRequestError(`no active turn on thread ${threadId}`);
    if (clientId !== null) {
      if (active.steerClientIds.has(clientId)) return { turnId: active.id };
      active.steerClientIds.add(clientId);
    }
    active.steering.push({ input, clientId, message });
    return { turnId: active.id };
  }

  /** Waits for a running turn to end (shutdown, tests). */
  async settle(threadId: string): Promise<void> {
    const active = this.deps.runtime.loaded.get(threadId)?.activeTurn as ActiveTurn | null | undefined;
    if (active) await active.finished;
  }

  /** Interrupts every running turn and waits for them to end (shutdown), except those waiting on approval. */
  async interruptAll(): Promise<void> {
    const running: Promise<void>[] = [];
    for (const thread of this.deps.runtime.loaded.values()) {
      const active = thread.activeTurn as ActiveTurn | null;
      // A turn waiting on an approval is left recorded as waiting: the next start restores it
      // and asks again, so a planned restart does not throw the user's pending decision away.
      if (active && active.pendingApprovals === 0) {
        active.abort.abort();
        running.push(active.finished);
      }
    }
    await Promise.allSettled(running);
  }
}
