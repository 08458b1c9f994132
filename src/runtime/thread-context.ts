/**
 * What the parts of the thread runtime (event-log.ts, thread-leases.ts, loaded-threads.ts,
 * subscriptions.ts, thread-records.ts) share: the store, the loaded threads, and the links the
 * server sets after construction. ThreadRuntime (threads.ts) is the one object that holds it.
 */
import type { ThreadStore } from "../store/thread-store.js";
import type { ClusterLinks } from "./cluster.js";
import type { HistoryBudget } from "./history-budget.js";
import type { LoadedThread } from "./loaded-thread.js";
import type { RuntimeLogger } from "./thread-types.js";
import type { UnrecordedEnds } from "./unrecorded.js";

export interface ThreadContext {
  readonly store: ThreadStore;
  readonly log: RuntimeLogger;
  /** The threads loaded in this process, by id. */
  readonly loaded: Map<string, LoadedThread>;
  /** Leases, fan-out and remote commands (set by the server; see cluster.ts). */
  cluster: ClusterLinks | null;
  /** Turn endings told to clients while the database was away, recorded when it is back (unrecorded.ts). */
  unrecorded: UnrecordedEnds | null;
  /** Bounds the loaded threads' histories in memory (history-budget.ts; set by the server), or null: unbounded. */
  historyBudget: HistoryBudget | null;
  /** Observes record-before-publish transaction times (metrics). */
  onCommit?: (seconds: number) => void;
}
