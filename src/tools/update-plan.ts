/** The `update_plan` tool: the model's step list, announced as `turn/plan/updated`. */
import { z } from "zod";
import { textOutcome, type LoopTool } from "../agent/tools.js";
import type { PlanStepStatus, ToolContext } from "./context.js";
import { defineTool } from "./define.js";

export const UpdatePlanArgs = z.object({
  explanation: z.string().optional().describe("Optional note on what changed in the plan."),
  plan: z
    .array(
      z.object({
        step: z.string().describe("A short description of the step."),
        status: z.enum(["pending", "in_progress", "completed"]),
      }),
    )
    .describe("The whole plan, in order. At most one step should be in_progress."),
});

const STATUS: Record<"pending" | "in_progress" | "completed", PlanStepStatus> = {
  pending: "pending",
  in_progress: "inProgress",
  completed: "completed",
};

export function updatePlanTool(ctx: ToolContext): LoopTool {
  return defineTool({
    name: "update_plan",
    description: "Records your plan for the task as a list of steps with their status (pending, in_progress, completed), shown to the user. Send the whole plan each time.",
    schema: UpdatePlanArgs,
    readOnly: false,
    async run(args) {
      await ctx.planUpdated(
        args.explanation ?? null,
        args.plan.map((s) => ({ step: s.step, status: STATUS[s.status] })),
      );
      return textOutcome("Plan updated");
    },
  });
}
