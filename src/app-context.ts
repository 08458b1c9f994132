/** What request handlers need, in one place: built once per server by src/server.ts. */
import type { ServerLimits } from "./config.js";
import type { McpManager } from "./mcp/manager.js";
import type { Logger } from "./log.js";
import type { Turn } from "./protocol/thread.js";
import type { Model } from "./protocol/session.js";
import type { ProviderCredential } from "./runtime/provider-credentials.js";
import type { ThreadRuntime } from "./runtime/threads.js";
import type { ThreadHistoryOps } from "./runtime/thread-history-ops.js";
import type { TurnRunner } from "./runtime/turns.js";
import type { TurnPages } from "./runtime/turn-pages.js";
import type { ExecPolicyStore } from "./store/execpolicy-store.js";
import type { Team } from "./identity/team.js";

export interface ProviderCatalog {
  has(id: string): boolean;
  ids(): Iterable<string>;
  /** Which providers have a key, need none, or lack one (account/read, modelProvider/list). */
  credentials(): ProviderCredential[];
}

export interface AppContext {
  readonly version: string;
  readonly home: string;
  /** Where threads run when thread/start gives no cwd (relative cwds resolve against it). */
  readonly defaultCwd: string;
  readonly log: Logger;
  readonly runtime: ThreadRuntime;
  readonly providers: ProviderCatalog;
  readonly turns: TurnRunner;
  /** resume, fork, rollback. */
  readonly history: ThreadHistoryOps;
  readonly limits: ServerLimits;
  /** What model/list reports. */
  readonly models: Model[];
  /** Paged turns and items (thread/turns/list, thread/items/list, resume's initialTurnsPage). */
  readonly pages: TurnPages;
  /** The configured MCP servers and their tools. */
  readonly mcp: McpManager;
  /** The saved approval rules (execpolicy/rule/list, execpolicy/rule/remove). */
  readonly execPolicy: ExecPolicyStore;
  /** Users, the request guard, quotas and the audit trail (docs/teams.md). */
  readonly team: Team;
  /** The stored turns of a thread with their items (thread/read includeTurns). */
  turnsOf(threadId: string): Promise<Turn[]>;
}
