/**
 * Threads as records: start and create (recorded with their `thread/started` event), read and
 * list (with statuses as the database tells them), and metadata changes (name, archive). The
 * events go through the event log (event-log.ts) like every other.
 */
import type { Transaction } from "../store/transaction.js";
import type { SandboxPolicy, ThreadStatus } from "../protocol/common.js";
import type { Thread, ThreadListParams, ThreadStartParams, ThreadStartResponse, Turn } from "../protocol/thread.js";
import { uuidv7 } from "../ids.js";
import type { ThreadRecord } from "../store/records.js";
import type { ThreadCursor } from "../store/thread-store.js";
import type { EventLog } from "./event-log.js";
import type { LoadedThreads } from "./loaded-threads.js";
import { SeqCounter } from "./seq.js";
import { sandboxModeOf } from "./settings.js";
import type { Subscriptions } from "./subscriptions.js";
import type { ThreadContext } from "./thread-context.js";
import { ThreadNotFoundError, type Subscriber, type ThreadDefaults, type ThreadEvent } from "./thread-types.js";
import { settingsResponse, threadView } from "./thread-view.js";

export interface ThreadListResult {
  data: Thread[];
  nextCursor: string | null;
  backwardsCursor: string | null;
}

const encodeCursor = (c: ThreadCursor | null) => (c ? Buffer.from(JSON.stringify(c)).toString("base64url") : null);

export function decodeCursor(text: string): ThreadCursor | null {
  try {
    const c = JSON.parse(Buffer.from(text, "base64url").toString("utf8")) as ThreadCursor;
    if (
      ["created_at", "updated_at", "recency_at", "section_position"].includes(c.key) &&
      Number.isSafeInteger(c.value) &&
      typeof c.id === "string" &&
      (c.inclusive === undefined || typeof c.inclusive === "boolean")
    )
      return c;
  } catch {
    /* not one of ours: null, which thread/list refuses as an invalid cursor */
  }
  return null;
}

export class ThreadRecords {
  constructor(
    private readonly ctx: ThreadContext,
    private readonly events: EventLog,
    private readonly threads: LoadedThreads,
    private readonly subscriptions: Subscriptions,
    private readonly defaults: ThreadDefaults,
    private readonly cliVersion: string,
  ) {}

  /**
   * Statuses as the database tells them: a turn in progress anywhere (on whichever process) makes
   * the thread active; otherwise the local view, or systemError/notLoaded from the row.
   */
  async statusesOf(records: ThreadRecord[]): Promise<Map<string, ThreadStatus>> {
    const running = this.ctx.cluster ? await this.ctx.cluster.leases.store.runningStatus(records.map((r) => r.id)) : new Map<string, { waitingOnApproval: boolean }>();
    const out = new Map<string, ThreadStatus>();
    for (const r of records) {
      const local = this.ctx.loaded.get(r.id);
      const run = running.get(r.id);
      if (local?.activeTurn) out.set(r.id, local.status);
      else if (run) out.set(r.id, { type: "active", activeFlags: run.waitingOnApproval ? ["waitingOnApproval"] : [] });
      else if (local && local.status.type !== "active") out.set(r.id, local.status);
      else if (local) out.set(r.id, r.systemError ? { type: "systemError" } : { type: "idle" });
      else out.set(r.id, { type: "notLoaded" });
    }
    return out;
  }

  /** `source`: the Thread.source label (which kind of client started it, see thread-source.ts). */
  async startThread(
    p: ThreadStartParams & { sandboxPolicy?: SandboxPolicy | null; source?: string; userId?: string },
    subscriber: Subscriber,
    responded?: Promise<void>,
  ): Promise<ThreadStartResponse> {
    const now = Date.now();
    const id = uuidv7(now);
    const record: ThreadRecord = {
      id,
      sessionId: id,
      forkedFromId: null,
      forkParentId: null,
      forkTurnCount: null,
      forkMessageCount: null,
      name: null,
      preview: "",
      ephemeral: p.ephemeral ?? false,
      archived: false,
      modelProvider: p.modelProvider ?? this.defaults.modelProvider,
      model: p.model ?? this.defaults.model,
      reasoningEffort: null,
      cwd: p.cwd ?? this.defaults.cwd,
      approvalPolicy: p.approvalPolicy ?? this.defaults.approvalPolicy,
      sandbox: p.sandbox ?? (p.sandboxPolicy ? sandboxModeOf(p.sandboxPolicy) : this.defaults.sandbox),
      sandboxPolicy: p.sandboxPolicy ?? null,
      baseInstructions: p.baseInstructions ?? null,
      developerInstructions: p.developerInstructions ?? null,
      dynamicTools: p.dynamicTools ?? [],
      config: p.config ?? null,
      cliVersion: this.cliVersion,
      source: p.source ?? "appServer",
      systemError: false,
      tokenUsage: null,
      seqReserved: 0,
      createdAtMs: now,
      updatedAtMs: now,
      userId: p.userId ?? "local",
    };
    return this.createThread(record, subscriber, { responded });
  }

