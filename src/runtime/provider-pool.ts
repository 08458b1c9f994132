/**
 * One provider instance per provider id, created on first use. The adapters (and their SDKs) are
 * imported lazily: a server that never runs a turn does not pay their start-up time or memory.
 */
import type { ProviderId, ProviderOptions } from "../providers/index.js";
import type { ModelProvider } from "../providers/types.js";

export class ProviderPool {
  private readonly instances = new Map<string, Promise<ModelProvider>>();

  constructor(private readonly options: Partial<Record<ProviderId, ProviderOptions>> = {}) {}

  get(id: string): Promise<ModelProvider> {
    let p = this.instances.get(id);
    if (!p) {
      p = import("../providers/index.js").then(({ createProvider, isProviderId }) => {
        if (!isProviderId(id)) throw new Error(`unknown model provider: ${id}`);
        return createProvider(id, this.options[id] ?? {});
      });
      this.instances.set(id, p);
      p.catch(() => this.instances.delete(id));
    }
    return p;
  }
}
