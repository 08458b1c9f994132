/**
 * Loop events → items and notifications (recorded before published): streamed text and reasoning
 * become agentMessage/reasoning items with deltas, a finished model message completes them with
 * its token usage, and every message the loop appends to its history is stored in the thread's
 * history log (the loop owns the turn's history; this is where it is made durable).
 *
 * A failed attempt's output is void (DESIGN.md §3.6), whatever the order of its blocks: an agent
 * message completes only with its finished model message (never because a later block started),
 * so a failed attempt's text is closed with empty text — the authoritative item/completed retracts
 * the deltas clients showed — and a reasoning item the attempt had already completed (Codex's wire
 * order completes reasoning before the answer starts) is closed again, emptied. The `error`
 * notification (willRetry) that follows says why. Only the successful attempt's answer is an
 * agentMessage with text.
 *
 * A message the provider refused or filtered (loop event `refused`) is not an answer and joins no
 * history; its streamed text is completed as it was, marked incomplete, and the turn then fails.
 */
import type { LoopEvent } from "../agent/loop.js";
import { addUsage, emptyUsage, type AssistantMessage, type Message, type Usage } from "../agent/messages.js";
import { uuidv7 } from "../ids.js";
import type { ThreadItem } from "../protocol/items.js";
import type { ProviderStreamEvent } from "../providers/types.js";
import type { ActiveTurn, StreamingItem } from "./active-turn.js";
import type { ItemRecorder } from "./item-recorder.js";
import type { TurnDeps } from "./turn-deps.js";
import { turnError } from "./turn-errors.js";
import { contextWindowOf } from "./context-window.js";
import { inIssueOrder, type Transaction } from "../store/transaction.js";
import type { LoadedThread } from "./loaded-thread.js";
import type { ThreadEvent } from "./thread-types.js";
import { itemRef } from "../store/event-refs.js";
import { completedEvent } from "./item-recorder.js";

export class TurnStream {
  constructor(
    private readonly deps: TurnDeps,
    private readonly recorder: ItemRecorder,
  ) {}

  /**
   * A streamed delta takes the synchronous path (issue 33 item 1: no promise, microtask or
   * closure per delta beyond the loop's own await); every other event, or a delta behind a held
   * record, goes through onOtherEvent.
   */
  onLoopEvent(thread: LoadedThread, turn: ActiveTurn, e: LoopEvent): Promise<void> | void {
    if (e.type === "stream" && !turn.deferred) return this.onStream(thread, turn, e.event);
    return this.onOtherEvent(thread, turn, e);
  }

  private async onOtherEvent(thread: LoadedThread, turn: ActiveTurn, e: LoopEvent): Promise<void> {
    // The loop went on after a message without tool calls (steering, a reminder): its record first.
    if (turn.deferred) await this.flushDeferred(thread, turn);
    switch (e.type) {
      case "modelCallStart":
        turn.streaming.clear();
        turn.modelCallStartedAt = performance.now();
        return;
      case "stream":
        return this.onStream(thread, turn, e.event);
      case "modelCallFailed": {
        this.deps.observer.modelCall(thread.record.modelProvider, (performance.now() - turn.modelCallStartedAt) / 1000, e.error.kind);
        // An interrupt keeps what was shown (the user stopped it there); any other failure voids it.
        await this.closeStreamingItems(thread, turn, e.error.kind !== "aborted");
        if (e.error.kind === "aborted") return;
        if (!e.willRetry) turn.announcedFailure = true;
        const error = {
          ...turnError(e.error, { exhaustedRetries: !e.willRetry && e.error.retryable }),
          // The wait before the retry (Retry-After, capped) is visible to clients, not only in logs.
          additionalDetails: e.willRetry ? `retrying in ${e.retryInMs ?? 0} ms (retry ${e.attempt + 1} of ${e.maxRetries})` : null,
        };
        await this.deps.runtime.commit(thread, [{ method: "error", params: { error, willRetry: e.willRetry, threadId: thread.id, turnId: turn.id } }]);
        if (e.willRetry) this.deps.log.warn({ threadId: thread.id, turnId: turn.id, kind: e.error.kind, retryInMs: e.retryInMs }, "model call failed; retrying");
        return;
      }
      case "assistantMessage":
        return this.onAssistantMessage(thread, turn, e.message, e.usage);
      case "toolResult":
        return this.appendHistory(thread, turn, [e.result]);
      case "reminded":
        return this.appendHistory(thread, turn, [e.message]);
      case "refused":
        return this.onAssistantMessage(thread, turn, e.message, e.usage, e.detail);
      case "steered": {
        const steered = turn.steering.claimTaken(e.messages.length);
        const now = Date.now();
        for (const s of steered) {
          const item: ThreadItem = { type: "userMessage", id: uuidv7(), clientId: s.clientId, content: s.input, startedAtMs: now, completedAtMs: now };
          await this.recorder.started(thread, turn, { ...item, completedAtMs: null });
          await this.recorder.completed(thread, turn, [item]);
        }
        return this.appendHistory(thread, turn, e.messages);
      }
      case "compacted":
        return; // the compaction marker is stored by the compaction itself
    }
  }