  /**
   * Records a new thread (and `write`, e.g. a fork's first history entries) with its
   * `thread/started` event, subscribes `subscriber`, and answers with the settings response.
   */
  async createThread(
    record: ThreadRecord,
    subscriber: Subscriber,
    opts: { responded?: Promise<void>; write?: (tx: Transaction) => Promise<void>; turns?: Turn[] } = {},
  ): Promise<ThreadStartResponse> {
    const thread = this.threads.open(record, new SeqCounter(0));
    thread.createdHere = true;
    thread.deliveredSeq = 0;
    // The creator holds the new thread's lease from its first write (epoch 1).
    if (this.ctx.cluster) {
      thread.lease = { epoch: 1 };
      thread.heldEpoch = 1;
    }
    if (!record.forkedFromId) {
      thread.history = [];
      thread.entries = [];
    }
    this.subscriptions.subscribe(thread, subscriber);
    const view = threadView(record, thread.status);
    this.ctx.loaded.set(record.id, thread);
    try {
      await this.events.commit(
        thread,
        [{ method: "thread/started", params: { thread: view } }],
        async (tx) => {
          await this.ctx.store.insertThread(tx, { ...record, seqReserved: 0, ownerId: this.ctx.cluster?.leases.processId ?? null, leaseEpoch: this.ctx.cluster ? 1 : 0 });
          if (opts.write) await opts.write(tx);
        },
        { after: opts.responded, creating: true },
      );
    } catch (err) {
      this.ctx.loaded.delete(record.id);
      throw err;
    }
    return settingsResponse(threadView(record, thread.status, opts.turns ?? []), record);
  }

  async readThread(threadId: string, turns: Turn[] = []): Promise<Thread> {
    // From the database when another process may have changed it (name, settings, status).
    const record = this.ctx.cluster ? await this.freshRecord(threadId) : await this.threads.getRecord(threadId);
    const status = (await this.statusesOf([record])).get(threadId)!;
    return threadView(record, status, turns);
  }

  private async freshRecord(threadId: string): Promise<ThreadRecord> {
    const loaded = this.ctx.loaded.get(threadId);
    if (loaded?.lease) return loaded.record;
    const record = await this.ctx.store.getThread(threadId);
    if (!record) throw new ThreadNotFoundError(threadId);
    if (loaded && !loaded.activeTurn) loaded.record = record;
    return record;
  }

  /** `visibleTo`: only that user's threads and those shared with it (null: all). */
  async listThreads(p: ThreadListParams, cursor: ThreadCursor | null, visibleTo: string | null = null): Promise<ThreadListResult> {
    const cwds = p.cwd == null ? null : Array.isArray(p.cwd) ? p.cwd : [p.cwd];
    const page = await this.ctx.store.listThreads({
      limit: p.limit ?? 25,
      cursor,
      sortKey: p.sortKey ?? "created_at",
      direction: p.sortDirection ?? "desc",
      archived: p.archived ?? false,
      cwds,
      searchTerm: p.searchTerm ? p.searchTerm : null,
      modelProviders: p.modelProviders ?? null,
      sources: p.sourceKinds && p.sourceKinds.length ? p.sourceKinds : null,
      // Sub-agents, attachments, sections, projects and originators do not exist here: a filter
      // on any of them matches no thread.
      matchesNothing: Boolean(p.parentThreadId || p.ancestorThreadId || p.attachedToThreadId || p.sectionId || p.projectId || p.originators?.length),
      includedIds: p.includedThreadIds ?? null,
      excludedIds: p.excludedThreadIds ?? [],
      visibleTo,
    });
    const statuses = await this.statusesOf(page.rows);
    return {
      // The row as stored (another process may have renamed it), unless this process leases it.
      data: page.rows.map((r) => threadView(this.ctx.loaded.get(r.id)?.lease ? this.ctx.loaded.get(r.id)!.record : r, statuses.get(r.id)!)),
      nextCursor: encodeCursor(page.next),
      backwardsCursor: encodeCursor(page.backwards),
    };
  }

  /**
   * Applies a metadata change to a thread and announces it. A thread not loaded here takes its
   * `seq` from the store (atomically) instead of being loaded just for this.
   */
  async updateMetadata(
    threadId: string,
    patch: Partial<Pick<ThreadRecord, "archived" | "name">>,
    event: ThreadEvent,
    requester: Subscriber,
  ): Promise<ThreadRecord> {
    const now = Date.now();
    if (this.ctx.cluster) return this.ctx.cluster.updateMetadata(threadId, patch, event, requester);
    const loaded = this.ctx.loaded.get(threadId);
    if (loaded) {
      await this.events.commit(loaded, [event], async (tx) => {
        await this.ctx.store.updateThread(tx, threadId, { ...patch, updatedAtMs: now });
      }, { alsoTo: requester });
      loaded.record = { ...loaded.record, ...patch, updatedAtMs: now };
      return loaded.record;
    }
    const record = await this.ctx.store.transaction(async (tx) => {
      const rows = await tx<{ seqReserved: number }[]>`
        update threads set seq_reserved = seq_reserved + 1 where id = ${threadId} returning seq_reserved`;
      if (rows.length === 0) throw new ThreadNotFoundError(threadId);
      const seq = rows[0]!.seqReserved;
      await this.ctx.store.updateThread(tx, threadId, { ...patch, updatedAtMs: now });
      const stored = { seq, method: event.method, params: { ...event.params, seq }, emittedAtMs: now };
      await this.ctx.store.insertEvents(tx, threadId, [stored]);
      const updated = await this.ctx.store.getThread(threadId, tx);
      return { updated: updated!, stored };
    });
    requester.notify(record.stored.method, record.stored.params, record.stored.emittedAtMs);
    return record.updated;
  }
}
