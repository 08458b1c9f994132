/**
 * Hook configuration (seed 002 "hooks, event sink"; Codex `hooks/list`): user-configured commands
 * run before and after a tool call and when a turn ends. One JSON file, by default
 * `<home>/hooks.json` (`APP_SERVER_HOOKS_CONFIG`), in the shape Codex and Claude Code use:
 *
 *   {"hooks": {"preToolUse":  [{"matcher": "shell|apply_patch", "hooks": [{"type": "command", "command": "./check.sh", "timeoutSec": 30}]}],
 *              "postToolUse": [{"hooks": [{"type": "command", "command": "logger -t agent"}]}],
 *              "stop":        [{"hooks": [{"type": "command", "command": "notify-send done"}]}]}}
 *
 * `matcher` is a regular expression on the tool name (absent: every tool; ignored for `stop`).
 */
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { z } from "zod";
import { HookEventName } from "../protocol/hooks.js";

export const HOOK_EVENTS = HookEventName.options;
export type HookEvent = (typeof HOOK_EVENTS)[number];

const CommandHandler = z.object({
  type: z.literal("command"),
  command: z.string().min(1),
  timeoutSec: z.number().positive().optional(),
  statusMessage: z.string().optional(),
});
const MatcherGroup = z.object({ matcher: z.string().nullable().optional(), hooks: z.array(CommandHandler) });
const HooksFile = z.object({ hooks: z.partialRecord(z.enum(HOOK_EVENTS), z.array(MatcherGroup)).default({}) });

export const DEFAULT_HOOK_TIMEOUT_SEC = 60;

export interface ConfiguredHook {
  key: string;
  event: HookEvent;
  matcher: RegExp | null;
  matcherText: string | null;
  command: string;
  timeoutSec: number;
  statusMessage: string | null;
  displayOrder: number;
  hash: string;
}

export interface HookConfig {
  /** The file read (reported as each hook's sourcePath). */
  path: string;
  hooks: ConfiguredHook[];
  /** Problems found while reading it (reported by hooks/list; the server still starts). */
  errors: string[];
}

/** Reads the hook file; a missing file is no hooks, a broken one is reported, never fatal. */
export async function loadHookConfig(path: string): Promise<HookConfig> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return { path, hooks: [], errors: [] };
    return { path, hooks: [], errors: [`cannot read ${path}: ${(err as Error).message}`] };
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    return { path, hooks: [], errors: [`${path} is not valid JSON: ${(err as Error).message}`] };
  }
  const parsed = HooksFile.safeParse(json);
  if (!parsed.success) return { path, hooks: [], errors: [`${path}: ${parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`] };
  const hooks: ConfiguredHook[] = [];
  const errors: string[] = [];
  for (const event of HOOK_EVENTS) {
    (parsed.data.hooks[event] ?? []).forEach((group, g) => {
      let matcher: RegExp | null = null;
      if (group.matcher) {
        try {
          matcher = new RegExp(`^(?:${group.matcher})$`);
        } catch (err) {
          errors.push(`${event}[${g}].matcher: ${(err as Error).message}`);
          return;
        }
      }
      group.hooks.forEach((h, i) => {
        const hash = createHash("sha256").update(JSON.stringify({ event, matcher: group.matcher ?? null, ...h })).digest("hex");
        hooks.push({
          key: `${event}:${g}:${i}`,
          event,
          matcher,
          matcherText: group.matcher ?? null,
          command: h.command,
          timeoutSec: h.timeoutSec ?? DEFAULT_HOOK_TIMEOUT_SEC,
          statusMessage: h.statusMessage ?? null,
          displayOrder: hooks.length,
          hash,
        });
      });
    });
  }
  return { path, hooks, errors };
}

/** hooks/list entries (Codex HooksListEntry/HookMetadata) for the given working directories. */
export function listHookEntries(config: HookConfig | null, cwds: readonly string[]) {
  return cwds.map((cwd) => ({
    cwd,
    hooks: (config?.hooks ?? []).map((h) => ({
      key: h.key,
      eventName: h.event,
      matcher: h.matcherText,
      timeoutSec: h.timeoutSec,
      statusMessage: h.statusMessage,
      additionalContextLimit: null,
      sourcePath: config!.path,
      source: "user" as const,
      pluginId: null,
      environmentId: null,
      displayOrder: h.displayOrder,
      enabled: true,
      isManaged: false,
      currentHash: h.hash,
      trustStatus: "trusted" as const,
      handlerType: "command" as const,
      command: h.command,
      async: false,
    })),
    warnings: [] as string[],
    errors: (config?.errors ?? []).map((message) => ({ path: config!.path, message })),
  }));
}
