/**
 * Paged history as Codex 0.171 has it: thread/turns/list and thread/items/list with opaque
 * cursors, the `summary` items view, and resume's `initialTurnsPage`. A page costs the rows of
 * that page (plus the fork chain and a rollback-marker check), never the whole thread.
 *
 * Cursors are base64url JSON: turns `{t: ordinal}`, items `{t: turn ordinal, i: item ordinal}`,
 * each the last position returned; the direction comes with each request.
 */
import type { ThreadItem } from "../protocol/items.js";
import type { Turn, TurnItemsView } from "../protocol/thread.js";
import type { ThreadItemsListParams, ThreadTurnsListParams, TurnsPage } from "../protocol/thread-pages.js";
import type { ChainLink, HistoryPages } from "../store/history-pages.js";
import type { ItemRecord, TurnRecord } from "../store/records.js";
import type { TurnStore } from "../store/turn-store.js";
import { rolledBackTurns } from "./history.js";
import type { ThreadRuntime } from "./threads.js";
import { summaryItems, turnView } from "./turn-view.js";

export class CursorError extends Error {}

const encode = (v: object) => Buffer.from(JSON.stringify(v)).toString("base64url");
function decode(text: string, keys: string[]): Record<string, number> {
  try {
    const v = JSON.parse(Buffer.from(text, "base64url").toString("utf8"));
    if (v && typeof v === "object" && keys.every((k) => Number.isSafeInteger(v[k]))) return v;
  } catch {
    /* not one of ours: the CursorError below */
  }
  throw new CursorError("cursor is not a cursor returned by this method");
}

function withView(t: TurnRecord, items: ThreadItem[], view: TurnItemsView): Turn {
  if (view === "notLoaded") return turnView(t, null);
  const turn = turnView(t, view === "summary" ? summaryItems(items) : items);
  return { ...turn, itemsView: view };
}

type PagedTurn = TurnRecord & { link: ChainLink };

export class TurnPages {
  constructor(
    private readonly runtime: ThreadRuntime,
    private readonly turns: TurnStore,
    private readonly pages: HistoryPages,
  ) {}

  /** The fork chain and which turn ordinals a rollback removed (read only when markers exist). */
  private async scope(threadId: string): Promise<{ chain: ChainLink[]; gone: (ordinal: number) => boolean }> {
    await this.runtime.getRecord(threadId); // ThreadNotFoundError for unknown ids
    const chain = await this.turns.ancestry(threadId);
    if (!(await this.pages.hasRollbacks(chain))) return { chain, gone: () => false };
    const loaded = this.runtime.loaded.get(threadId);
    const entries = loaded?.entries ?? (await this.turns.historyEntries(threadId));
    const all = await this.pages.turns(chain, null, "asc", Number.MAX_SAFE_INTEGER);
    const gone = rolledBackTurns(entries, all.map((t) => t.ordinal));
    return { chain, gone: (o) => gone.has(o) };
  }

  /** Up to `limit` visible turns after `from` (exclusive) in `direction`, and whether more follow. */
  private async visibleTurns(chain: ChainLink[], gone: (o: number) => boolean, from: number | null, direction: "asc" | "desc", limit: number) {
    const out: PagedTurn[] = [];
    let cursor = from;
    for (;;) {
      const batch = await this.pages.turns(chain, cursor, direction, limit + 1);
      for (const t of batch) if (!gone(t.ordinal)) out.push(t);
      if (out.length > limit || batch.length < limit + 1) break;
      cursor = batch[batch.length - 1]!.ordinal;
    }
    return { turns: out.slice(0, limit), more: out.length > limit };
  }

  /** A fork shows a parent's turn that was still running at the fork point as interrupted. */
  private asSeen(t: PagedTurn): TurnRecord {
    const at = t.link.forkedAtMs;
    if (at !== null && (t.completedAtMs === null || t.completedAtMs > at)) return { ...t, status: "interrupted", stopReason: "interrupted", completedAtMs: at };
    return t;
  }