  /** Commits a held model-message record on its own (ActiveTurn.deferred). */
  async flushDeferred(thread: LoadedThread, turn: ActiveTurn): Promise<void> {
    const held = turn.deferred;
    if (!held) return;
    turn.deferred = null;
    await this.deps.runtime.commit(thread, held.events, (tx) => held.write(tx));
  }

  async appendHistory(thread: LoadedThread, turn: ActiveTurn, messages: Message[]): Promise<void> {
    const write = this.deps.historyLog.stage(thread, turn.id, messages.map((message) => ({ kind: "message" as const, turnOrdinal: turn.ordinal, message })));
    await this.deps.runtime.commit(thread, [], write);
  }

  /** Synchronous unless earlier reasoning blocks have to be completed first (once per block). */
  private onStream(thread: LoadedThread, turn: ActiveTurn, ev: Exclude<ProviderStreamEvent, { type: "done" }>): Promise<void> | void {
    // Tool-call blocks come last and have no item until the tool runs: text before them is only
    // complete once the whole message is (a cut stream must not leave a completed partial answer).
    if (ev.type === "toolCallStart" || ev.type === "toolCallDelta") return;
    // An item/started that could not be recorded fails the turn.
    if (turn.recordError) return Promise.reject(turn.recordError);
    if (openReasoningBefore(turn, ev.index)) return this.completeEarlierBlocks(thread, turn, ev.index).then(() => this.publishDelta(thread, turn, ev));
    this.publishDelta(thread, turn, ev);
  }

  private publishDelta(thread: LoadedThread, turn: ActiveTurn, ev: Exclude<ProviderStreamEvent, { type: "done" | "toolCallStart" | "toolCallDelta" }>): void {
    const kind = ev.type === "textDelta" ? "agentMessage" : "reasoning";
    let item = turn.streaming.get(ev.index);
    if (!item) {
      const streamed: StreamingItem = { id: uuidv7(), kind, text: "", summary: [], startedAtMs: Date.now(), phase: ev.type === "textDelta" ? (ev.phase ?? null) : null };
      turn.streaming.set(ev.index, streamed);
      // Recorded before it is published, like every durable event; the stream is not held up
      // meanwhile: its deltas queue behind the item/started and go out right after it. If the
      // record fails, nothing of the item was or will be published (the turn fails).
      const onError = (err: unknown) => {
        streamed.failed = true;
        turn.recordError ??= err;
        turn.forgetItem(streamed.id);
      };
      streamed.recorded = this.recorder.started(thread, turn, streamingPayload(streamed), { onError }).catch(onError);
      item = streamed;
    }
    const shown = item;
    const unlessFailed = () => !shown.failed;
    const base = { threadId: thread.id, turnId: turn.id, itemId: item.id, delta: ev.delta };
    if (ev.type === "textDelta") {
      item.text += ev.delta;
      this.deps.runtime.publishLive(thread, "item/agentMessage/delta", base, unlessFailed);
    } else if (ev.type === "reasoningSummaryDelta") {
      while (item.summary.length <= ev.summaryIndex) item.summary.push("");
      item.summary[ev.summaryIndex] += ev.delta;
      this.deps.runtime.publishLive(thread, "item/reasoning/summaryTextDelta", { ...base, summaryIndex: ev.summaryIndex }, unlessFailed);
    } else {
      item.text += ev.delta;
      this.deps.runtime.publishLive(thread, "item/reasoning/textDelta", { ...base, contentIndex: 0 }, unlessFailed);
    }
  }

