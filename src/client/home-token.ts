/** Reading the token a server on this machine generated, for clients that connect to it. */
import { readFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { isLoopback } from "../config.js";
import { AUTH_TOKEN_FILE } from "../transport/auth.js";

/**
 * The token a local server generated (`<home>/auth-token`), for a loopback --url given without
 * --token. Never for another host: the token is this machine's server's, not theirs.
 */
export async function homeToken(url: string, opts: { home?: string; env: NodeJS.ProcessEnv }): Promise<string | undefined> {
  let host: string;
  try {
    host = new URL(url).hostname.replace(/^\[(.*)\]$/, "$1");
  } catch {
    return undefined;
  }
  if (!isLoopback(host)) return undefined;
  const home = path.resolve(opts.home ?? opts.env.APP_SERVER_HOME ?? path.join(os.homedir(), ".agent-app-server"));
  // No file (or one we cannot read): no token to send, and the server's refusal then says what is missing.
  const text = await readFile(path.join(home, AUTH_TOKEN_FILE), "utf8").catch(() => "");
  return text.trim() || undefined;
}

/**
 * The user's own API token (docs/teams.md), for clients of a shared server: the file
 * APP_SERVER_TOKEN_FILE names, else `$XDG_CONFIG_HOME/agent-app-server/token` (default
 * `~/.config/agent-app-server/token`). Undefined when there is none.
 */
export async function userToken(env: NodeJS.ProcessEnv): Promise<string | undefined> {
  const config = env.XDG_CONFIG_HOME || path.join(os.homedir(), ".config");
  const file = env.APP_SERVER_TOKEN_FILE || path.join(config, "agent-app-server", "token");
  const text = await readFile(file, "utf8").catch(() => ""); // as above: none, and the server says so
  return text.trim() || undefined;
}

/** The token a client sends to `url` when none was given: the user's own, else a loopback server's generated one. */
export async function clientToken(url: string, opts: { home?: string; env: NodeJS.ProcessEnv }): Promise<string | undefined> {
  return (await userToken(opts.env)) ?? (await homeToken(url, opts));
}
