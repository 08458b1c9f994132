/** Errors a handler throws to answer a request with a specific JSON-RPC error. */
import type { z } from "zod";
import { ErrorCode } from "../protocol/jsonrpc.js";

export class RpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
    this.name = "RpcError";
  }
}

/**
 * LSP's RequestCancelled (-32800): the answer to a request the client cancelled with
 * `$/cancelRequest`. Not one of JSON-RPC 2.0's own codes, so it lives here rather than in the
 * protocol's ErrorCode table; vscode-jsonrpc and python-lsp-jsonrpc expect exactly this code.
 */
export const REQUEST_CANCELLED = -32800;

export const invalidRequest = (message: string, data?: unknown) => new RpcError(ErrorCode.InvalidRequest, message, data);
export const invalidParams = (message: string, data?: unknown) => new RpcError(ErrorCode.InvalidParams, message, data);
/** The answer for a thread id the server does not know — and for another user's thread (docs/teams.md). */
export const threadNotFound = (threadId: string) => invalidRequest(`thread not found: ${threadId}`);
export const overloaded = () => new RpcError(ErrorCode.ServerOverloaded, "Server overloaded; retry later");

/** -32602 with the zod issues in `error.data.issues` and a readable summary in the message. */
export function paramsError(error: z.ZodError): RpcError {
  const first = error.issues[0];
  const where = first && first.path.length ? ` at ${first.path.join(".")}` : "";
  return invalidParams(`Invalid params${where}: ${first?.message ?? "invalid"}`, { issues: error.issues });
}
