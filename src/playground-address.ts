/**
 * The address a person opens in a browser to use the server, printed on stdout once it listens
 * (logs are JSON lines on stderr, this line is for the person who started it). One function
 * builds it, so what the address carries is decided in one place.
 */

/** http://HOST:PORT/ of a ws:// listen URL; null for stdio. */
export function playgroundAddress(wsUrl: string): string | null {
  if (!wsUrl.startsWith("ws://")) return null;
  const url = new URL(wsUrl.replace(/^ws:/, "http:"));
  // A server on every interface is reached from this machine through loopback (and the server
  // answers only loopback Host names when it has no token).
  if (url.hostname === "0.0.0.0" || url.hostname === "[::]") url.hostname = "127.0.0.1";
  url.pathname = "/";
  return url.toString();
}

/** Who may open the page: the token clients must send (null: none), and where it is kept. */
export interface PlaygroundAccess {
  token: string | null;
  /** The generated token's file (`<home>/auth-token`), or null when the token was configured. */
  tokenFile: string | null;
  /** stdout is a terminal: the person who started the server reads it, nobody else. */
  terminal: boolean;
}

/**
 * The line `serve` prints once it listens: where clients connect and where the playground is. On a
 * terminal the page's address carries the token in its fragment (`#token=…`: opening it connects at
 * once; the fragment never reaches the server). Elsewhere (a file, a journal, `docker logs`,
 * readable by others) it does not: the line says where the token is instead.
 */
export function listeningBanner(wsUrl: string, access: PlaygroundAccess = { token: null, tokenFile: null, terminal: false }): string | null {
  const page = playgroundAddress(wsUrl);
  if (page === null) return null;
  const prefix = `app-server is listening on ${wsUrl}; the playground: `;
  if (access.token === null) return `${prefix}${page}\n`;
  if (access.terminal) return `${prefix}${page}#token=${encodeURIComponent(access.token)}\n`;
  return `${prefix}${page} (it asks for the token: ${access.tokenFile ?? "the configured one"})\n`;
}
