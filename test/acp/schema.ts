/**
 * Every message the agent sends, checked against the ACP JSON Schema that
 * @agentclientprotocol/sdk ships (schema/v1/schema.json; schema.unstable.json for the methods only
 * it has, such as session/fork): a request or notification by its method's params definition, a
 * response by the definition of the response to the client's request with that id, an error by
 * `Error`. Definitions are found by their `x-method` annotations, not listed by hand.
 */
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js";
import type { WireMessage } from "./support.js";

const require = createRequire(import.meta.url);
const load = (name: string) => JSON.parse(readFileSync(require.resolve(`@agentclientprotocol/sdk/schema/v1/${name}`), "utf8"));

interface Schemas {
  /** Validators by method: params of the agent's requests/notifications, results of its responses. */
  sent: Map<string, ValidateFunction>;
  results: Map<string, ValidateFunction>;
  error: ValidateFunction;
}

let schemas: Schemas | null = null;

function compile(): Schemas {
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false });
  const sent = new Map<string, ValidateFunction>();
  const results = new Map<string, ValidateFunction>();
  // Stable first: a method the stable schema defines is checked against it.
  for (const [id, file] of [
    ["acp-stable", "schema.json"],
    ["acp-unstable", "schema.unstable.json"],
  ] as const) {
    const schema = load(file);
    ajv.addSchema({ ...schema, $id: id });
    for (const [name, def] of Object.entries(schema.$defs as Record<string, { "x-method"?: string; "x-side"?: string }>)) {
      const method = def["x-method"];
      if (!method) continue;
      const validate = () => ajv.getSchema(`${id}#/$defs/${name}`)!;
      if (name.endsWith("Response")) {
        if (def["x-side"] === "agent" && !results.has(method)) results.set(method, validate());
      } else if ((def["x-side"] === "client" || def["x-side"] === "protocol") && !sent.has(method)) sent.set(method, validate());
    }
  }
  return { sent, results, error: ajv.getSchema("acp-stable#/$defs/Error")! };
}

/** What is wrong with the agent's messages on this wire (empty when every one validates). */
export function acpSchemaProblems(wire: WireMessage[]): string[] {
  schemas ??= compile();
  const { sent, results, error } = schemas;
  const problems: string[] = [];
  const requested = new Map<string | number, string>();
  for (const { from, message } of wire) {
    if (from === "client") {
      if (typeof message.method === "string" && message.id !== undefined) requested.set(message.id, message.method);
      continue;
    }
    const show = JSON.stringify(message).slice(0, 400);
    if (message.jsonrpc !== "2.0") problems.push(`no "jsonrpc": "2.0": ${show}`);
    let check: ValidateFunction | undefined;
    let value: unknown;
    if (typeof message.method === "string") {
      check = sent.get(message.method);
      value = message.params;
      if (!check) problems.push(`the agent sent ${message.method}, which is no ACP client method: ${show}`);
    } else if ("error" in message) {
      check = error;
      value = message.error;
    } else {
      const method = requested.get(message.id);
      check = method ? results.get(method) : undefined;
      value = message.result;
      if (!check) problems.push(`a response to no known request (${method ?? "unknown id"}): ${show}`);
    }
    if (check && !check(value)) problems.push(`${message.method ?? requested.get(message.id) ?? "error"}: ${JSON.stringify(check.errors?.slice(0, 3))} in ${show}`);
  }
  return problems;
}

/** Methods an agent sends (client-side methods, and the protocol's own). */
const AGENT_SENT = /^(session\/update|session\/request_permission|fs\/|terminal\/|elicitation\/|\$\/)/;

/**
 * A transcript of both directions without sender marks (acpx --format json prints one) as a wire:
 * requests and notifications by their method; a response by which side has a request of that id
 * open — and where both do, a permission answer (it has `outcome`) is the client's.
 */
export function wireOf(messages: Array<Record<string, any>>): WireMessage[] {
  const open = { agent: new Set<string | number>(), client: new Set<string | number>() };
  return messages.map((message) => {
    if (typeof message.method === "string") {
      const from = AGENT_SENT.test(message.method) ? "agent" : "client";
      if (message.id !== undefined) open[from].add(message.id);
      return { from, message };
    }
    const byClient = open.client.has(message.id);
    const byAgent = open.agent.has(message.id);
    const answersAgent = byAgent && (!byClient || (message.result && "outcome" in message.result));
    const from = answersAgent ? "client" : "agent";
    open[answersAgent ? "agent" : "client"].delete(message.id);
    return { from, message };
  });
}
