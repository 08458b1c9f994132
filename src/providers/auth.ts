/**
 * Credential and base-URL resolution shared by the adapters. The SDKs read their own env vars;
 * this module only decides, up front, whether a call can possibly authenticate, so a missing
 * key surfaces as a clear `auth` ProviderError instead of an SDK-specific exception.
 */
import { ProviderError } from "./types.js";

export interface AuthInputs {
  provider: string;
  /** Explicit key from ProviderOptions. */
  apiKey?: string;
  /** Explicit base URL from ProviderOptions. */
  baseURL?: string;
  /** Env vars the SDK reads for a credential, in its order of preference (first is named in errors). */
  keyEnvVars: readonly string[];
  baseURLEnvVar: string;
}

export interface ResolvedAuth {
  /** Key to hand the SDK; undefined = let the SDK read its env var itself. */
  apiKey: string | undefined;
  baseURL: string | undefined;
  /** Set when no credential exists and the server is not local: every call fails with it. */
  missingKeyError: ProviderError | null;
  /** Values to scrub from error messages. */
  secrets: string[];
}

/** A placeholder for local OpenAI/Anthropic-compatible servers that ignore the key. */
export const LOCAL_PLACEHOLDER_KEY = "local-no-key";

export function isLocalBaseURL(url: string | undefined): boolean {
  if (!url) return false;
  let host: string;
  try {
    host = new URL(url).hostname.toLowerCase();
  } catch {
    return false;
  }
  host = host.replace(/^\[|\]$/g, "");
  return host === "localhost" || host.endsWith(".localhost") || host === "::1" || host === "0.0.0.0" || /^127\./.test(host);
}

function env(name: string): string | undefined {
  const v = process.env[name];
  return v === undefined || v.trim() === "" ? undefined : v.trim();
}

export function resolveAuth(inp: AuthInputs): ResolvedAuth {
  const baseURL = inp.baseURL ?? env(inp.baseURLEnvVar);
  const envSecrets = inp.keyEnvVars.map(env).filter((v): v is string => v !== undefined);
  if (inp.apiKey) {
    return { apiKey: inp.apiKey, baseURL: inp.baseURL, missingKeyError: null, secrets: [inp.apiKey, ...envSecrets] };
  }
  if (envSecrets.length > 0) {
    // Let the SDK pick the env credential itself (Anthropic also honours ANTHROPIC_AUTH_TOKEN).
    return { apiKey: undefined, baseURL: inp.baseURL, missingKeyError: null, secrets: envSecrets };
  }
  if (isLocalBaseURL(baseURL)) {
    return { apiKey: LOCAL_PLACEHOLDER_KEY, baseURL: inp.baseURL, missingKeyError: null, secrets: [] };
  }
  const variable = inp.keyEnvVars[0];
  const missingKeyError = new ProviderError("auth", `${inp.provider}: ${variable} is not set: set it (or ${variable}_FILE, a file holding it) where the server runs, and restart the server`);
  return { apiKey: undefined, baseURL: inp.baseURL, missingKeyError, secrets: [] };
}
