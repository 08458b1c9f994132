/**
 * Thread operations on the history rather than on a running turn: resume (subscribe, settings
 * changes, replay), fork (a pointer to the fork point, never a copy), rollback (a marker), and
 * reading the turns a client sees.
 */
import type { Transaction } from "../store/transaction.js";
import type { ThreadForkParams, ThreadResumeParams, Turn } from "../protocol/thread.js";
import type { ThreadItem } from "../protocol/items.js";
import { uuidv7 } from "../ids.js";
import type { ThreadRecord } from "../store/records.js";
import type { HistoryEntry } from "../store/history-entry.js";
import type { TurnStore } from "../store/turn-store.js";
import { environmentContext } from "../agent/prompt.js";
import { rolledBackTurns } from "./history.js";
import type { HistoryLog } from "./history-log.js";
import { applyOverrides, environmentOf, settingsMessage } from "./settings.js";
import { mergeThreadConfig, sameThreadMcpServers } from "./thread-mcp.js";
import { settingsResponse, threadView } from "./thread-view.js";
import type { LoadedThread } from "./loaded-thread.js";
import type { RuntimeLogger, Subscriber } from "./thread-types.js";
import type { ThreadRuntime } from "./threads.js";
import { TurnRequestError } from "./turn-errors.js";
import { turnView } from "./turn-view.js";

export class ThreadHistoryOps {
  constructor(
    private readonly runtime: ThreadRuntime,
    private readonly turns: TurnStore,
    private readonly historyLog: HistoryLog,
    private readonly settings: { shell: string },
    private readonly log: RuntimeLogger,
  ) {}

  private get threads() {
    return this.runtime.store;
  }

  // ---- thread/resume -----------------------------------------------------------------------

  async resume(p: ThreadResumeParams, subscriber: Subscriber, responded: Promise<void>) {
    const thread = await this.runtime.load(p.threadId);
    const before = thread.record;
    // A config given on resume replaces the keys it names (its mcp_servers: the thread's own MCP servers).
    const config = mergeThreadConfig(before.config, p.config);
    const after = { ...applyOverrides(before, p), config };
    const recordChanged =
      (["model", "modelProvider", "reasoningEffort", "cwd", "approvalPolicy", "sandbox", "sandboxPolicy"] as const).some((k) => JSON.stringify(before[k]) !== JSON.stringify(after[k])) ||
      !sameThreadMcpServers(before.config, config);
    const message = settingsMessage(before, after, this.settings.shell, p);
    if ((recordChanged || message) && thread.activeTurn) throw new TurnRequestError(`cannot change settings of thread ${thread.id} while turn ${thread.activeTurn.id} is running`);
    if (recordChanged || message) {
      // Under the lease (LeaseHeldError while a turn runs on another process); commit gives it back.
      await this.runtime.claim(thread);
      try {
        await this.historyLog.ensure(thread);
      // Checked again after the await: a turn/start may have claimed the thread meanwhile.
      if (thread.activeTurn) throw new TurnRequestError(`cannot change settings of thread ${thread.id} while turn ${thread.activeTurn.id} is running`);
      let entries: HistoryEntry[] = message ? [{ kind: "message", turnOrdinal: null, message }] : [];
      if (thread.entries!.length === 0) {
        // The first turn's environment context will state cwd/approval/sandbox, but instructions
        // have no other place: open the log with that context now and append them after it.
        const instructions = settingsMessage(after, after, this.settings.shell, p);
        entries = instructions
          ? [
              { kind: "message", turnOrdinal: null, message: environmentContext(environmentOf(after, this.settings.shell)) },
              { kind: "message", turnOrdinal: null, message: instructions },
            ]
          : [];
      }
      const writeHistory = entries.length > 0 ? this.historyLog.stage(thread, null, entries) : null;
      const now = Date.now();
      await this.runtime.commit(thread, [], async (tx) => {
        await this.threads.updateThread(tx, thread.id, {
          model: after.model,
          modelProvider: after.modelProvider,
          reasoningEffort: after.reasoningEffort,
          cwd: after.cwd,
          approvalPolicy: after.approvalPolicy,
          sandbox: after.sandbox,
          sandboxPolicy: after.sandboxPolicy,
          config: after.config,
          updatedAtMs: now,
        });
        if (writeHistory) await writeHistory(tx);
      });
      thread.record = { ...after, updatedAtMs: now };
      } finally {
        this.runtime.releaseIfIdle(thread);
      }
    }
    // A thread running on another process (followed through its relays): the response waits until
    // this process listens and knows where live delivery starts, and the turns are read after
    // that — else an event committed there between the response and that point reached neither
    // the response nor the client (a turn's end went missing, test/workers.e2e.test.ts).
    const followed = this.runtime.cluster?.fanout != null && !thread.lease;
    let attached: Promise<void> | null = null;
    if (followed) {
      let listening!: () => void;
      const ready = new Promise<void>((resolve) => (listening = resolve));
      attached = this.runtime.attach(thread, subscriber, p.afterSeq ?? null, responded, listening);
      await Promise.race([ready, attached.then(() => {}, () => {})]); // its failure is logged below
    }
    const turns = p.excludeTurns ? [] : await this.turnsOf(thread.id);
    attached ??= this.runtime.attach(thread, subscriber, p.afterSeq ?? null, responded);
    attached.catch((err) => this.log.error({ err, threadId: thread.id }, "could not replay events to a resumed client"));
    return {
      ...settingsResponse(threadView(thread.record, thread.status, turns), thread.record),
      collaborationMode: null,
      turnsBackwardsCursor: null,
      itemsBackwardsCursor: null,
    };
  }

