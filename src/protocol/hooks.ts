/**
 * Hook runs as clients see them (Codex v2 `hook/started` / `hook/completed` with a HookRunSummary):
 * every run of a user hook inside a turn is announced, recorded before it is published like any
 * thread event, so the record says which hook ran, what it decided and why it failed.
 */
import { z } from "zod";

const seq = z.number().int().positive();

/** The hook events this server runs (of Codex's HookEventName). */
export const HookEventName = z.enum(["preToolUse", "postToolUse", "stop"]).meta({ id: "HookEventName" });

export const HookRunStatus = z.enum(["running", "completed", "failed", "blocked", "stopped"]).meta({ id: "HookRunStatus" });
export const HookOutputEntry = z
  .object({ kind: z.enum(["warning", "stop", "feedback", "context", "error"]), text: z.string() })
  .meta({ id: "HookOutputEntry" });

export const HookRunSummary = z
  .object({
    id: z.string(),
    eventName: HookEventName,
    handlerType: z.literal("command"),
    executionMode: z.literal("sync"),
    scope: z.literal("turn"),
    sourcePath: z.string(),
    source: z.literal("user"),
    displayOrder: z.number().int(),
    status: HookRunStatus,
    statusMessage: z.string().nullable(),
    /** Unix seconds. */
    startedAt: z.number().int(),
    completedAt: z.number().int().nullable(),
    durationMs: z.number().int().nullable(),
    entries: z.array(HookOutputEntry),
  })
  .meta({ id: "HookRunSummary" });
export type HookRunSummary = z.infer<typeof HookRunSummary>;

export const HookStartedNotification = z.object({ threadId: z.string(), turnId: z.string().nullable(), run: HookRunSummary, seq }).meta({ id: "HookStartedNotification" });
export const HookCompletedNotification = z.object({ threadId: z.string(), turnId: z.string().nullable(), run: HookRunSummary, seq }).meta({ id: "HookCompletedNotification" });
