/**
 * The environment a command gets is built from an allow list, never by removing known secrets
 * from the server's own: a deny list always misses one (POSTGRES_PASSWORD, AWS_SECRET_ACCESS_KEY,
 * GITHUB_TOKEN, HF_TOKEN …). Users add names with --command-env / APP_SERVER_COMMAND_ENV; a
 * name ending in `*` is a prefix.
 */

/** What ordinary builds and tools need to behave as in the user's terminal. */
export const DEFAULT_COMMAND_ENV: readonly string[] = [
  "PATH",
  "HOME",
  "USER",
  "LOGNAME",
  "SHELL",
  "LANG",
  "LANGUAGE",
  "LC_*",
  "TERM",
  "TZ",
  "TMPDIR",
  "COLORTERM",
  "NO_COLOR",
  // Where the trusted certificates are (file and directory names, no secrets): behind a
  // TLS-inspecting proxy, whatever fetches (npm, npx -y of an MCP server, pip, git, curl) fails
  // without them — Node's official binaries read only NODE_EXTRA_CA_CERTS besides their own list.
  "NODE_EXTRA_CA_CERTS",
  "SSL_CERT_FILE",
  "SSL_CERT_DIR",
  "CURL_CA_BUNDLE",
  "REQUESTS_CA_BUNDLE",
  "PIP_CERT",
  "GIT_SSL_CAINFO",
];

export function envNameMatcher(names: readonly string[]): (name: string) => boolean {
  const exact = new Set(names.filter((n) => !n.endsWith("*")));
  const prefixes = names.filter((n) => n.endsWith("*")).map((n) => n.slice(0, -1));
  return (name) => exact.has(name) || prefixes.some((p) => name.startsWith(p));
}

export interface CommandEnvironmentOptions {
  /** Names (or `PREFIX*`) passed through besides the defaults. */
  allow?: readonly string[];
  /** Set for every command (after the allow list), e.g. PAGER=cat for the shell tool. */
  set?: Record<string, string>;
}

/** The allow-listed part of `env`, plus fixed additions. */
export function commandEnvironment(opts: CommandEnvironmentOptions = {}, env: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const allowed = envNameMatcher([...DEFAULT_COMMAND_ENV, ...(opts.allow ?? [])]);
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (v !== undefined && allowed(k)) out[k] = v;
  return { ...out, ...opts.set };
}