  // ---- thread/fork and thread/rollback -------------------------------------------------------

  /**
   * A fork is a new thread pointing at the thread that owns the fork point and how much of its
   * log and turns it sees — no history is copied, so forking costs the same at any size.
   */
  /** `userId`: whose the fork is (the user forking; default: the source's owner). */
  async fork(p: ThreadForkParams & { userId?: string }, subscriber: Subscriber, responded: Promise<void>) {
    const source = await this.runtime.load(p.threadId);
    // Forking must not cost what the history costs: without a lastTurnId only counts are needed,
    // so an unloaded source is not read (the full log is read only to check a fork point).
    if (p.lastTurnId) await this.historyLog.ensure(source);
    const counts = source.entries
      ? { turns: source.turnCount, messages: source.messageCount, emptyLog: source.entries.length === 0 }
      : await this.counts(source.record);
    let owner = source.record;
    let forkTurnCount = counts.turns;
    let forkMessageCount = counts.messages;
    if (p.lastTurnId) {
      const turn = await this.turns.getTurn(p.lastTurnId);
      const chain = await this.turns.ancestry(source.id);
      const link = turn ? chain.find((c) => c.id === turn.threadId) : undefined;
      if (!turn || !link || (link.turnLimit !== null && turn.ordinal >= link.turnLimit))
        throw new TurnRequestError(`turn ${p.lastTurnId} is not part of thread ${source.id}`);
      // A rolled-back turn is stored but no longer part of the thread: forking "through" it would
      // silently give a fork without it.
      // Read again if the history budget dropped it during the awaits above (history-budget.ts).
      const sourceLog = source.entries ?? (await this.turns.historyEntries(source.id));
      if (rolledBackTurns(sourceLog, [turn.ordinal]).size > 0) throw new TurnRequestError(`turn ${p.lastTurnId} was rolled back from thread ${source.id}`);
      if (turn.status === "inProgress") throw new TurnRequestError(`cannot fork at turn ${turn.id}: it is still running`);
      if (turn.threadId !== source.id) owner = await this.runtime.getRecord(turn.threadId);
      forkTurnCount = turn.ordinal + 1;
      const next = await this.turns.firstEntryAfterTurn(turn.threadId, turn.ordinal);
      const ownerCount = turn.threadId === source.id ? source.messageCount : (link.limit ?? (await this.turns.countModelMessages(turn.threadId)));
      forkMessageCount = next === null ? ownerCount : Math.min(next, ownerCount);
    }
    const now = Date.now();
    const base: ThreadRecord = {
      ...source.record,
      id: uuidv7(now),
      forkedFromId: source.id,
      forkParentId: owner.id,
      forkTurnCount,
      forkMessageCount,
      // Codex's fork keeps the source's name (the TUI's footer shows it after /fork).
      name: source.record.name,
      ephemeral: p.ephemeral ?? false,
      archived: false,
      systemError: false,
      tokenUsage: null,
      seqReserved: 0,
      createdAtMs: now,
      updatedAtMs: now,
      userId: p.userId ?? source.record.userId,
    };
    const record = { ...applyOverrides(base, p), config: mergeThreadConfig(base.config, p.config) };
    const message = settingsMessage(base, record, this.settings.shell, p);
    let entries: HistoryEntry[] = message ? [{ kind: "message", turnOrdinal: null, message }] : [];
    if (!p.lastTurnId && counts.emptyLog) {
      // Nothing inherited: the fork's first turn opens the log with the environment context (which
      // states the new settings) only while the log is empty, so instructions go after it now.
      const instructions = settingsMessage(record, record, this.settings.shell, p);
      entries = instructions
        ? [
            { kind: "message", turnOrdinal: null, message: environmentContext(environmentOf(record, this.settings.shell)) },
            { kind: "message", turnOrdinal: null, message: instructions },
          ]
        : [];
    }
    const write = entries.length
      ? (tx: Transaction) => this.turns.appendHistory(tx, record.id, entries.map((entry, ordinal) => ({ ordinal, turnId: null, entry })))
      : undefined;
    const response = await this.runtime.createThread(record, subscriber, { responded, write });
    const turns = p.excludeTurns ? [] : await this.turnsOf(record.id);
    this.runtime.maybeUnload(source); // loaded only to read it
    return { ...response, thread: { ...response.thread, turns } };
  }

