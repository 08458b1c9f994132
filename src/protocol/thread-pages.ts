/** Paged history (Codex 0.171): thread/turns/list and thread/items/list, with opaque cursors. */
import { z } from "zod";
import { ThreadItem } from "./items.js";
import { Turn, TurnItemsView } from "./thread.js";

const ThreadId = z.string().min(1, "threadId must not be empty");
const SortDirection = z.enum(["asc", "desc"]);

export const ThreadTurnsListParams = z
  .object({
    threadId: ThreadId,
    cursor: z.string().nullable().optional(),
    limit: z.number().int().min(1).max(1000).nullable().optional(),
    /** Default desc: newest turns first, as a chat view loads them. */
    sortDirection: SortDirection.nullable().optional(),
    /** Default summary: user messages and the final answer of each turn. */
    itemsView: TurnItemsView.nullable().optional(),
  })
  .meta({ id: "ThreadTurnsListParams" });
export type ThreadTurnsListParams = z.infer<typeof ThreadTurnsListParams>;

export const TurnsPage = z
  .object({ data: z.array(Turn), nextCursor: z.string().nullable(), backwardsCursor: z.string().nullable() })
  .meta({ id: "TurnsPage" });
export type TurnsPage = z.infer<typeof TurnsPage>;
export const ThreadTurnsListResponse = TurnsPage.meta({ id: "ThreadTurnsListResponse" });

export const ThreadItemsListParams = z
  .object({
    threadId: ThreadId,
    turnId: z.string().min(1).nullable().optional(),
    /** A cursor from a previous page, or an anchor: start after (or before, desc) this item. */
    cursor: z.union([z.string(), z.object({ type: z.literal("item"), itemId: z.string().min(1) })]).nullable().optional(),
    limit: z.number().int().min(1).max(1000).nullable().optional(),
    /** Default asc: in the order the items happened. */
    sortDirection: SortDirection.nullable().optional(),
    deferOutput: z.object({ commandExecution: z.boolean().optional(), mcpToolCall: z.boolean().optional() }).nullable().optional(),
  })
  .meta({ id: "ThreadItemsListParams" });
export type ThreadItemsListParams = z.infer<typeof ThreadItemsListParams>;

export const ThreadItemEntry = z
  .object({
    turnId: z.string(),
    item: ThreadItem,
    outputDeferred: z.boolean().optional(),
    startedAtMs: z.number().int().nullable(),
    completedAtMs: z.number().int().nullable(),
  })
  .meta({ id: "ThreadItemEntry" });
export const ThreadItemsListResponse = z
  .object({ data: z.array(ThreadItemEntry), nextCursor: z.string().nullable(), backwardsCursor: z.string().nullable() })
  .meta({ id: "ThreadItemsListResponse" });
