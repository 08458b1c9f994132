/**
 * Compaction (thread/compact/start, before a turn that is near the window, and on a context
 * overflow inside a turn): the model writes a summary of the context, then a marker replaces
 * everything so far — the current turn's messages too, which is what lets a turn that overflowed
 * on its own tool output go on — by environment + the user messages kept verbatim (the current
 * request always, shortened with a marker when it alone is too big; older ones as the budget
 * allows) + the summary. The full history stays stored and readable; requests from the marker on
 * extend it.
 *
 * The summary request is built to fit the window (agent/compaction.ts) and offers no tools (a model
 * that answered with a tool call would leave no summary). It is retried like any model call —
 * transient failures with backoff (and an `error` notification with willRetry), an overflow (the
 * window unknown, or counted differently) with half the budget — and when it cannot succeed the
 * compaction fails with the reason, never with an empty summary.
 */
import { COMPACTION_PROMPT, estimateTokens, fitForSummary, keptUserMessages, summaryMessage } from "../agent/compaction.js";
import type { Message } from "../agent/messages.js";
import { environmentContext } from "../agent/prompt.js";
import { retryDelayMs, sleep } from "../agent/retry.js";
import { uuidv7 } from "../ids.js";
import { ProviderError, type ModelProvider, type ModelRequest } from "../providers/types.js";
import type { HistoryEntry } from "../store/history-entry.js";
import type { ActiveTurn } from "./active-turn.js";
import type { ItemRecorder } from "./item-recorder.js";
import { environmentOf } from "./settings.js";
import type { TurnDeps } from "./turn-deps.js";
import { turnError } from "./turn-errors.js";
import type { LoadedThread } from "./loaded-thread.js";

/** Summary requests tried with a smaller budget after an overflow (each half the one before). */
const SUMMARY_OVERFLOW_ATTEMPTS = 5;
/** Share of the window the summary request may use (the rest is room for the summary itself). */
const SUMMARY_INPUT_SHARE = 0.7;
/** Share of the window kept for user messages in the compacted history. */
const USER_MESSAGES_SHARE = 0.2;

/** A compaction that could not produce a summary; the message says why (the turn's error). */
export class CompactionError extends ProviderError {}

function compactionFailed(reason: string, cause?: ProviderError): CompactionError {
  return new CompactionError(cause?.kind ?? "contextOverflow", `could not compact the context: ${reason}`, { status: cause?.status ?? null, cause });
}

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
   * context; throws a ProviderError saying why when no summary can be had (the item is closed first).
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
    let summary: string | null;
    try {
      summary = await this.summarize(thread, turn, provider, request, history, signal);
    } catch (err) {
      await this.recorder.completed(thread, turn, [{ ...item, completedAtMs: Date.now() }]);
      throw err;
    }
    const now = Date.now();
    const done = { ...item, completedAtMs: now };
    if (summary === null) {
      // Interrupted: the turn ends as such.
      await this.recorder.completed(thread, turn, [done]);
      return null;
    }
    const window = settings.contextWindow;
    const users = keptUserMessages(history, window ? Math.floor(window * USER_MESSAGES_SHARE) : 20_000);
    const marker: HistoryEntry = {
      kind: "compaction",
      // Everything so far goes, this turn's messages included (they are summarised; its user input
      // is among the user messages kept verbatim). A compact-only turn has none.
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

  /** The summary text; null when interrupted; throws (compactionFailed) when none can be had. */
  private async summarize(
    thread: LoadedThread,
    turn: ActiveTurn,
    provider: ModelProvider,
    request: Omit<ModelRequest, "messages">,
    history: readonly Message[],
    signal: AbortSignal,
  ): Promise<string | null> {
    const { settings, log } = this.deps;
    const prompt: Message = { role: "user", content: [{ type: "text", text: COMPACTION_PROMPT }] };
    const overhead = estimateTokens({ system: request.system, prompt }) + 50;
    const window = settings.contextWindow;
    let budget = window ? Math.floor(window * SUMMARY_INPUT_SHARE) : Infinity;
    let overflows = 0;
    for (let retry = 0; !signal.aborted; ) {
      const fitted = fitForSummary(history, budget, overhead, thread.startedCalls);
      if (!fitted.ok) throw compactionFailed(fitted.reason);
      try {
        // No tools: the summary is text, and a model offered tools may answer with a call instead.
        const summary = await this.requestSummary(provider, { ...request, tools: [], messages: [...fitted.messages, prompt] }, signal);
        if (summary === "") throw compactionFailed("the model answered the summary request with no text");
        return summary;
      } catch (err) {
        if (signal.aborted) return null;
        if (!(err instanceof ProviderError) || err instanceof CompactionError) throw err;
        if (err.kind === "contextOverflow" && ++overflows < SUMMARY_OVERFLOW_ATTEMPTS) {
          // The provider counts differently than the estimate (or the window is unknown): smaller.
          budget = Math.floor(Math.min(budget, overhead + estimateTokens(fitted.messages)) / 2);
          log.warn({ threadId: thread.id, overflows, budget }, "summary request overflowed; retrying smaller");
          continue;
        }
        if (!err.retryable || retry >= settings.retry.maxRetries) throw compactionFailed(`the summary request failed: ${err.message}`, err);
        retry++;
        const retryInMs = retryDelayMs(settings.retry, retry, err.retryAfterMs);
        log.warn({ threadId: thread.id, kind: err.kind, retryInMs }, "summary request failed; retrying");
        const error = { ...turnError(err), additionalDetails: `retrying the summary request in ${retryInMs} ms (retry ${retry} of ${settings.retry.maxRetries})` };
        await this.deps.runtime.commit(thread, [{ method: "error", params: { error, willRetry: true, threadId: thread.id, turnId: turn.id } }]);
        try {
          await sleep(retryInMs, signal);
        } catch {
          return null;
        }
      }
    }
    return null;
  }

  /** One summary request; the text of its answer (reasoning and anything else left out). */
  private async requestSummary(provider: ModelProvider, request: ModelRequest, signal: AbortSignal): Promise<string> {
    for await (const ev of provider.stream(request, signal)) {
      if (ev.type === "done") return ev.message.content.flatMap((b) => (b.type === "text" ? [b.text] : [])).join("").trim();
    }
    throw new ProviderError("streamIncomplete", "the summary stream ended without its final event");
  }
}
