/**
 * Which model providers can authenticate, decided the way the adapters decide it
 * (src/providers/auth.ts): a key given in the provider's options or in one of the SDK's
 * variables; otherwise a local endpoint (Ollama, vLLM … on localhost) needs none, and anything
 * else fails its first call. Answers account/read and modelProvider/list, so that a client can say
 * "no API key for provider X — set …" before the first turn rather than after it fails.
 */
import { isLocalBaseURL } from "../providers/auth.js";
import type { ProviderId, ProviderOptions } from "../providers/index.js";

export interface ProviderCredential {
  id: ProviderId;
  name: string;
  /** The variable to set (the first the SDK reads). */
  envKey: string;
  /** The endpoint set for it (options, then the SDK's variable); undefined: the SDK's default. */
  baseURL: string | undefined;
  /** A key is there (options or environment). */
  hasKey: boolean;
  /** No key, and none needed: the endpoint is on this machine. */
  keyless: boolean;
}

/** Each provider's name and the variables its SDK reads (the adapters pass the same lists to resolveAuth). */
const PROVIDERS: Record<ProviderId, { name: string; keyVars: readonly string[]; baseURLVar: string }> = {
  anthropic: { name: "Anthropic (Messages API)", keyVars: ["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"], baseURLVar: "ANTHROPIC_BASE_URL" },
  openai: { name: "OpenAI (Responses API)", keyVars: ["OPENAI_API_KEY"], baseURLVar: "OPENAI_BASE_URL" },
  "openai-chat": { name: "OpenAI-compatible (Chat Completions API)", keyVars: ["OPENAI_API_KEY"], baseURLVar: "OPENAI_BASE_URL" },
};

const set = (v: string | undefined): string | undefined => (v === undefined || v.trim() === "" ? undefined : v.trim());

export function providerCredentials(
  ids: readonly ProviderId[],
  options: Partial<Record<ProviderId, ProviderOptions>>,
  env: NodeJS.ProcessEnv,
): ProviderCredential[] {
  return ids.map((id) => {
    const p = PROVIDERS[id];
    const o = options[id] ?? {};
    const baseURL = set(o.baseURL) ?? set(env[p.baseURLVar]);
    const hasKey = Boolean(set(o.apiKey)) || p.keyVars.some((v) => set(env[v]) !== undefined);
    return { id, name: p.name, envKey: p.keyVars[0]!, baseURL, hasKey, keyless: !hasKey && isLocalBaseURL(baseURL) };
  });
}

/** An endpoint fit to show a client: without user:password, query or fragment; null when unparsable. */
export function displayableBaseURL(url: string | undefined): string | null {
  if (!url) return null;
  try {
    const u = new URL(url);
    if (u.username || u.password) return null;
    return `${u.origin}${u.pathname}`;
  } catch {
    return null;
  }
}