  /**
   * Waits until the item/started of every streamed item of the attempt has committed or failed
   * (a completion must not be recorded before its start, nor for an item never announced), and
   * returns the ones that were recorded.
   */
  private async announced(items: StreamingItem[]): Promise<StreamingItem[]> {
    await Promise.all(items.map((i) => i.recorded));
    return items.filter((i) => !i.failed);
  }

  /**
   * Blocks of one assistant message stream one after another in all three providers, so a delta
   * for block `index` means every earlier block is finished. Completing earlier reasoning now gives
   * Codex's wire order (reasoning started → deltas → reasoning completed → agentMessage started …).
   * Agent text is not completed early: the attempt may still fail, and a completed agentMessage
   * reads as an answer (it completes with the finished message, or is voided).
   */
  private async completeEarlierBlocks(thread: LoadedThread, turn: ActiveTurn, index: number): Promise<void> {
    const earlier = [...turn.streaming].filter(([i, item]) => i < index && item.kind === "reasoning" && !item.done).map(([, item]) => item);
    const finished = await this.announced(earlier);
    if (turn.recordError) throw turn.recordError;
    const now = Date.now();
    for (const item of finished) item.done = true;
    await this.recorder.completed(thread, turn, finished.map((item) => streamingPayload(item, now)));
  }

  /**
   * Ends the attempt's items: the open ones with what had arrived (interrupt: the user stopped it
   * there), or all of them voided (a failed attempt) — reasoning it had completed early included,
   * closed again with nothing in it.
   */
  async closeStreamingItems(thread: LoadedThread, turn: ActiveTurn, voided: boolean): Promise<void> {
    if (turn.streaming.size === 0) return;
    const now = Date.now();
    const items = await this.announced([...turn.streaming.values()]);
    turn.streaming.clear();
    const open = items.filter((i) => !i.done);
    const closing = voided ? [...open, ...items.filter((i) => i.done && (i.text !== "" || i.summary.some((s) => s !== "")))] : open;
    if (voided) for (const i of closing) Object.assign(i, { text: "", summary: [] });
    if (closing.length > 0) await this.recorder.completed(thread, turn, closing.map((i) => streamingPayload(i, now)));
  }

