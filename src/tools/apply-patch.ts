/**
 * The `apply_patch` tool: a Codex-format patch, parsed and checked against the files before
 * anyone is asked or anything is written, then applied all-or-nothing as a `fileChange` item.
 * After each applied patch the turn's aggregated diff is re-announced.
 */
import { z } from "zod";
import { textOutcome, type LoopTool, type ToolOutcome } from "../agent/tools.js";
import type { FileChangeItem } from "../protocol/items.js";
import { decidePatch, fileApprovalKey, policyMode } from "./approval.js";
import type { ToolContext } from "./context.js";
import { hostTool, type ToolAction } from "./host.js";
import type { TurnDiffTracker } from "./diff-tracker.js";
import { commitFileWrites, parsePatch, planPatch, type CommitHooks, type PatchHunk, type PatchPlan, type ResolvedTarget } from "./patch.js";
import { checkPath, type PathCheck } from "./workspace.js";

export const ApplyPatchArgs = z.object({
  patch: z.string().describe("The patch text, from `*** Begin Patch` to `*** End Patch`."),
});

type FileChange = z.infer<typeof FileChangeItem>;

const mib = (bytes: number) => `${(bytes / (1024 * 1024)).toFixed(1)} MiB`;

const DESCRIPTION = `Edits files with a patch. Format:
*** Begin Patch
*** Add File: path/to/new.txt
+first line of the new file
*** Delete File: path/to/old.txt
*** Update File: path/to/file.py
*** Move to: path/to/renamed.py   (optional)
@@ def some_function():           (optional context line the change comes after)
 unchanged context line
-removed line
+added line
*** End of File                   (optional: the chunk is at the end of the file)
*** End Patch
Paths are relative to the workspace root. Give about 3 lines of context around each change. Every chunk must match the file, or nothing is changed.`;

export function applyPatchTool(ctx: ToolContext, tracker: TurnDiffTracker, hooks: CommitHooks = {}): LoopTool {
  return hostTool(
    {
      name: "apply_patch",
      description: DESCRIPTION,
      schema: ApplyPatchArgs,
      readOnly: false,
      async plan({ patch }): Promise<ToolAction | ToolOutcome> {
        const parsed = parseWithinLimit(ctx, patch);
        if (!Array.isArray(parsed)) return parsed;
        const paths = await checkPatchPaths(ctx, parsed);
        if ("content" in paths) return paths;
        const allSessionApproved = [...paths.touched].every((real) => ctx.sessionApprovals.has(fileApprovalKey(real)));
        const gate = decidePatch({ policy: ctx.approvalPolicy, allSessionApproved, sandboxObjections: paths.objections });
        if (gate.action === "refuse" && policyMode(ctx.approvalPolicy) === "never") {
          // Refused before reading anything outside the allowed roots.
          return textOutcome(
            `Refused to apply the patch: ${gate.reason}. The approval policy is "never", so approval cannot be requested; only write inside the sandbox (${ctx.sandbox}). No files were changed.`,
            true,
          );
        }
        const planned = await planPatch(parsed, paths.resolve);
        if (!planned.ok) return textOutcome(`Failed to apply the patch: ${planned.error}\nNo files were changed.`, true);
        return patchAction(ctx, tracker, hooks, planned.plan, gate, paths.touched);
      },
    },
    ctx,
  );
}

/** The patch's file operations, or why there are none to apply (too large, malformed, empty). */
function parseWithinLimit(ctx: ToolContext, patch: string): PatchHunk[] | ToolOutcome {
  const max = ctx.commands.boundary.maxPatchBytes;
  const size = Buffer.byteLength(patch);
  if (size > max)
    return textOutcome(`The patch is too large: ${mib(size)} exceeds the limit of ${mib(max)}. Split it into smaller patches (or write generated content with a command). No files were changed.`, true);
  const parsed = parsePatch(patch);
  if (!parsed.ok) return textOutcome(`${parsed.error}\nNo files were changed.`, true);
  if (parsed.hunks.length === 0) return textOutcome("The patch contains no file operations; no files were changed.", true);
  return parsed.hunks;
}

/**
 * Every path the patch names, checked for writing: where each one is, the files touched, and the
 * sandbox's objections not already approved for the session; or the outcome when a path is refused outright.
 */
async function checkPatchPaths(
  ctx: ToolContext,
  hunks: readonly PatchHunk[],
): Promise<{ resolve: (p: string) => ResolvedTarget; touched: Set<string>; objections: string[] } | ToolOutcome> {
  const named = new Set<string>();
  for (const h of hunks) {
    named.add(h.path);
    if (h.type === "update" && h.movePath !== null) named.add(h.movePath);
  }
  const checks = new Map<string, PathCheck>();
  for (const p of named) checks.set(p, await checkPath(ctx, p, "write"));
  const objections: string[] = [];
  const touched = new Set<string>();
  for (const [p, check] of checks) {
    if (!check.ok && !check.outside) return textOutcome(`Cannot apply the patch: ${p}: ${check.reason}. No files were changed.`, true);
    touched.add(check.real!);
    if (!check.ok && !ctx.sessionApprovals.has(fileApprovalKey(check.real!))) objections.push(check.reason);
  }
  const resolve = (p: string): ResolvedTarget => {
    const c = checks.get(p)!;
    return { display: c.path!, real: c.host! };
  };
  return { resolve, touched, objections };
}

/** The planned patch as the tool host runs it: a fileChange item, its approval, and the all-or-nothing commit. */
function patchAction(ctx: ToolContext, tracker: TurnDiffTracker, hooks: CommitHooks, plan: PatchPlan, gate: ToolAction["gate"], touched: ReadonlySet<string>): ToolAction {
  const draft: Omit<FileChange, "id" | "startedAtMs"> = { type: "fileChange", changes: plan.changes, status: "inProgress" };
  return {
    item: draft,
    gate,
    approval: (itemId, startedAtMs, reason) => ({ kind: "fileChange", params: { itemId, startedAtMs, reason, grantRoot: null } }),
    acceptedForSession: () => {
      for (const real of touched) ctx.sessionApprovals.add(fileApprovalKey(real));
    },
    notRun(why, reason) {
      const text =
        why === "cancel"
          ? "The user cancelled this patch; no files were changed and the turn is ending."
          : why === "decline"
            ? "The user declined this patch; no files were changed. Do not retry it unchanged; choose another approach or ask the user."
            : `Refused to apply the patch: ${reason}. No files were changed.`;
      return { patch: { status: "declined" }, outcome: textOutcome(text, true) };
    },
    async execute(_host, signal) {
      if (signal.aborted) {
        return { patch: { status: "declined" }, outcome: textOutcome("The turn was interrupted before the patch was applied; no files were changed.", true) };
      }
      for (const w of plan.writes) tracker.recordBaseline(w.real, w.display, w.before);
      try {
        await commitFileWrites(plan.writes, hooks);
      } catch (err) {
        return { patch: { status: "failed" }, outcome: textOutcome(`Failed to apply the patch: ${(err as Error).message}`, true) };
      }
      return {
        patch: { status: "completed" },
        outcome: textOutcome(`Success. Updated the following files:\n${plan.summary.join("\n")}`),
        // Announced after item/completed of the file change, as Codex orders them.
        afterCompleted: async () => ctx.diffUpdated(await tracker.render()),
      };
    },
  };
}
