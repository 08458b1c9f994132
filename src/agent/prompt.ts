/**
 * Prompt assembly rules that keep every request of a thread a byte-stable prefix of the next
 * (DESIGN.md §5): a static system prompt (no dates, ids or hostnames), tools sorted by name with
 * canonical key order inside every schema, and settings changes appended as developer messages
 * instead of edits to anything earlier.
 */
import type { DeveloperMessage } from "./messages.js";
import type { ToolSpec } from "../providers/types.js";

export const BASE_INSTRUCTIONS = `You are a coding agent running in a workspace on the user's machine, driven through agent-app-server.
Work in small, verifiable steps: read before you change, prefer the provided tools over guessing, and keep edits minimal.
When you run commands or change files, say what you did and why. When you are done, answer with a short summary.
If a tool result says an action was declined, refused or not executed, do not retry it blindly: explain or take another way.`;

/** The thread's system prompt: base instructions plus the thread's developer instructions, fixed at thread start. */
export function systemPrompt(baseInstructions: string | null, developerInstructions: string | null): string {
  const base = baseInstructions ?? BASE_INSTRUCTIONS;
  return developerInstructions ? `${base}\n\n<developer_instructions>\n${developerInstructions}\n</developer_instructions>` : base;
}

/** A JSON value with object keys sorted recursively, so equal schemas serialise to equal bytes. */
export function canonicalize<T>(value: T): T {
  if (Array.isArray(value)) return value.map(canonicalize) as T;
  if (value && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(value as object).sort()) out[k] = canonicalize((value as Record<string, unknown>)[k]);
    return out as T;
  }
  return value;
}

/** Tools in a deterministic order (by name) with canonical schemas, whatever order they were registered in. */
export function toolList(specs: Iterable<ToolSpec>): ToolSpec[] {
  return [...specs]
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    .map((s) => ({ name: s.name, description: s.description, inputSchema: canonicalize(s.inputSchema) }));
}

export interface EnvironmentSettings {
  cwd: string;
  approvalPolicy: string;
  sandbox: string;
  shell: string;
}

const renderSettings = (s: Partial<EnvironmentSettings>) =>
  [
    s.cwd !== undefined ? `  <cwd>${s.cwd}</cwd>` : null,
    s.approvalPolicy !== undefined ? `  <approval_policy>${s.approvalPolicy}</approval_policy>` : null,
    s.sandbox !== undefined ? `  <sandbox_mode>${s.sandbox}</sandbox_mode>` : null,
    s.shell !== undefined ? `  <shell>${s.shell}</shell>` : null,
  ]
    .filter((l) => l !== null)
    .join("\n");

/** The environment-context message that opens a thread's history. */
export function environmentContext(s: EnvironmentSettings): DeveloperMessage {
  return { role: "developer", content: [{ type: "text", text: `<environment_context>\n${renderSettings(s)}\n</environment_context>` }] };
}

/** Appended when a turn or resume changes settings; states only what changed. */
export function settingsChanged(changed: Partial<EnvironmentSettings> & { instructions?: string }): DeveloperMessage {
  const lines = [renderSettings(changed)];
  if (changed.instructions !== undefined) lines.push(`  <instructions>\n${changed.instructions}\n  </instructions>`);
  return {
    role: "developer",
    content: [{ type: "text", text: `<settings_changed>\n${lines.filter(Boolean).join("\n")}\n</settings_changed>` }],
  };
}
