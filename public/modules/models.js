// The model picker beside Send (model/list): the open thread's model, or the server's default for
// a new thread; a change applies from the next turn on (turn/start's model and modelProvider).
// And the warning above the composer when that model's provider has no API key (account/read,
// modelProvider/list), shown before the first turn rather than after it fails.

import { $, h } from "./dom.js";
import { state } from "./state.js";

const same = (a, b) => a.model === b.model && a.modelProvider === b.modelProvider;

export async function loadModels() {
  try {
    state.models = (await state.rpc.request("model/list", {})).data;
  } catch {
    state.models = [];
  }
  showModelOf(state.settings);
}

/**
 * Fills the picker and selects `settings`' model (a thread's), or the server's default when there
 * is none; a thread's model missing from model/list gets an entry of its own.
 */
export function showModelOf(settings) {
  const current = settings?.model ? { model: settings.model, modelProvider: settings.modelProvider } : null;
  const options = state.models.map((m) => ({ model: m.model, modelProvider: m.modelProvider, label: `${m.displayName} (${m.modelProvider})`, isDefault: m.isDefault }));
  if (current && !options.some((o) => same(o, current))) options.unshift({ ...current, label: `${current.model} (${current.modelProvider})`, isDefault: false });
  state.modelOptions = options;
  const select = $("turn-model");
  select.replaceChildren(...options.map((o, i) => h("option", { value: String(i) }, o.label)));
  const wanted = current ?? options.find((o) => o.isDefault) ?? options[0];
  if (wanted) select.value = String(options.findIndex((o) => same(o, wanted)));
  updateKeyWarning();
}

/** The model the next turn (or the next new thread) uses: {model, modelProvider}, or null. */
export function pickedModel() {
  const o = state.modelOptions[Number($("turn-model").value)];
  return o ? { model: o.model, modelProvider: o.modelProvider } : null;
}

/** turn/start's overrides when the picker differs from the thread's model (else none). */
export function modelOverrides() {
  const picked = pickedModel();
  const s = state.settings;
  return picked && s && !same(picked, { model: s.model, modelProvider: s.modelProvider }) ? picked : {};
}

export async function loadCredentials() {
  try {
    const [account, providers] = await Promise.all([state.rpc.request("account/read", {}), state.rpc.request("modelProvider/list", {})]);
    state.credentials = { hasKey: account.account !== null, defaultProviderId: providers.defaultProviderId, providers: providers.data };
    showSignedIn(account.user ?? null);
  } catch {
    state.credentials = null; // a server without these methods: no warning
    showSignedIn(null);
  }
  updateKeyWarning();
}

/** The signed-in user in the top bar (a server that shares users says who; docs/teams.md). */
export function showSignedIn(user) {
  const el = $("signed-in");
  el.hidden = !user;
  if (!user) return;
  el.textContent = user.admin ? `${user.name} (admin)` : user.name;
  const roots = user.roots === null ? "any directory" : user.roots.length ? user.roots.join(", ") : "no directory";
  el.title = `Signed in as ${user.name}${user.admin ? ", an admin" : ""} (${user.signIn === "local" ? "the server's own token" : user.signIn}); works in ${roots}. Click to sign in with another token.`;
}

/**
 * account/read speaks of the default provider only, so the warning is about it: shown when the
 * picked model uses it, it has no key, and it is not a server that needs none (auth "none").
 */
export function updateKeyWarning() {
  const el = $("key-warning");
  const c = state.credentials;
  const providerId = pickedModel()?.modelProvider ?? c?.defaultProviderId;
  const provider = c?.providers.find((p) => p.id === providerId);
  const auth = provider?.settings?.auth;
  const missing = Boolean(c && providerId === c.defaultProviderId && !c.hasKey && auth?.mode === "environmentVariable");
  el.hidden = !missing;
  if (!missing) {
    el.replaceChildren();
    return;
  }
  el.replaceChildren(
    h("strong", {}, `No API key for provider ${providerId}`),
    " — set ",
    h("code", {}, auth.envKey),
    " (or ",
    h("code", {}, `${auth.envKey}_FILE`),
    ", a file holding it) where the server runs, then restart the server; turns fail until then.",
    providerId === "openai-chat" ? " A local server that needs no key (Ollama, vLLM …): set OPENAI_BASE_URL to its address instead." : "",
    provider.baseUrl ? ` Endpoint: ${provider.baseUrl}` : "",
  );
}