  /** Turn and log counts of a thread that is not loaded, without reading its history. */
  private async counts(r: ThreadRecord): Promise<{ turns: number; messages: number; emptyLog: boolean }> {
    const [ownTurns, messages] = await Promise.all([this.turns.countTurns(r.id), this.turns.countModelMessages(r.id)]);
    return { turns: (r.forkTurnCount ?? 0) + ownTurns, messages, emptyLog: messages === 0 && !r.forkMessageCount };
  }

  /** Takes the last `numTurns` turns out of the model context (a marker; nothing is deleted). */
  async rollback(threadId: string, numTurns: number): Promise<Turn[]> {
    const thread = await this.runtime.load(threadId);
    if (thread.activeTurn) throw new TurnRequestError(`cannot roll back thread ${threadId} while turn ${thread.activeTurn.id} is running`);
    await this.runtime.claim(thread);
    // Given back on every path (a refused rollback included), once nothing else runs.
    try {
      return await this.rollbackClaimed(thread, threadId, numTurns);
    } finally {
      this.runtime.releaseIfIdle(thread);
    }
  }

  private async rollbackClaimed(thread: LoadedThread, threadId: string, numTurns: number): Promise<Turn[]> {
    await this.historyLog.ensure(thread);
    const visible = (await this.turnsOf(threadId)).length;
    if (numTurns > visible) throw new TurnRequestError(`cannot roll back ${numTurns} turns: thread ${threadId} has ${visible}`);
    const { visible: ordinals, next: toTurnOrdinal } = await this.turnOrdinals(thread);
    const fromTurnOrdinal = ordinals[ordinals.length - numTurns]!;
    const write = this.historyLog.stage(thread, null, [{ kind: "rollback", fromTurnOrdinal, toTurnOrdinal }]);
    const now = Date.now();
    await this.runtime.commit(thread, [], async (tx) => {
      await write(tx);
      await this.threads.updateThread(tx, threadId, { updatedAtMs: now });
    });
    thread.record = { ...thread.record, updatedAtMs: now };
    const turns = await this.turnsOf(threadId);
    this.runtime.maybeUnload(thread);
    return turns;
  }

  /** The ordinals of the thread's turns still in the conversation, and the next turn's ordinal. */
  private async turnOrdinals(thread: LoadedThread): Promise<{ visible: number[]; next: number }> {
    const { turns } = await this.turns.turnsWithItems(thread.id);
    const all = turns.map((t) => t.ordinal);
    const gone = rolledBackTurns(thread.entries!, all);
    return { visible: all.filter((o) => !gone.has(o)), next: Math.max(thread.turnCount, ...all.map((o) => o + 1)) };
  }

  async turnsOf(threadId: string): Promise<Turn[]> {
    const loaded = this.runtime.loaded.get(threadId);
    const entries = loaded?.entries ?? (await this.turns.historyEntries(threadId));
    const { turns: all, items } = await this.turns.turnsWithItems(threadId);
    const gone = rolledBackTurns(entries, all.map((t) => t.ordinal));
    const turns = all.filter((t) => !gone.has(t.ordinal));
    const byTurn = new Map<string, ThreadItem[]>();
    for (const i of items) {
      const list = byTurn.get(i.turnId) ?? [];
      list.push(i.payload);
      byTurn.set(i.turnId, list);
    }
    return turns.map((t) => turnView(t, byTurn.get(t.id) ?? []));
  }
}
