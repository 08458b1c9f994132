/** What the parts of a running turn share (turns.ts builds it once per server). */
import type { RetryPolicy } from "../agent/retry.js";
import type { TurnObserver } from "../metrics.js";
import type { CommandRunner } from "../sandbox/runner.js";
import type { TurnStore } from "../store/turn-store.js";
import type { ExecPolicyStore } from "../store/execpolicy-store.js";
import type { HookRunner } from "../hooks/runner.js";
import type { ToolSource as ToolSourceOf } from "../tools/source.js";
import type { LoadedThread } from "./loaded-thread.js";
import type { HistoryLog } from "./history-log.js";
import type { ProviderPool } from "./provider-pool.js";
import type { RuntimeLogger } from "./thread-types.js";
import type { ThreadRuntime } from "./threads.js";

/** A provider of tools for a turn, given the thread as this process has it loaded (tool-host.ts has the sources). */
export type ToolSource = ToolSourceOf<LoadedThread>;

export interface TurnSettings {
  maxModelCalls: number;
  retry: RetryPolicy;
  maxParallelTools: number;
  maxOutputTokens?: number;
  /** Shell named in the environment context. */
  shell: string;
  /** Unanswered approvals are declined after this long (off when unset). */
  approvalTimeoutMs?: number;
  /** The model's context window in tokens, when known (reported, and used for compaction). */
  contextWindow?: number;
  /** Compact before a turn when the last call's input passed this share of the window (default 0.8). */
  autoCompactShare?: number;
  /** Turns running at once in this process; more are refused (OverloadedError). */
  maxConcurrentTurns?: number;
  /** A model call that sends nothing for this long fails as a retryable stream error (default 300000). */
  streamIdleTimeoutMs?: number;
  /** Remind the model once per turn when it ends with open plan steps (default on). */
  planStopGuard?: boolean;
}

export const NO_OBSERVER: TurnObserver = {
  turnStarted() {},
  turnEnded() {},
  modelCall() {},
  tokens() {},
  approvalsPending() {},
  commitSeconds() {},
};

export interface TurnDeps {
  runtime: ThreadRuntime;
  turns: TurnStore;
  providers: ProviderPool;
  settings: TurnSettings;
  log: RuntimeLogger;
  historyLog: HistoryLog;
  observer: TurnObserver;
  /** Where tools start processes: the OS sandbox seam. */
  commands: CommandRunner;
  /** User-configured hooks (before/after tool calls, turn end). */
  hooks: HookRunner | null;
  /** Where a turn's tools come from, in order (built-in, dynamic, MCP); the first of a name wins. */
  toolSources: readonly ToolSource[];
  /** The saved approval rules (shared by every process on the database). */
  execPolicy: ExecPolicyStore;
}
