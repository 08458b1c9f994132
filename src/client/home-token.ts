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
  const text = await readFile(path.join(home, AUTH_TOKEN_FILE), "utf8").catch(() => "");
  return text.trim() || undefined;
}