  async listTurns(p: ThreadTurnsListParams): Promise<TurnsPage> {
    const direction = p.sortDirection ?? "desc";
    const view = p.itemsView ?? "summary";
    const from = p.cursor ? decode(p.cursor, ["t"]).t! : null;
    const { chain, gone } = await this.scope(p.threadId);
    const { turns, more } = await this.visibleTurns(chain, gone, from, direction, p.limit ?? 25);
    const items = view === "notLoaded" ? [] : await this.pages.itemsOf(turns);
    const byTurn = groupByTurn(items);
    return {
      data: turns.map((t) => withView(this.asSeen(t), byTurn.get(t.id) ?? [], view)),
      nextCursor: more ? encode({ t: turns[turns.length - 1]!.ordinal }) : null,
      // Paging back from the first turn of this page: the same position, read the other way.
      backwardsCursor: turns.length ? encode({ t: turns[0]!.ordinal }) : null,
    };
  }

  async listItems(p: ThreadItemsListParams) {
    const direction = p.sortDirection ?? "asc";
    const limit = p.limit ?? 100;
    const { chain, gone } = await this.scope(p.threadId);
    let at: { t: number; i: number } | null = null;
    if (typeof p.cursor === "string") at = decode(p.cursor, ["t", "i"]) as { t: number; i: number };
    else if (p.cursor) {
      const anchor = await this.pages.item(p.cursor.itemId);
      if (!anchor || !chain.some((l) => l.id === anchor.threadId)) throw new CursorError(`item ${p.cursor.itemId} is not part of thread ${p.threadId}`);
      at = { t: anchor.turnOrdinal, i: anchor.ordinal };
    }
    let turns: PagedTurn[];
    if (p.turnId) {
      const one = (await this.pages.turns(chain, null, "asc", Number.MAX_SAFE_INTEGER)).find((t) => t.id === p.turnId && !gone(t.ordinal));
      if (!one) throw new CursorError(`turn ${p.turnId} is not part of thread ${p.threadId}`);
      turns = [one];
    } else {
      // Every turn holds at least one item, so `limit` turns from the cursor's turn cover a page.
      const start = at === null ? null : direction === "asc" ? at.t - 1 : at.t + 1;
      turns = (await this.visibleTurns(chain, gone, start, direction, limit + 1)).turns;
    }
    const ordinalOf = new Map(turns.map((t) => [t.id, t.ordinal]));
    let items = (await this.pages.itemsOf(turns)).map((i) => ({ i, t: ordinalOf.get(i.turnId)! }));
    items.sort((a, b) => a.t - b.t || a.i.ordinal - b.i.ordinal);
    if (direction === "desc") items.reverse();
    if (at) {
      const after = (x: { t: number; i: ItemRecord }) =>
        direction === "asc" ? x.t > at!.t || (x.t === at!.t && x.i.ordinal > at!.i) : x.t < at!.t || (x.t === at!.t && x.i.ordinal < at!.i);
      items = items.filter(after);
    }
    const page = items.slice(0, limit);
    const more = items.length > limit;
    const deferCommands = p.deferOutput?.commandExecution === true;
    return {
      data: page.map(({ i }) => {
        const deferred = deferCommands && i.payload.type === "commandExecution" && i.payload.status === "completed" && !!i.payload.aggregatedOutput;
        return {
          turnId: i.turnId,
          item: deferred ? ({ ...i.payload, aggregatedOutput: null } as ThreadItem) : i.payload,
          ...(deferred ? { outputDeferred: true } : {}),
          startedAtMs: i.startedAtMs,
          completedAtMs: i.completedAtMs,
        };
      }),
      nextCursor: more ? encode({ t: page[page.length - 1]!.t, i: page[page.length - 1]!.i.ordinal }) : null,
      backwardsCursor: page.length ? encode({ t: page[0]!.t, i: page[0]!.i.ordinal }) : null,
    };
  }
}

function groupByTurn(items: ItemRecord[]): Map<string, ThreadItem[]> {
  const out = new Map<string, ThreadItem[]>();
  for (const i of items) {
    const list = out.get(i.turnId) ?? [];
    list.push(i.payload);
    out.set(i.turnId, list);
  }
  return out;
}
