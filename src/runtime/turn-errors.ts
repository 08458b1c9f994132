/** Maps loop failures to Codex's TurnError / CodexErrorInfo shapes, and builds a failed turn's result. */
import type { LoopResult } from "../agent/loop.js";
import { emptyUsage } from "../agent/messages.js";
import type { CodexErrorInfo, TurnError } from "../protocol/common.js";
import { ProviderError } from "../providers/types.js";

export function codexErrorInfo(err: Error, exhaustedRetries = false): CodexErrorInfo {
  if (!(err instanceof ProviderError)) return "other";
  const httpStatusCode = err.status;
  if (exhaustedRetries && err.retryable) return { responseTooManyFailedAttempts: { httpStatusCode } };
  switch (err.kind) {
    case "rateLimited":
      return "rateLimitExceeded";
    case "overloaded":
      return "serverOverloaded";
    case "server":
      return "internalServerError";
    case "auth":
      return "unauthorized";
    case "badRequest":
      return "badRequest";
    case "notFound":
      return "modelNotFound";
    case "contextOverflow":
      return "contextWindowExceeded";
    case "quota":
      return "usageLimitExceeded";
    // A refused or filtered answer: Codex's policy codes (cyberPolicy, bioPolicy,
    // misalignmentPolicyViolation) name particular OpenAI classifiers, so none of them fits a
    // provider's generic refusal; the message names the provider and its reason.
    case "refused":
      return "other";
    case "network":
      return { httpConnectionFailed: { httpStatusCode } };
    case "streamIncomplete":
      return { responseStreamDisconnected: { httpStatusCode } };
    default:
      return "other";
  }
}

export function turnError(err: Error, opts: { exhaustedRetries?: boolean } = {}): TurnError {
  return { message: err.message, codexErrorInfo: codexErrorInfo(err, opts.exhaustedRetries), additionalDetails: null, misalignment: null };
}

/** Failures a client caused (answered as -32600 by the handlers). */
export class TurnRequestError extends Error {}

/** The server is at a capacity limit (answered -32001 "Server overloaded; retry later"). */
export class OverloadedError extends Error {}

/**
 * The result of a turn that failed with `err` (anything thrown): `result` with the error and
 * stop reason replaced, or, without one, a result of no model call.
 */
export function turnFailed(err: unknown, result?: LoopResult): LoopResult {
  const base = result ?? { note: null, modelCalls: 0, usage: emptyUsage() };
  return { ...base, stopReason: "error", error: err instanceof Error ? err : new Error(String(err)) };
}

/** `result` failed with `err`, unless it failed already: the first failure is the one told. */
export function firstFailure(result: LoopResult, err: unknown): LoopResult {
  return result.stopReason === "error" ? result : turnFailed(err, result);
}
