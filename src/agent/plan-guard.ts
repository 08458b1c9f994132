/**
 * The plan stop-guard (seed 002, DESIGN.md §3.6): a model that ends its turn while the plan it
 * wrote with `update_plan` still has open steps is reminded once, so it either finishes them or
 * says why not, instead of stopping half-way with a plan that claims work is pending.
 *
 * Pure: the plan is read back from `update_plan` calls — the thread's newest one, whichever turn
 * wrote it and whether or not a compaction has since replaced the history it was written in (the
 * runtime reads it from the thread's whole log; the loop follows the calls it appends).
 */
import type { DeveloperMessage, Message } from "./messages.js";

export interface PlanStep {
  step: string;
  status: string;
}

const STATUSES = new Set(["pending", "in_progress", "completed"]);

/**
 * The plan of the last valid `update_plan` call in `messages`, or null when there is none (a call
 * the tool rejected sets no plan).
 */
export function latestPlan(messages: readonly Message[]): PlanStep[] | null {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]!;
    if (m.role !== "assistant") continue;
    for (let k = m.content.length - 1; k >= 0; k--) {
      const b = m.content[k]!;
      if (b.type !== "toolCall" || b.name !== "update_plan") continue;
      const plan = parsePlan(b.arguments);
      if (plan) return plan;
    }
  }
  return null;
}

/** The steps of `plan` that are not completed. */
export function openSteps(plan: readonly PlanStep[] | null): PlanStep[] {
  return (plan ?? []).filter((s) => s.status !== "completed");
}

function parsePlan(args: string): PlanStep[] | null {
  try {
    const v = JSON.parse(args) as { plan?: unknown };
    if (!Array.isArray(v.plan)) return null;
    const steps: PlanStep[] = [];
    for (const s of v.plan as unknown[]) {
      const o = s as { step?: unknown; status?: unknown };
      if (typeof o?.step !== "string" || typeof o.status !== "string" || !STATUSES.has(o.status)) return null;
      steps.push({ step: o.step, status: o.status });
    }
    return steps;
  } catch {
    return null; // arguments that are not JSON set no plan (the update_plan call itself failed on them)
  }
}

export const PLAN_REMINDER_TAG = "plan_reminder";

/** The one reminder (a developer message appended to the history: earlier bytes never change). */
export function planReminder(open: readonly PlanStep[]): DeveloperMessage {
  const steps = open.map((s) => `- [${s.status}] ${s.step}`).join("\n");
  return {
    role: "developer",
    content: [
      {
        type: "text",
        text: `<${PLAN_REMINDER_TAG}>\nYou are ending your turn, but your plan still has steps that are not completed:\n${steps}\nContinue with them now, or call update_plan to mark them completed or drop them and say why they cannot be done.\n</${PLAN_REMINDER_TAG}>`,
      },
    ],
  };
}
