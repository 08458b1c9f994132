/** JSON-line logs on stderr (stdout belongs to the stdio transport). Secrets are redacted. */
import pino, { type Logger } from "pino";

export type { Logger };

export const REDACT_PATHS = [
  "authorization",
  "*.authorization",
  "headers.authorization",
  "req.headers.authorization",
  "apiKey",
  "*.apiKey",
  "token",
  "*.token",
  "databaseUrl",
  "*.databaseUrl",
];

export function createLogger(level = process.env.APP_SERVER_LOG_LEVEL || "info", destination: pino.DestinationStream = pino.destination(2)): Logger {
  return pino({ level, base: { pid: process.pid }, redact: { paths: REDACT_PATHS, censor: "[redacted]" } }, destination);
}

/** postgres://user:secret@host/db → postgres://user:***@host/db, for log lines. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = "***";
    return u.toString();
  } catch {
    return "[unparseable url]";
  }
}
