/** Row shapes of the store, as postgres.js returns them (columns camelCased). */
import type { AskForApproval, SandboxMode, SandboxPolicy } from "../protocol/common.js";
import type { DynamicToolSpec, TurnStatus, TurnStopReason } from "../protocol/thread.js";
import type { TurnError } from "../protocol/common.js";
import type { ThreadItem } from "../protocol/items.js";
import type { Usage } from "../agent/messages.js";

export interface ThreadRecord {
  id: string;
  sessionId: string;
  forkedFromId: string | null;
  forkParentId: string | null;
  forkTurnCount: number | null;
  forkMessageCount: number | null;
  name: string | null;
  preview: string;
  ephemeral: boolean;
  archived: boolean;
  modelProvider: string;
  model: string;
  reasoningEffort: string | null;
  cwd: string;
  approvalPolicy: AskForApproval;
  sandbox: SandboxMode;
  /** The full policy a turn/start gave; null = the defaults of `sandbox`. */
  sandboxPolicy: SandboxPolicy | null;
  baseInstructions: string | null;
  developerInstructions: string | null;
  dynamicTools: DynamicToolSpec[];
  config: Record<string, unknown> | null;
  cliVersion: string;
  source: string;
  systemError: boolean;
  tokenUsage: Usage | null;
  seqReserved: number;
  createdAtMs: number;
  updatedAtMs: number;
  /** The user the thread belongs to (docs/teams.md); `local` for the implicit one. */
  userId: string;
}

export type NewThread = Omit<ThreadRecord, "archived" | "systemError" | "seqReserved" | "preview" | "name" | "tokenUsage"> & {
  name?: string | null;
  preview?: string;
};

/** A notification as stored in the per-thread event log. */
export interface StoredEvent {
  seq: number;
  method: string;
  params: Record<string, unknown>;
  emittedAtMs: number;
  /** The stored form when it refers to item rows instead of repeating them (event-refs.ts). */
  stored?: { params: Record<string, unknown>; itemIds: string[] };
}

export interface TurnRecord {
  id: string;
  threadId: string;
  ordinal: number;
  status: TurnStatus;
  stopReason: TurnStopReason | null;
  error: TurnError | null;
  clientUserMessageId: string | null;
  startedAtMs: number;
  completedAtMs: number | null;
}

export interface ItemRecord {
  id: string;
  threadId: string;
  turnId: string;
  ordinal: number;
  type: string;
  status: string | null;
  payload: ThreadItem;
  startedAtMs: number;
  completedAtMs: number | null;
}

/**
 * The columns of `items` that rows are read with: all but `search_words`, the tsvector only search
 * reads (migrations/008_search_words_column.sql), which `select *` would carry to every reader.
 */
export const itemColumns = (alias?: string): string =>
  ["id", "thread_id", "turn_id", "ordinal", "type", "status", "payload", "started_at_ms", "completed_at_ms", "call_id", "pending_request"]
    .map((c) => (alias ? `${alias}.${c}` : c))
    .join(", ");
