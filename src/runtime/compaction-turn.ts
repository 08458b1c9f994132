/**
 * thread/compact/start: a turn of its own whose only item is the contextCompaction (the summary
 * itself is compaction.ts).
 */
import type { LoopResult } from "../agent/loop.js";
import { emptyUsage } from "../agent/messages.js";
import { uuidv7 } from "../ids.js";
import type { ThreadItem } from "../protocol/items.js";
import type { ActiveTurn } from "./active-turn.js";
import type { LoadedThread } from "./loaded-thread.js";
import type { Subscriber } from "./thread-types.js";
import type { TurnParts } from "./turn-lifecycle.js";
import { turnModel } from "./turn-model.js";

export class CompactionTurns {
  constructor(private readonly parts: TurnParts) {}

  async compactThread(threadId: string, requester: Subscriber): Promise<void> {
    const { runtime } = this.parts.deps;
    const thread = await runtime.load(threadId);
    runtime.unrecorded?.assertRecorded(thread.id);
    await this.parts.lifecycle.begin(thread, requester, (t, a) => this.run(t, a));
  }

  private async run(thread: LoadedThread, turn: ActiveTurn): Promise<LoopResult> {
    const { deps, recorder, compactor } = this.parts;
    // The model and tools as an agent turn has them (the MCP servers ready), also when no call is made.
    const { provider, request } = await turnModel(this.parts, thread, turn);
    const context = deps.historyLog.context(thread);
    if (context.length === 0) {
      // Nothing to summarise yet (a new thread): the context is as small as it gets. The turn
      // still shows a compaction, without a model call.
      const started = Date.now();
      const item: ThreadItem = { type: "contextCompaction", id: uuidv7(), startedAtMs: started };
      await recorder.started(thread, turn, { ...item, completedAtMs: null });
      await recorder.completed(thread, turn, [{ ...item, completedAtMs: Date.now() }]);
      return { stopReason: "finalAnswer", error: null, note: null, modelCalls: 0, usage: emptyUsage() };
    }
    // A compaction that cannot produce a summary throws why (the turn fails with it); null: interrupted.
    const compacted = await compactor.compact(thread, turn, provider, request, context, turn.abort.signal, true);
    return { stopReason: compacted ? "finalAnswer" : "interrupted", error: null, note: null, modelCalls: 1, usage: emptyUsage() };
  }
}
