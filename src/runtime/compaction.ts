/**
 * Compaction (thread/compact/start, before a turn that is near the window, and on a context
 * overflow inside a turn): the model writes a summary of the context, then a marker replaces
 * everything so far — the current turn's messages too, which is what lets a turn that overflowed
 * on its own tool output go on — by environment + the most recent user messages (verbatim) +
 * the summary. The full history stays stored and readable; requests from the marker on extend it.
 *
 * The summary request is built to fit the window (agent/compaction.ts) and, when the provider
 * still says it overflows (or the window is unknown), retried with half the budget.
 */
import { COMPACTION_PROMPT, estimateTokens, fitForSummary, recentUserMessages, summaryMessage } from "../agent/compaction.js";
import type { Message } from "../agent/messages.js";
import { environmentContext } from "../agent/prompt.js";
import { uuidv7 } from "../ids.js";
import { ProviderError, type ModelProvider, type ModelRequest } from "../providers/types.js";
import type { ActiveTurn } from "./active-turn.js";
import type { HistoryEntry } from "./history.js";
import { startedCallsOf } from "./history-log.js";
import type { ItemRecorder } from "./item-recorder.js";
import { environmentOf } from "./settings.js";
import type { TurnDeps } from "./turn-deps.js";
import type { LoadedThread } from "./threads.js";

/** Summary requests tried (each with half the budget of the one before) before giving up. */
const SUMMARY_ATTEMPTS = 5;
/** Share of the window the summary request may use (the rest is room for the summary itself). */
const SUMMARY_INPUT_SHARE = 0.7;
/** Share of the window kept for recent user messages in the compacted history. */
const USER_MESSAGES_SHARE = 0.2;

export class Compactor {
  constructor(
    private readonly deps: TurnDeps,
    private readonly recorder: ItemRecorder,
  ) {}

  /** Usage of the last model call passed the configured share of the context window. */
  needsAuto(thread: LoadedThread): boolean {
    const window = this.deps.settings.contextWindow;
    return Boolean(window && thread.lastInputTokens >= window * (this.deps.settings.autoCompactShare ?? 0.8) && this.deps.historyLog.context(thread).length > 2);
  }

  /**
   * Compacts `history` (the loop's, or the thread's before a turn). `wholeThread`: a
   * thread/compact/start turn, which has no messages of its own to fold in. Returns the new
   * context, or null when no summary came back.
   */
  async compact(
    thread: LoadedThread,
    turn: ActiveTurn,
    provider: ModelProvider,
    request: Omit<ModelRequest, "messages">,
    history: readonly Message[],
    signal: AbortSignal,
    wholeThread = false,
  ): Promise<Message[] | null> {
    const { settings, log, historyLog, runtime, turns } = this.deps;
    const item = { type: "contextCompaction" as const, id: uuidv7(), startedAtMs: Date.now() };
    await this.recorder.started(thread, turn, { ...item, completedAtMs: null });
    const summary = await this.summarize(thread, provider, request, history, signal);
    const now = Date.now();
    const done = { ...item, completedAtMs: now };
    if (!summary) {
      await this.recorder.completed(thread, turn, [done]);
      return null;
    }
    const window = settings.contextWindow;
    const users = recentUserMessages(history, window ? Math.floor(window * USER_MESSAGES_SHARE) : 20_000);
    const marker: HistoryEntry = {
      kind: "compaction",
      // Everything so far goes, this turn's messages included (they are summarised; its user input
      // is among the recent user messages kept verbatim). A compact-only turn has none.
      keepFromTurnOrdinal: wholeThread ? turn.ordinal : turn.ordinal + 1,
      messages: [environmentContext(environmentOf(thread.record, settings.shell)), ...users, summaryMessage(summary)],
    };
    const write = historyLog.stage(thread, turn.id, [marker]);
    await runtime.commit(thread, [{ method: "item/completed", params: { item: done, threadId: thread.id, turnId: turn.id, completedAtMs: now } }], async (tx) => {
      await write(tx);
      await turns.completeItem(tx, item.id, done, "completed", now);
    });
    thread.lastInputTokens = 0;
    log.info({ threadId: thread.id, turnId: turn.id, before: estimateTokens(history), after: estimateTokens(marker.messages) }, "compacted the context");
    return [...historyLog.context(thread)];
  }

  private async summarize(thread: LoadedThread, provider: ModelProvider, request: Omit<ModelRequest, "messages">, history: readonly Message[], signal: AbortSignal): Promise<string | null> {
    const prompt: Message = { role: "user", content: [{ type: "text", text: COMPACTION_PROMPT }] };
    const overhead = estimateTokens({ system: request.system, tools: request.tools, prompt }) + 50;
    const window = this.deps.settings.contextWindow;
    let budget = window ? Math.floor(window * SUMMARY_INPUT_SHARE) : Infinity;
    for (let attempt = 1; attempt <= SUMMARY_ATTEMPTS && !signal.aborted; attempt++) {
      const fitted = fitForSummary(history, budget, overhead, startedCallsOf(thread));
      if (!fitted) break;
      try {
        let summary = "";
        for await (const ev of provider.stream({ ...request, messages: [...fitted, prompt] }, signal)) {
          if (ev.type === "done") summary = ev.message.content.flatMap((b) => (b.type === "text" ? [b.text] : [])).join("").trim();
        }
        return summary || null;
      } catch (err) {
        if (!(err instanceof ProviderError && err.kind === "contextOverflow")) {
          this.deps.log.warn({ err, threadId: thread.id }, "compaction call failed");
          return null;
        }
        // The provider counts differently than the estimate (or the window is unknown): smaller.
        budget = Math.floor(Math.min(budget, overhead + estimateTokens(fitted)) / 2);
        this.deps.log.warn({ threadId: thread.id, attempt, budget }, "summary request overflowed; retrying smaller");
      }
    }
    return null;
  }
}
