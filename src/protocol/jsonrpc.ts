/** The JSON-RPC 2.0 envelope as Codex sends it (the `jsonrpc` member is optional on input). */
import { z } from "zod";

export const RequestId = z.union([z.string(), z.number().int()]).meta({ id: "RequestId" });
export type RequestId = z.infer<typeof RequestId>;

export const JSONRPCRequest = z
  .object({ jsonrpc: z.literal("2.0").optional(), id: RequestId, method: z.string(), params: z.unknown().optional() })
  .meta({ id: "JSONRPCRequest" });
export const JSONRPCNotification = z
  .object({ jsonrpc: z.literal("2.0").optional(), method: z.string(), params: z.unknown().optional(), emittedAtMs: z.number().int().optional() })
  .meta({ id: "JSONRPCNotification" });
export const JSONRPCErrorObject = z.object({ code: z.number().int(), message: z.string(), data: z.unknown().optional() }).meta({ id: "JSONRPCErrorError" });
export const JSONRPCResponse = z
  .object({ jsonrpc: z.literal("2.0").optional(), id: RequestId, result: z.unknown() })
  .meta({ id: "JSONRPCResponse" });
export const JSONRPCError = z
  .object({ jsonrpc: z.literal("2.0").optional(), id: RequestId.nullable(), error: JSONRPCErrorObject })
  .meta({ id: "JSONRPCError" });

/**
 * A client's answer to a server → client request (an approval, a dynamic tool call): its
 * response's result, or its error. Tools, the runtime and the connections all pass it on.
 */
export interface ClientReply {
  result?: unknown;
  error?: z.infer<typeof JSONRPCErrorObject>;
}

/** Standard error codes (DESIGN.md §10). */
export const ErrorCode = {
  ParseError: -32700,
  InvalidRequest: -32600,
  MethodNotFound: -32601,
  InvalidParams: -32602,
  InternalError: -32603,
  ServerOverloaded: -32001,
  /** A user's quota (concurrent turns, requests per second, tokens per day): docs/teams.md. */
  QuotaExceeded: -32003,
} as const;
