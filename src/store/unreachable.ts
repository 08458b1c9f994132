/**
 * Whether an error means the database cannot be reached (refused, reset, timed out, a connection
 * postgres.js closed), as opposed to a query the database refused. A request that fails this way
 * is answered "the database is unavailable", not a bare "Internal error": the client can retry.
 */
const NETWORK_CODES = new Set(["ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "EPIPE", "EHOSTUNREACH", "ENETUNREACH", "ENOTFOUND", "EAI_AGAIN"]);
/** postgres.js's own codes for a connection that is gone or never came up. */
const DRIVER_CODES = new Set(["CONNECTION_CLOSED", "CONNECTION_ENDED", "CONNECTION_DESTROYED", "CONNECT_TIMEOUT"]);

export function isDatabaseUnreachable(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code !== "string") return false;
  // 57P01–57P03: the server is shutting down or starting up; 08xxx: connection exceptions.
  return NETWORK_CODES.has(code) || DRIVER_CODES.has(code) || /^57P0[123]$/.test(code) || /^08[0-9A-Z]{3}$/.test(code);
}
