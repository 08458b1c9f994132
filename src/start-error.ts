/** Start-up failures in words, for `serve` and the CLI's embedded server. */
import type { ServerConfig } from "./config.js";
import { redactUrl } from "./log.js";

const NETWORK_ERRORS = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "ETIMEDOUT", "ECONNRESET", "EHOSTUNREACH", "ENETUNREACH", "CONNECT_TIMEOUT"]);

/**
 * What failed at start-up, in words: the database (with its URL, password hidden), the listen
 * address, the home directory — never a stack trace.
 */
export function describeStartError(err: unknown, config: ServerConfig): string {
  const e = err as NodeJS.ErrnoException & { severity?: string; address?: string; port?: number; syscall?: string };
  const message = e instanceof Error ? e.message : String(err);
  const code = typeof e?.code === "string" ? e.code : "";
  if (config.databaseUrl && (NETWORK_ERRORS.has(code) || e?.severity !== undefined || /^[0-9A-Z]{5}$/.test(code))) {
    const why =
      code === "28P01" || code === "28000"
        ? "authentication failed (check the user and password)"
        : code === "3D000"
          ? message
          : NETWORK_ERRORS.has(code)
            ? `${code}${e.address ? ` (${e.address}${e.port ? `:${e.port}` : ""})` : ""}`
            : message;
    return `cannot connect to the database at ${redactUrl(config.databaseUrl)}: ${why}`;
  }
  if (code === "EADDRINUSE") return `cannot listen on ${config.listen}: the address is already in use (EADDRINUSE); pick another port with --listen`;
  if (code === "EADDRNOTAVAIL" || (code === "EACCES" && e.syscall === "listen")) return `cannot listen on ${config.listen}: ${code}`;
  if (["EEXIST", "ENOTDIR", "ENOENT", "EACCES", "EPERM", "EROFS"].includes(code) && e.syscall === "mkdir")
    return `cannot create the home directory ${config.home} (--home / APP_SERVER_HOME): ${code}`;
  return message;
}
