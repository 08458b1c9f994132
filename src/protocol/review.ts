/** review/start: a code review as a turn of the thread (Codex's `/review`). */
import { z } from "zod";
import { ThreadId, Turn } from "./thread.js";

const text = (what: string) => z.string().trim().min(1, `${what} must not be empty`).max(64 * 1024, `${what} is at most 65536 characters`);

export const ReviewTarget = z
  .discriminatedUnion("type", [
    /** Staged, unstaged and untracked changes of the working tree. */
    z.object({ type: z.literal("uncommittedChanges") }),
    /** The branch's changes since it left `branch`. */
    z.object({ type: z.literal("baseBranch"), branch: text("branch").max(256) }),
    /** One commit; `title` is a label for UIs (its subject). */
    z.object({ type: z.literal("commit"), sha: text("sha").max(256), title: z.string().max(1024).nullable().optional() }),
    /** The reviewer follows these instructions instead. */
    z.object({ type: z.literal("custom"), instructions: text("instructions") }),
  ])
  .meta({ id: "ReviewTarget" });
export type ReviewTarget = z.infer<typeof ReviewTarget>;

export const ReviewStartParams = z
  .object({
    threadId: ThreadId,
    target: ReviewTarget,
    /** Reviews run inline, in the thread itself (the only delivery Codex 0.171 offers). */
    delivery: z.enum(["inline"]).nullable().optional(),
  })
  .meta({ id: "ReviewStartParams" });
export const ReviewStartResponse = z.object({ turn: Turn, reviewThreadId: z.string() }).meta({ id: "ReviewStartResponse" });
