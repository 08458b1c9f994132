/**
 * What a turn that calls the model sends (agent, review and compaction turns): the provider,
 * bounded by the stream idle timeout, the request without its messages, and the turn's tools.
 */
import type { LoopTool } from "../agent/tools.js";
import { systemPrompt, toolList } from "../agent/prompt.js";
import { withIdleTimeout } from "../providers/idle-timeout.js";
import type { ModelProvider, ModelRequest } from "../providers/types.js";
import type { ActiveTurn } from "./active-turn.js";
import type { LoadedThread } from "./loaded-thread.js";
import { toolsFor } from "./tool-host.js";
import type { TurnParts } from "./turn-lifecycle.js";

/** Default for APP_SERVER_STREAM_IDLE_TIMEOUT_MS (DESIGN.md §10). */
export const DEFAULT_STREAM_IDLE_TIMEOUT_MS = 300_000;

export interface TurnModel {
  provider: ModelProvider;
  request: Omit<ModelRequest, "messages">;
  tools: Map<string, LoopTool>;
}

export async function turnModel({ deps, recorder }: TurnParts, thread: LoadedThread, turn: ActiveTurn): Promise<TurnModel> {
  const { settings } = deps;
  const record = thread.record;
  const provider = withIdleTimeout(await deps.providers.get(record.modelProvider), settings.streamIdleTimeoutMs ?? DEFAULT_STREAM_IDLE_TIMEOUT_MS);
  // The first turn after a start or a reload waits for MCP servers (each bounded by its startupTimeoutSec).
  await Promise.all(deps.toolSources.map((source) => source.ready?.(turn.abort.signal, thread)));
  const tools = toolsFor(deps, recorder, thread, turn, deps.toolSources);
  const request: Omit<ModelRequest, "messages"> = {
    model: record.model,
    system: systemPrompt(record.baseInstructions, record.developerInstructions),
    tools: toolList([...tools.values()].map((t) => t.spec)),
    // Shared by a thread and its forks (they share the prefix up to the fork point).
    cacheKey: record.sessionId,
    reasoningEffort: (record.reasoningEffort as ModelRequest["reasoningEffort"]) ?? null,
    ...(settings.maxOutputTokens ? { maxOutputTokens: settings.maxOutputTokens } : {}),
  };
  return { provider, request, tools };
}
