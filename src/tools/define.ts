/**
 * Building a LoopTool from a zod schema (tools that record no item; tools that act go through the
 * tool host, host.ts, which uses the same parsing): the JSON Schema the model sees comes from the same
 * schema that validates the arguments, and bad arguments (not JSON, wrong types, missing fields)
 * become an error result naming the problem instead of an exception.
 */
import { z } from "zod";
import type { ToolCallBlock } from "../agent/messages.js";
import { textOutcome, ToolHostError, type LoopTool, type ToolOutcome } from "../agent/tools.js";

export type ToolArgs<S extends z.ZodType> = { ok: true; value: z.infer<S> } | { ok: false; error: string };

/** The model-facing JSON Schema of a tool's arguments (deterministic; no `$schema` key). */
export function inputSchemaOf(schema: z.ZodType): Record<string, unknown> {
  // Tools are built for every turn, but their schemas never change: convert each once.
  let cached = schemaCache.get(schema);
  if (!cached) {
    const json = z.toJSONSchema(schema, { io: "input" }) as Record<string, unknown>;
    delete json.$schema;
    cached = withoutSafeIntegerBounds(json) as Record<string, unknown>;
    schemaCache.set(schema, cached);
  }
  return cached;
}

const schemaCache = new WeakMap<z.ZodType, Record<string, unknown>>();

/** zod spells `.int()` as ±MAX_SAFE_INTEGER bounds: noise for a model, so they are dropped. */
function withoutSafeIntegerBounds(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(withoutSafeIntegerBounds);
  if (typeof node !== "object" || node === null) return node;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(node)) {
    if (k === "maximum" && v === Number.MAX_SAFE_INTEGER) continue;
    if (k === "minimum" && v === Number.MIN_SAFE_INTEGER) continue;
    out[k] = withoutSafeIntegerBounds(v);
  }
  return out;
}

function describeIssues(error: z.ZodError): string {
  return error.issues
    .map((issue) => {
      const where = issue.path.length ? issue.path.map((p) => (typeof p === "number" ? `[${p}]` : String(p))).join(".").replace(/\.\[/g, "[") : "arguments";
      if (issue.code === "invalid_type" && /received undefined/.test(issue.message)) return `${where}: missing (required)`;
      return `${where}: ${issue.message.replace(/^Invalid input: /, "")}`;
    })
    .join("; ");
}

/** Parses a call's raw JSON arguments against a schema. Top-level `null`s count as absent. */
export function parseToolArgs<S extends z.ZodType>(toolName: string, raw: string, schema: S): ToolArgs<S> {
  let value: unknown;
  const text = raw.trim();
  if (text === "") value = {};
  else {
    try {
      value = JSON.parse(text);
    } catch (err) {
      return { ok: false, error: `Invalid arguments for ${toolName}: not valid JSON (${(err as Error).message}).` };
    }
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return { ok: false, error: `Invalid arguments for ${toolName}: expected a JSON object.` };
  }
  const cleaned = Object.fromEntries(Object.entries(value).filter(([, v]) => v !== null));
  const parsed = schema.safeParse(cleaned);
  if (!parsed.success) return { ok: false, error: `Invalid arguments for ${toolName}: ${describeIssues(parsed.error)}.` };
  return { ok: true, value: parsed.data };
}

export interface ToolDefinition<S extends z.ZodType> {
  name: string;
  description: string;
  schema: S;
  readOnly: boolean;
  run(args: z.infer<S>, call: ToolCallBlock, signal: AbortSignal): Promise<ToolOutcome>;
}

export function defineTool<S extends z.ZodType>(def: ToolDefinition<S>): LoopTool {
  return {
    spec: { name: def.name, description: def.description, inputSchema: inputSchemaOf(def.schema) },
    readOnly: def.readOnly,
    async execute(call, signal) {
      const args = parseToolArgs(def.name, call.arguments, def.schema);
      if (!args.ok) return textOutcome(args.error, true);
      try {
        return await def.run(args.value, call, signal);
      } catch (err) {
        // The host failed (its store): not the tool's failure, never reported as one.
        if (err instanceof ToolHostError) throw err;
        return textOutcome(`${def.name} failed: ${err instanceof Error ? err.message : String(err)}`, true);
      }
    },
  };
}
