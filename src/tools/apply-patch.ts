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
import { defineTool } from "./define.js";
import type { TurnDiffTracker } from "./diff-tracker.js";
import { commitFileWrites, parsePatch, planPatch, type CommitHooks, type ResolvedTarget } from "./patch.js";
import { checkPath, type PathCheck } from "./workspace.js";

export const ApplyPatchArgs = z.object({
  patch: z.string().describe("The patch text, from `*** Begin Patch` to `*** End Patch`."),
});

type FileChange = z.infer<typeof FileChangeItem>;

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
  const scope = { cwd: ctx.cwd, sandbox: ctx.sandbox, policy: ctx.sandboxPolicy };

  return defineTool({
    name: "apply_patch",
    description: DESCRIPTION,
    schema: ApplyPatchArgs,
    readOnly: false,
    async run({ patch }, _call, signal): Promise<ToolOutcome> {
      const parsed = parsePatch(patch);
      if (!parsed.ok) return textOutcome(`${parsed.error}\nNo files were changed.`, true);
      if (parsed.hunks.length === 0) return textOutcome("The patch contains no file operations; no files were changed.", true);

      // Every path, checked for writing.
      const named = new Set<string>();
      for (const h of parsed.hunks) {
        named.add(h.path);
        if (h.type === "update" && h.movePath !== null) named.add(h.movePath);
      }
      const checks = new Map<string, PathCheck>();
      for (const p of named) checks.set(p, await checkPath(scope, p, "write"));
      const objections: string[] = [];
      const touched = new Set<string>();
      for (const [p, check] of checks) {
        if (!check.ok && !check.outside) return textOutcome(`Cannot apply the patch: ${p}: ${check.reason}. No files were changed.`, true);
        touched.add(check.real!);
        if (!check.ok && !ctx.sessionApprovals.has(fileApprovalKey(check.real!))) objections.push(check.reason);
      }
      const allSessionApproved = [...touched].every((real) => ctx.sessionApprovals.has(fileApprovalKey(real)));
      let decision = decidePatch({ policy: ctx.approvalPolicy, allSessionApproved, sandboxObjections: objections });
      if (decision.action === "refuse" && policyMode(ctx.approvalPolicy) === "never") {
        // Refused before reading anything outside the allowed roots.
        return textOutcome(
          `Refused to apply the patch: ${decision.reason}. The approval policy is "never", so approval cannot be requested; only write inside the sandbox (${ctx.sandbox}). No files were changed.`,
          true,
        );
      }

      const resolve = (p: string): ResolvedTarget => {
        const c = checks.get(p)!;
        return { display: c.path!, real: c.real! };
      };
      const planned = await planPatch(parsed.hunks, resolve);
      if (!planned.ok) return textOutcome(`Failed to apply the patch: ${planned.error}\nNo files were changed.`, true);
      const plan = planned.plan;

      const startedAtMs = Date.now();
      const item: FileChange = { type: "fileChange", id: ctx.newItemId(), changes: plan.changes, status: "inProgress", startedAtMs };
      await ctx.startItem(item);
      const complete = (status: FileChange["status"]) => ctx.completeItem({ ...item, status, completedAtMs: Date.now() });

      if (decision.action === "ask") {
        const answer = await ctx.requestApproval({ kind: "fileChange", params: { itemId: item.id, startedAtMs, reason: decision.reason, grantRoot: null } }, signal);
        if (answer === "acceptForSession") for (const real of touched) ctx.sessionApprovals.add(fileApprovalKey(real));
        if (answer === "decline" || answer === "cancel") {
          await complete("declined");
          const outcome = textOutcome(
            answer === "cancel"
              ? "The user cancelled this patch; no files were changed and the turn is ending."
              : "The user declined this patch; no files were changed. Do not retry it unchanged; choose another approach or ask the user.",
            true,
          );
          return answer === "cancel" ? { ...outcome, endTurn: true } : outcome;
        }
        decision = { action: "run" };
      }
      if (decision.action === "refuse") {
        await complete("declined");
        return textOutcome(`Refused to apply the patch: ${decision.reason}. No files were changed.`, true);
      }

      if (signal.aborted) {
        await complete("declined");
        return textOutcome("The turn was interrupted before the patch was applied; no files were changed.", true);
      }
      for (const w of plan.writes) tracker.recordBaseline(w.real, w.display, w.before);
      try {
        await commitFileWrites(plan.writes, hooks);
      } catch (err) {
        await complete("failed");
        return textOutcome(`Failed to apply the patch: ${(err as Error).message}`, true);
      }
      await complete("completed");
      await ctx.diffUpdated(await tracker.render());
      return textOutcome(`Success. Updated the following files:\n${plan.summary.join("\n")}`);
    },
  });
}
