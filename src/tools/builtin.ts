/**
 * The built-in tools, built once per turn: per-turn state (the aggregated diff of the files the
 * turn changed) lives in this closure. Sorted by name so the tool list is byte-stable (DESIGN.md §5).
 */
import type { LoopTool } from "../agent/tools.js";
import { applyPatchTool } from "./apply-patch.js";
import type { ToolContext } from "./context.js";
import { TurnDiffTracker } from "./diff-tracker.js";
import { grepTool, type GrepOptions } from "./grep.js";
import { listDirTool } from "./list-dir.js";
import type { CommitHooks } from "./patch.js";
import { readFileTool, type ReadFileOptions } from "./read-file.js";
import { shellTool, type ShellOptions } from "./shell.js";
import { updatePlanTool } from "./update-plan.js";

export const BUILTIN_TOOL_NAMES = ["apply_patch", "grep", "list_dir", "read_file", "shell", "update_plan"] as const;

/** Limits, mostly for tests; the defaults are what the server uses. */
export interface BuiltinToolOptions {
  shell?: Partial<ShellOptions>;
  readFile?: Partial<ReadFileOptions>;
  grep?: Partial<GrepOptions>;
  listDirMaxEntries?: number;
  commitHooks?: CommitHooks;
}

export function builtinTools(ctx: ToolContext, options: BuiltinToolOptions = {}): LoopTool[] {
  const tracker = new TurnDiffTracker(ctx.cwd);
  return [
    applyPatchTool(ctx, tracker, options.commitHooks),
    grepTool(ctx, options.grep),
    listDirTool(ctx, options.listDirMaxEntries),
    readFileTool(ctx, options.readFile),
    shellTool(ctx, options.shell),
    updatePlanTool(ctx),
  ];
}
