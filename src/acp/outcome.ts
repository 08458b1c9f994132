/** How a Codex turn or request ends, in ACP's terms: the stop reason, or the error response. */
import { RequestError, type StopReason } from "@agentclientprotocol/sdk/unstable";
import { RpcError } from "../client/rpc-client.js";
import type { Turn } from "../protocol/thread.js";

/** How the turn ended, in ACP's terms; a failed turn is an error response, not a stop reason. */
export function stopReasonOf(turn: Turn, cancelled: boolean): StopReason {
  if (cancelled || turn.status === "interrupted") return "cancelled";
  const reason: string | null | undefined = turn.stopReason;
  if (reason === "maxTokens") return "max_tokens";
  if (reason === "maxTurns") return "max_turn_requests";
  // The provider refused or filtered the answer (the turn failed with stopReason "refused").
  if (reason === "refused") return "refusal";
  if (turn.status === "failed") throw RequestError.internalError({ turnId: turn.id, error: turn.error }, turn.error?.message ?? "the turn failed");
  return "end_turn";
}

/** A server error keeps its JSON-RPC code (e.g. -32600 "a turn is already running"); others are internal. */
export function asRequestError(err: unknown, sessionId: string): RequestError {
  if (err instanceof RequestError) return err;
  if (err instanceof RpcError) return new RequestError(err.code, err.message, { sessionId, ...(err.data === undefined ? {} : { data: err.data }) });
  return RequestError.internalError({ sessionId }, err instanceof Error ? err.message : String(err));
}

