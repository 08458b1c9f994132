/**
 * Server → client notifications. Every thread-scoped notification carries a per-thread,
 * strictly increasing `seq` in its params (DESIGN.md §10); the envelope adds `emittedAtMs`.
 */
import { z } from "zod";
import { ThreadStatus, TurnError } from "./common.js";
import { ThreadItem } from "./items.js";
import { Thread, Turn } from "./thread.js";

/** Per-thread event sequence number. Our extension (docs/protocol.md, "Our extensions to the Codex protocol"). */
const seq = z.number().int().positive();

export const ThreadStartedNotification = z.object({ thread: Thread, seq }).meta({ id: "ThreadStartedNotification" });
export const ThreadStatusChangedNotification = z
  .object({ threadId: z.string(), status: ThreadStatus, seq })
  .meta({ id: "ThreadStatusChangedNotification" });
export const ThreadArchivedNotification = z.object({ threadId: z.string(), seq }).meta({ id: "ThreadArchivedNotification" });
export const ThreadUnarchivedNotification = z.object({ threadId: z.string(), seq }).meta({ id: "ThreadUnarchivedNotification" });
export const ThreadNameUpdatedNotification = z
  .object({ threadId: z.string(), threadName: z.string().optional(), seq })
  .meta({ id: "ThreadNameUpdatedNotification" });

export const TurnStartedNotification = z.object({ threadId: z.string(), turn: Turn, seq }).meta({ id: "TurnStartedNotification" });
export const TurnCompletedNotification = z.object({ threadId: z.string(), turn: Turn, seq }).meta({ id: "TurnCompletedNotification" });

export const ItemStartedNotification = z
  .object({ item: ThreadItem, threadId: z.string(), turnId: z.string(), startedAtMs: z.number().int(), seq })
  .meta({ id: "ItemStartedNotification" });
export const ItemCompletedNotification = z
  .object({ item: ThreadItem, threadId: z.string(), turnId: z.string(), completedAtMs: z.number().int(), seq })
  .meta({ id: "ItemCompletedNotification" });

const delta = { threadId: z.string(), turnId: z.string(), itemId: z.string(), delta: z.string(), seq };
export const AgentMessageDeltaNotification = z.object(delta).meta({ id: "AgentMessageDeltaNotification" });
export const ReasoningSummaryTextDeltaNotification = z
  .object({ ...delta, summaryIndex: z.number().int().nonnegative() })
  .meta({ id: "ReasoningSummaryTextDeltaNotification" });
export const ReasoningTextDeltaNotification = z
  .object({ ...delta, contentIndex: z.number().int().nonnegative() })
  .meta({ id: "ReasoningTextDeltaNotification" });

export const TokenUsageBreakdown = z
  .object({
    totalTokens: z.number().int(),
    inputTokens: z.number().int(),
    cachedInputTokens: z.number().int(),
    cacheWriteInputTokens: z.number().int(),
    outputTokens: z.number().int(),
    reasoningOutputTokens: z.number().int(),
  })
  .meta({ id: "TokenUsageBreakdown" });
export const ThreadTokenUsageUpdatedNotification = z
  .object({
    threadId: z.string(),
    turnId: z.string(),
    tokenUsage: z.object({ total: TokenUsageBreakdown, last: TokenUsageBreakdown, modelContextWindow: z.number().int().nullable() }),
    seq,
  })
  .meta({ id: "ThreadTokenUsageUpdatedNotification" });

export const ErrorNotification = z
  .object({ error: TurnError, willRetry: z.boolean(), threadId: z.string(), turnId: z.string(), seq })
  .meta({ id: "ErrorNotification" });
