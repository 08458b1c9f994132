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

/** The line `serve` prints once it listens: where clients connect and where the playground is. */
export function listeningBanner(wsUrl: string): string | null {
  const page = playgroundAddress(wsUrl);
  return page ? `app-server is listening on ${wsUrl}; the playground: ${page}\n` : null;
}
