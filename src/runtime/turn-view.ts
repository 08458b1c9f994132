/** Turn records → the protocol's Turn object. */
import type { ThreadItem } from "../protocol/items.js";
import type { Turn, TurnStatus, TurnStopReason } from "../protocol/thread.js";
import type { TurnRecord } from "../store/records.js";

const seconds = (ms: number) => Math.floor(ms / 1000);
/** A truncated turn is not a finished task: Codex clients read `completed` as success (see turn-end.ts). */
export const statusFor: Record<TurnStopReason, TurnStatus> = {
  finalAnswer: "completed",
  maxTokens: "failed",
  maxTurns: "failed",
  refused: "failed",
  interrupted: "interrupted",
  error: "failed",
};

export function turnView(r: Pick<TurnRecord, "id" | "status" | "stopReason" | "error" | "startedAtMs" | "completedAtMs">, items: ThreadItem[] | null): Turn {
  return {
    id: r.id,
    rootTurnId: r.id,
    items: items ?? [],
    itemsView: items ? "full" : "notLoaded",
    status: r.status,
    error: r.error,
    startedAt: seconds(r.startedAtMs),
    completedAt: r.completedAtMs === null ? null : seconds(r.completedAtMs),
    durationMs: r.completedAtMs === null ? null : r.completedAtMs - r.startedAtMs,
    stopReason: r.stopReason,
  };
}

/**
 * The Turn that turn/completed carries: Codex 0.171 sends the turn's final items in the `summary`
 * view (user messages and the final answer), so a client such as `codex exec` needs no
 * thread/read of the whole thread to print the answer. The items are the turn's stored ones
 * (every item/completed was committed before the turn ends); if they cannot be read, the turn
 * goes out without items (`notLoaded`), as before.
 */
export async function completedTurnView(
  r: Parameters<typeof turnView>[0],
  store: { itemsOfTurn(turnId: string): Promise<ThreadItem[]> },
  /** Items completed in the transaction that records the end (not stored yet), in order. */
  pending: readonly ThreadItem[] = [],
  fromStore = true,
  /** The turn's recorded items as the process running it knows them (no read), or null. */
  known: readonly ThreadItem[] | null = null,
): Promise<Turn> {
  if (!fromStore) return turnView(r, null);
  try {
    const recorded = known ?? (await store.itemsOfTurn(r.id));
    const byId = new Map(pending.map((i) => [i.id, i]));
    const stored = recorded.map((item) => {
      const p = byId.get(item.id);
      byId.delete(item.id);
      return p ?? item;
    });
    // The turn has ended, so its last agent message is its final answer: say so (Codex's
    // `phase`), as clients such as `codex exec` look for the final answer by it.
    const items = summaryItems([...stored, ...byId.values()]).map((i, n, all) =>
      i.type === "agentMessage" && i.phase === null && n === all.length - 1 && r.status === "completed" ? { ...i, phase: "final_answer" } : i,
    );
    return { ...turnView(r, items), itemsView: "summary" };
  } catch {
    return turnView(r, null);
  }
}

/**
 * The `summary` view of a turn's items: what a transcript shows, the user's messages and the
 * turn's final answer (its last agent message). Tool calls, reasoning and intermediate text are
 * left to thread/items/list.
 */
export function summaryItems(items: readonly ThreadItem[]): ThreadItem[] {
  let last = -1;
  items.forEach((i, n) => {
    if (i.type === "agentMessage") last = n;
  });
  return items.filter((i, n) => i.type === "userMessage" || n === last);
}
