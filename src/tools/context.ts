/**
 * What a tool may do besides computing its result: record and announce its item, stream output,
 * and ask the thread's clients something (a dynamic tool call, an approval). The turn runner
 * implements it; tools never see JSON-RPC or SQL.
 */
import type { ThreadItem } from "../protocol/items.js";
import type { ClientReply } from "../runtime/server-requests.js";

export interface ToolContext {
  readonly threadId: string;
  readonly turnId: string;
  readonly cwd: string;
  /** A fresh item id (allocated before the tool acts, DESIGN.md §4). */
  newItemId(): string;
  /** Records the item as started, then announces `item/started`. */
  startItem(item: ThreadItem): Promise<void>;
  /** Records the item's final state, then announces `item/completed`. */
  completeItem(item: ThreadItem): Promise<void>;
  /** Sends a server request to the thread's clients; null when the turn was interrupted first. */
  askClients(method: string, params: object, signal: AbortSignal): Promise<ClientReply | null>;
}
