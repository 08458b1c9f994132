/** Generates protocol/schema/*.json from the zod tables: one file per type plus one bundle. */
import { mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import { z } from "zod";
import * as E from "./jsonrpc.js";
import { clientNotifications, clientRequests, serverNotifications, serverRequests } from "./methods.js";

function pascal(method: string): string {
  return method
    .split(/[/_]/)
    .map((p) => p.charAt(0).toUpperCase() + p.slice(1))
    .join("");
}

/** Every named schema, keyed by file name; method names give names to schemas without `.meta({id})`. */
export function namedSchemas(): Map<string, z.ZodType> {
  const out = new Map<string, z.ZodType>();
  const add = (name: string, schema: z.ZodType) => out.set(name, schema);
  for (const [name, schema] of Object.entries({
    RequestId: E.RequestId,
    JSONRPCRequest: E.JSONRPCRequest,
    JSONRPCNotification: E.JSONRPCNotification,
    JSONRPCResponse: E.JSONRPCResponse,
    JSONRPCError: E.JSONRPCError,
  }))
    add(name, schema);
  for (const [method, { params, result }] of Object.entries(clientRequests)) {
    add(`${pascal(method)}Params`, params);
    add(`${pascal(method)}Response`, result);
  }
  for (const [method, params] of Object.entries(serverNotifications)) add(`${pascal(method)}Notification`, params);
  for (const [method, params] of Object.entries(clientNotifications)) add(`${pascal(method)}ClientNotification`, params);
  for (const [method, def] of Object.entries(serverRequests) as [string, { params: z.ZodType; result: z.ZodType }][]) {
    add(`${pascal(method)}Params`, def.params);
    add(`${pascal(method)}Response`, def.result);
  }
  return out;
}

/** Stable JSON text: sorted object keys, two-space indent, trailing newline. */
export function stableJson(value: unknown): string {
  const sort = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(sort);
    if (v && typeof v === "object") {
      return Object.fromEntries(
        Object.keys(v as object)
          .sort()
          .map((k) => [k, sort((v as Record<string, unknown>)[k])]),
      );
    }
    return v;
  };
  return JSON.stringify(sort(value), null, 2) + "\n";
}

/** The files to write: name → contents. Params are rendered as input (what a client may send). */
export function renderJsonSchemas(): Map<string, string> {
  const files = new Map<string, string>();
  const methods: Record<string, string[]> = {
    clientRequests: Object.keys(clientRequests),
    clientNotifications: Object.keys(clientNotifications),
    serverNotifications: Object.keys(serverNotifications),
    serverRequests: Object.keys(serverRequests),
  };
  const bundle: Record<string, unknown> = {};
  for (const [name, schema] of namedSchemas()) {
    const io = name.endsWith("Params") ? "input" : "output";
    const json = z.toJSONSchema(schema, { target: "draft-07", io, unrepresentable: "any", reused: "inline" });
    files.set(`${name}.json`, stableJson({ title: name, ...json }));
    bundle[name] = json;
  }
  files.set("agent_app_server_protocol.schemas.json", stableJson({ title: "agent-app-server protocol", methods, definitions: bundle }));
  return files;
}

export async function writeJsonSchemas(outDir: string): Promise<string[]> {
  await mkdir(outDir, { recursive: true });
  const files = renderJsonSchemas();
  for (const [name, text] of files) await writeFile(path.join(outDir, name), text);
  return [...files.keys()];
}
