/**
 * Steering input (DESIGN.md §3.8): what a user sends while a turn runs (`turn/steer`), queued
 * until the loop takes it before its next model call. One queue type for the runtime and the
 * loop's tests, so the loop is tested against the contract it runs with: `take()` drains what is
 * queued and hands it to the loop; what was taken is kept until the caller has recorded it
 * (`claimTaken`), so the record (items with their client ids) follows the order the model saw.
 */
import type { UserMessage } from "./messages.js";

export interface SteeringEntry {
  /** What the model is sent. */
  message: UserMessage;
}

export class SteeringQueue<E extends SteeringEntry = SteeringEntry> {
  private readonly queued: E[] = [];
  private readonly taken: E[] = [];

  push(entry: E): void {
    this.queued.push(entry);
  }

  /** Input waiting for the loop. */
  get length(): number {
    return this.queued.length;
  }

  /** Drains the queue: its messages, oldest first, for the loop to append to its history. */
  take(): UserMessage[] {
    const entries = this.queued.splice(0);
    this.taken.push(...entries);
    return entries.map((e) => e.message);
  }

  /** The first `n` taken entries not yet claimed (the caller records them as the loop reports them). */
  claimTaken(n: number): E[] {
    return this.taken.splice(0, n);
  }
}
