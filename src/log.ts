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

export const LOG_LEVELS = ["trace", "debug", "info", "warn", "error", "fatal", "silent"] as const;

/** Throws a one-line error naming the valid levels (pino's own says "must be included in custom levels"). */
export function createLogger(level = process.env.APP_SERVER_LOG_LEVEL || "info", destination: pino.DestinationStream = pino.destination(2)): Logger {
  if (!(LOG_LEVELS as readonly string[]).includes(level))
    throw new Error(`invalid log level ${JSON.stringify(level)} (APP_SERVER_LOG_LEVEL): use one of ${LOG_LEVELS.join(", ")}`);
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

/**
 * Routes console.warn (and process warnings) of the libraries in this process — the SDKs print
 * model deprecation notices with console.warn, on every request — to the logger as one JSON
 * warning per distinct message, so that stderr keeps its JSON lines and a notice is not repeated
 * on every retry. For the CLI's own processes (serve, exec, threads), not for embedders.
 */
export function routeConsoleWarnings(log: Logger): void {
  const seen = new Set<string>();
  const once = (source: string, text: string) => {
    if (seen.has(text)) return;
    seen.add(text);
    log.warn({ component: source }, text.replace(/\s*\n\s*/g, " ").trim());
  };
  console.warn = (...args: unknown[]) => once("library", args.map((a) => (typeof a === "string" ? a : a instanceof Error ? a.message : JSON.stringify(a))).join(" "));
  process.removeAllListeners("warning");
  process.on("warning", (w) => once("node", `${w.name}: ${w.message}`));
}