  /** A finished message: its items completed, its usage counted, and (unless `refused`) the message stored in the history. */
  private async onAssistantMessage(thread: LoadedThread, turn: ActiveTurn, message: AssistantMessage, usage: Usage, refused?: string): Promise<void> {
    const { runtime, observer, historyLog, settings, turns, log } = this.deps;
    await this.announced([...turn.streaming.values()]);
    if (turn.recordError) throw turn.recordError;
    const now = Date.now();
    observer.modelCall(thread.record.modelProvider, (performance.now() - turn.modelCallStartedAt) / 1000, "ok");
    observer.tokens(thread.record.modelProvider, usage, thread.record.userId);
    const toStart: ThreadItem[] = [];
    const completed: ThreadItem[] = [];
    message.content.forEach((block, index) => {
      if (block.type === "toolCall") return;
      const streamed = turn.streaming.get(index);
      if (streamed?.done) return; // completed on the wire when the next block started
      const kind = block.type === "text" ? "agentMessage" : "reasoning";
      if (!streamed && block.type === "text" && block.text === "") return;
      if (!streamed && block.type === "reasoning" && !block.text && block.summary.every((s) => !s)) return;
      const item: StreamingItem = streamed ?? { id: uuidv7(), kind, text: "", summary: [], startedAtMs: now };
      if (block.type === "text") {
        item.text = refused === undefined ? block.text : incompleteText(block.text, refused);
        item.phase = block.phase ?? null;
      } else {
        item.text = block.text;
        item.summary = [...block.summary];
      }
      if (!streamed) toStart.push(streamingPayload(item));
      completed.push(streamingPayload(item, now));
    });
    turn.streaming.clear();

    thread.lastInputTokens = usage.inputTokens;
    const total = addUsage(thread.record.tokenUsage ?? emptyUsage(), usage);
    thread.record = { ...thread.record, tokenUsage: total };
    const breakdown = (u: Usage) => ({
      totalTokens: u.totalTokens,
      inputTokens: u.inputTokens,
      cachedInputTokens: u.cachedInputTokens,
      cacheWriteInputTokens: u.cacheWriteInputTokens,
      outputTokens: u.outputTokens,
      reasoningOutputTokens: u.reasoningOutputTokens,
    });
    // A refused message is not an answer: it never joins the model history (the turn fails next).
    const writeHistory = refused === undefined ? historyLog.stage(thread, turn.id, [{ kind: "message", turnOrdinal: turn.ordinal, message }]) : async () => {};
    const cacheHit = usage.inputTokens > 0 ? usage.cachedInputTokens / usage.inputTokens : 0;
    log.info({ threadId: thread.id, turnId: turn.id, inputTokens: usage.inputTokens, cachedInputTokens: usage.cachedInputTokens, cacheHitRatio: Number(cacheHit.toFixed(3)) }, "model call completed");

    const records = toStart.map((item) => ({ item, ordinal: turn.nextItemOrdinal++ }));
    // Noted now: the end of the turn summarises them from memory (they may be recorded with it).
    for (const r of records) turn.noteItem(r.item, r.ordinal);
    for (const item of completed) turn.noteItem(item);
    // Both stored as references to the item rows written here (the text once, event-refs.ts): the
    // started payload is the completed one with completedAtMs null.
    const events: ThreadEvent[] = [
      ...toStart.map((item) => {
        const params = { item, threadId: thread.id, turnId: turn.id, startedAtMs: now };
        return { method: "item/started" as const, params, stored: { params: { ...params, item: itemRef(item, { completedAtMs: null }) }, itemIds: [item.id] } };
      }),
      ...completed.map((item) => completedEvent(thread, turn, item, now)),
      {
        method: "thread/tokenUsage/updated",
        params: { threadId: thread.id, turnId: turn.id, tokenUsage: { total: breakdown(total), last: breakdown(usage), modelContextWindow: contextWindowOf(settings.contextWindow, thread.record.modelProvider) } },
      },
    ];
    // Issued at once, in this order (pipelined: a started row is inserted before it is completed).
    const write = (tx: Transaction, end?: { systemError: boolean; updatedAtMs: number }) =>
      inIssueOrder([
        ...records.map((r) => this.recorder.write(tx, thread, turn, r.item, r.ordinal, "inProgress", now)),
        ...completed.map((item) => turns.completeItem(tx, item.id, item, "completed", now)),
        writeHistory(tx),
        this.deps.runtime.store.updateThread(tx, thread.id, { tokenUsage: total, updatedAtMs: now, ...end }),
      ]);
    // No tool call follows: the loop ends the turn next (or flushes this first when it goes on),
    // so the message and the end of the turn are recorded in one transaction.
    if (refused !== undefined || !message.content.some((b) => b.type === "toolCall")) {
      turn.deferred = { events, write, items: completed };
      return;
    }
    await runtime.commit(thread, events, write);
  }
}

/** Whether a reasoning block before `index` is still open (completeEarlierBlocks has work), without allocating. */
function openReasoningBefore(turn: ActiveTurn, index: number): boolean {
  for (const [i, item] of turn.streaming) if (i < index && item.kind === "reasoning" && !item.done) return true;
  return false;
}

/** The text of a refused or filtered answer as the user sees it: what arrived, visibly marked incomplete. */
export function incompleteText(text: string, detail: string): string {
  return `${text}\n\n[incomplete: the provider refused or filtered this answer (${detail})]`;
}

export function streamingPayload(item: StreamingItem, completedAtMs: number | null = null): ThreadItem {
  const times = { startedAtMs: item.startedAtMs, completedAtMs };
  return item.kind === "agentMessage"
    ? { type: "agentMessage", id: item.id, text: item.text, phase: item.phase ?? null, moderation: null, memoryCitation: null, delivery: null, questions: null, ...times }
    : // A copy: the payload may be published or stored after later deltas have grown the summary.
      { type: "reasoning", id: item.id, summary: [...item.summary], content: item.text ? [item.text] : [], ...times };
}
