/** Turn records → the protocol's Turn object. */
import type { ThreadItem } from "../protocol/items.js";
import type { Turn, TurnStatus, TurnStopReason } from "../protocol/thread.js";
import type { TurnRecord } from "../store/records.js";

const seconds = (ms: number) => Math.floor(ms / 1000);
export const statusFor: Record<TurnStopReason, TurnStatus> = {
  finalAnswer: "completed",
  maxTokens: "completed",
  maxTurns: "completed",
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
