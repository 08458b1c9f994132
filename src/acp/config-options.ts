/**
 * A session's ACP config options: its mode (the same presets as session modes) and its model, a
 * choice among the server's models (model/list; `provider/model` values, so the same model name
 * under two providers stays two choices). The current model is listed even when model/list does
 * not name it (a thread started elsewhere with another model).
 */
import type { SessionConfigOption } from "@agentclientprotocol/sdk/unstable";
import type { RpcClient } from "../client/rpc-client.js";
import type { Model } from "../protocol/session.js";
import { availableModes, type ModeId } from "./modes.js";

const modelValue = (provider: string, model: string) => `${provider}/${model}`;

export class ConfigOptions {
  private models: Promise<Model[]> | null = null;

  constructor(private readonly codex: RpcClient) {}

  private list(): Promise<Model[]> {
    return (this.models ??= this.codex.request("model/list", {}).then((r: { data: Model[] }) => r.data.filter((m) => !m.hidden)));
  }

  async of(settings: { mode: ModeId; model: string; modelProvider: string }): Promise<SessionConfigOption[]> {
    const { mode, model, modelProvider } = settings;
    const current = modelValue(modelProvider, model);
    const models = (await this.list()).map((m) => ({ value: modelValue(m.modelProvider, m.model), name: m.displayName, description: m.description }));
    if (!models.some((m) => m.value === current)) models.unshift({ value: current, name: model, description: `${model} via the ${modelProvider} provider` });
    return [
      { id: "mode", name: "Mode", category: "mode", type: "select", currentValue: mode, options: availableModes().map((m) => ({ value: m.id, name: m.name, description: m.description ?? null })) },
      { id: "model", name: "Model", category: "model", type: "select", currentValue: current, options: models },
    ];
  }

  /** The model a config value names, or undefined. */
  async model(value: unknown): Promise<Model | undefined> {
    return (await this.list()).find((m) => modelValue(m.modelProvider, m.model) === value);
  }
}
