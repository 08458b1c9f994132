/**
 * A model endpoint that could not be reached, said so a person can act on it: which URL, why
 * (refused, DNS, TLS, timeout, reset) and what to check. The SDKs only say "Connection error."
 * (the cause is three levels down, in undici's error). Causes that waiting cannot fix — nothing
 * listens there, the name does not resolve, TLS cannot be agreed — are not retried: the turn
 * fails at once with one message instead of the same one after each of four retries (~16 s).
 */
import { ProviderError } from "./types.js";

type Cause = "refused" | "dns" | "tls" | "timeout" | "reset" | "other";

/** A network failure retrying cannot fix: reported once, the turn fails at once. */
export class EndpointUnreachableError extends ProviderError {
  override get retryable(): boolean {
    return false;
  }
}

/** Error codes along the cause chain (SDK error → fetch's TypeError → the socket's error). */
function codesOf(err: unknown): string[] {
  const codes: string[] = [];
  for (let cur = err, depth = 0; depth < 6 && cur && typeof cur === "object"; depth++) {
    const code = (cur as { code?: unknown }).code;
    if (typeof code === "string") codes.push(code);
    cur = (cur as { cause?: unknown }).cause;
  }
  return codes;
}

function causeOf(codes: string[], err: unknown): Cause {
  for (const code of codes) {
    if (code === "ECONNREFUSED") return "refused";
    if (code === "ENOTFOUND" || code === "EAI_NONAME") return "dns";
    if (/^ERR_SSL_|^ERR_TLS_|CERT|^EPROTO$|SELF_SIGNED|UNABLE_TO_(GET|VERIFY)/.test(code)) return "tls";
    if (code === "ETIMEDOUT" || code === "UND_ERR_CONNECT_TIMEOUT" || code === "UND_ERR_HEADERS_TIMEOUT") return "timeout";
    if (code === "ECONNRESET" || code === "UND_ERR_SOCKET" || code === "EPIPE" || code === "EAI_AGAIN" || code === "EHOSTUNREACH" || code === "ENETUNREACH") return "reset";
  }
  // The SDKs' own timeout ("Request timed out.") carries no code.
  if (err instanceof Error && /timed? ?out/i.test(err.message)) return "timeout";
  return "other";
}

const WHY: Record<Cause, string> = {
  refused: "connection refused",
  dns: "the host name does not resolve",
  tls: "the TLS handshake failed",
  timeout: "no answer in time",
  reset: "the connection broke",
  other: "connection failed",
};

function hint(cause: Cause, baseUrlVariable: string): string {
  switch (cause) {
    case "refused":
      return `nothing listens there: start the model server, or fix ${baseUrlVariable}`;
    case "dns":
      return `check the host in ${baseUrlVariable} and this machine's DNS`;
    case "tls":
      return `check http:// versus https:// in ${baseUrlVariable}; for a private CA set NODE_EXTRA_CA_CERTS`;
    default:
      return `check the network, a proxy (HTTPS_PROXY) or ${baseUrlVariable}`;
  }
}

/** A base URL may carry a user and password: never in a message. */
function withoutCredentials(url: string): string {
  try {
    const u = new URL(url);
    if (!u.username && !u.password) return url;
    u.username = u.password ? "***" : u.username;
    u.password = "";
    return u.toString();
  } catch {
    return "the model endpoint";
  }
}

/**
 * The ProviderError for a request that never got a response (the caller handles a stream cut after
 * the response started). `endpoint` is the SDK client's base URL.
 */
export function connectionFailure(err: unknown, provider: string, endpoint: string | undefined, redact: (text: string) => string = (t) => t): ProviderError {
  const codes = codesOf(err);
  const cause = causeOf(codes, err);
  const baseUrlVariable = provider === "anthropic" ? "ANTHROPIC_BASE_URL" : "OPENAI_BASE_URL";
  const code = codes.at(-1); // the socket's own, the most precise
  const where = endpoint === undefined ? "the model endpoint" : withoutCredentials(endpoint);
  const message = `${provider}: cannot reach ${where}: ${WHY[cause]}${code ? ` (${code})` : ""} — ${hint(cause, baseUrlVariable)}`;
  const Kind = cause === "refused" || cause === "dns" || cause === "tls" ? EndpointUnreachableError : ProviderError;
  return new Kind("network", redact(message), { cause: err });
}
