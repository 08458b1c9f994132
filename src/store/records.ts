/** Row shapes of the store, as postgres.js returns them (columns camelCased). */
import type { AskForApproval, SandboxMode } from "../protocol/common.js";
import type { DynamicToolSpec } from "../protocol/thread.js";

export interface ThreadRecord {
  id: string;
  sessionId: string;
  forkedFromId: string | null;
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
  baseInstructions: string | null;
  developerInstructions: string | null;
  dynamicTools: DynamicToolSpec[];
  config: Record<string, unknown> | null;
  cliVersion: string;
  source: string;
  systemError: boolean;
  seqReserved: number;
  createdAtMs: number;
  updatedAtMs: number;
}

export type NewThread = Omit<ThreadRecord, "archived" | "systemError" | "seqReserved" | "preview" | "name"> & {
  name?: string | null;
  preview?: string;
};

/** A notification as stored in the per-thread event log. */
export interface StoredEvent {
  seq: number;
  method: string;
  params: Record<string, unknown>;
  emittedAtMs: number;
}
