/**
 * The review turn (review/start): a turn of the thread whose input is a review request (the
 * target's instructions and the review rubric, agent/review.ts) instead of a user message. It
 * opens with an `enteredReviewMode` item naming what is reviewed, the model works as in any turn
 * (its messages and commands are items as usual), and it closes with `exitedReviewMode` carrying
 * the review — the model's last answer.
 */
import type { LoopResult } from "../agent/loop.js";
import { reviewMessage, reviewRequest } from "../agent/review.js";
import { uuidv7 } from "../ids.js";
import type { ThreadItem } from "../protocol/items.js";
import type { ReviewTarget } from "../protocol/review.js";
import type { Turn } from "../protocol/thread.js";
import type { ActiveTurn } from "./active-turn.js";
import type { AgentTurns } from "./agent-turn.js";
import { completedEvent } from "./item-recorder.js";
import type { LoadedThread } from "./loaded-thread.js";
import { inIssueOrder } from "../store/transaction.js";
import type { Subscriber } from "./thread-types.js";
import { firstFailure, turnFailed } from "./turn-errors.js";
import { assertCwdExists, openingEntries, userItemStarted, type TurnParts } from "./turn-lifecycle.js";

export class ReviewTurns {
  constructor(
    private readonly parts: TurnParts,
    private readonly agent: AgentTurns,
  ) {}

  async review(threadId: string, target: ReviewTarget, requester: Subscriber, responded: Promise<void>): Promise<{ turn: Turn }> {
    const { deps, recorder, lifecycle } = this.parts;
    const thread = await deps.runtime.load(threadId);
    deps.runtime.unrecorded?.assertRecorded(thread.id);
    const request = reviewRequest(target);
    const turn = await lifecycle.begin(thread, requester, (t, a) => this.run(t, a), {
      check: () => assertCwdExists(thread.record.cwd),
      opening: async (active, record, now) => {
        const item: ThreadItem = { type: "enteredReviewMode", id: uuidv7(), review: request.hint, startedAtMs: now, completedAtMs: now };
        const message = { role: "user" as const, content: [{ type: "text" as const, text: reviewMessage(request) }] };
        const writeHistory = deps.historyLog.stage(thread, active.id, openingEntries(deps, thread, active.ordinal, message));
        return {
          events: [userItemStarted(thread, active, item, now), completedEvent(thread, active, item, now)],
          write: (tx) => inIssueOrder([deps.turns.insertTurn(tx, record), recorder.insert(tx, thread, active, item, "completed", now), writeHistory(tx)]),
        };
      },
      after: responded,
    });
    return { turn };
  }

  /** The agent loop, then the closing item (also when the loop failed: it says why there is no review). */
  private async run(thread: LoadedThread, turn: ActiveTurn): Promise<LoopResult> {
    let result: LoopResult;
    try {
      result = await this.agent.run(thread, turn);
    } catch (err) {
      result = turnFailed(err);
    }
    try {
      await this.exitReviewMode(thread, turn, result);
    } catch (err) {
      result = firstFailure(result, err);
    }
    return result;
  }

  /** The review turn's closing item: the model's last answer, or why there is none. */
  private async exitReviewMode(thread: LoadedThread, turn: ActiveTurn, result: LoopResult): Promise<void> {
    const { deps, recorder, stream } = this.parts;
    let review = "";
    let last = -1;
    for (const { ordinal, item } of turn.messages?.values() ?? []) {
      if (item.type === "agentMessage" && ordinal > last && item.text.trim() !== "") {
        last = ordinal;
        review = item.text;
      }
    }
    // The last model message's record is held for the turn's end (turn-stream.ts): it goes first,
    // so its item/completed precedes exitedReviewMode.
    for (const item of turn.deferred?.items ?? []) if (item.type === "agentMessage" && item.text.trim() !== "") review = item.text;
    await stream.flushDeferred(thread, turn);
    if (turn.abort.signal.aborted) review ||= "The review was interrupted.";
    else if (result.stopReason === "error") review ||= `The review failed: ${result.error?.message ?? "unknown error"}`;
    const now = Date.now();
    const exited: ThreadItem = { type: "exitedReviewMode", id: uuidv7(), review, startedAtMs: now, completedAtMs: now };
    await deps.runtime.commit(thread, [userItemStarted(thread, turn, exited, now), completedEvent(thread, turn, exited, now)], (tx) =>
      recorder.insert(tx, thread, turn, exited, "completed", now),
    );
  }
}
