/** turn/* methods (Codex v2 shapes). */
import { z } from "zod";
import { AskForApproval, JsonValue, ReasoningEffort, ReasoningSummary, SandboxPolicy, UserInput } from "./common.js";
import { Turn } from "./thread.js";

const ThreadId = z.string().min(1, "threadId must not be empty");
const Input = z.array(UserInput).min(1, "input must hold at least one item");
/**
 * A client's id for its message, to make a repeated turn/start or turn/steer idempotent. Bounded:
 * it is a key of a unique index, and Postgres refuses index entries over ~2.7 kB (a 8 kB id
 * answered -32603); 256 UTF-16 units are at most 768 bytes of UTF-8, and a UUID is 36.
 */
const ClientUserMessageId = z.string().max(256, "clientUserMessageId is at most 256 characters");

export const TurnStartParams = z
  .object({
    threadId: ThreadId,
    input: Input,
    clientUserMessageId: ClientUserMessageId.nullable().optional(),
    cwd: z.string().min(1).nullable().optional(),
    approvalPolicy: AskForApproval.nullable().optional(),
    sandboxPolicy: SandboxPolicy.nullable().optional(),
    /** A permission profile (`:read-only`, `:workspace`, `:danger-full-access`); not with sandboxPolicy. */
    permissions: z.string().min(1).nullable().optional(),
    /** Extra writable roots for the workspace sandbox, for this and later turns. */
    runtimeWorkspaceRoots: z.array(z.string().min(1)).nullable().optional(),
    model: z.string().min(1).nullable().optional(),
    /** Our extension: switch provider for this and later turns. */
    modelProvider: z.string().min(1).nullable().optional(),
    effort: ReasoningEffort.nullable().optional(),
    summary: ReasoningSummary.nullable().optional(),
    outputSchema: JsonValue.nullable().optional(),
    serviceTier: z.string().nullable().optional(),
    personality: z.string().nullable().optional(),
  })
  .meta({ id: "TurnStartParams" });
export type TurnStartParams = z.infer<typeof TurnStartParams>;
export const TurnStartResponse = z.object({ turn: Turn }).meta({ id: "TurnStartResponse" });

export const TurnInterruptParams = z.object({ threadId: ThreadId, turnId: z.string().min(1) }).meta({ id: "TurnInterruptParams" });
export const TurnInterruptResponse = z.object({}).meta({ id: "TurnInterruptResponse" });

export const TurnSteerParams = z
  .object({ threadId: ThreadId, expectedTurnId: z.string().min(1), input: Input, clientUserMessageId: ClientUserMessageId.nullable().optional() })
  .meta({ id: "TurnSteerParams" });
export const TurnSteerResponse = z.object({ turnId: z.string() }).meta({ id: "TurnSteerResponse" });
