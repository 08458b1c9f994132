/**
 * Shared protocol shapes (Codex app-server v2 names and fields). This directory is the single
 * source of the wire format: TypeScript types come from `z.infer`, params are validated with
 * these schemas, and protocol/schema/*.json is generated from them.
 */
import { z } from "zod";

export const MAX_JSON_DEPTH = 64;

/** Nesting depth of a JSON value, without recursion (a hostile value must not blow the stack). */
export function jsonDepth(value: unknown, limit = MAX_JSON_DEPTH): number {
  let max = 0;
  const stack: Array<[unknown, number]> = [[value, 1]];
  while (stack.length) {
    const [v, d] = stack.pop()!;
    if (v === null || typeof v !== "object") continue;
    if (d > max) max = d;
    if (max > limit) return max;
    for (const child of Array.isArray(v) ? v : Object.values(v)) stack.push([child, d + 1]);
  }
  return max;
}

/** JSON value, as carried in `config`, tool arguments and JSON Schemas; nesting is bounded. */
export const JsonValue: z.ZodType<unknown> = z
  .unknown()
  .refine((v) => jsonDepth(v) <= MAX_JSON_DEPTH, { message: `JSON nested deeper than ${MAX_JSON_DEPTH} levels` })
  .meta({ id: "JsonValue" });

export const AskForApproval = z
  .union([
    z.enum(["untrusted", "on-request", "on-failure", "never"]),
    z.object({
      granular: z.object({
        sandbox_approval: z.boolean(),
        rules: z.boolean(),
        skill_approval: z.boolean(),
        request_permissions: z.boolean(),
        mcp_elicitations: z.boolean(),
      }),
    }),
  ])
  .meta({ id: "AskForApproval" });
export type AskForApproval = z.infer<typeof AskForApproval>;

export const SandboxMode = z.enum(["read-only", "workspace-write", "danger-full-access"]).meta({ id: "SandboxMode" });
export type SandboxMode = z.infer<typeof SandboxMode>;

export const SandboxPolicy = z
  .discriminatedUnion("type", [
    z.object({ type: z.literal("dangerFullAccess") }),
    z.object({ type: z.literal("readOnly"), networkAccess: z.boolean().default(false) }),
    z.object({
      type: z.literal("workspaceWrite"),
      writableRoots: z.array(z.string()).default([]),
      networkAccess: z.boolean().default(false),
      excludeTmpdirEnvVar: z.boolean().default(false),
      excludeSlashTmp: z.boolean().default(false),
    }),
  ])
  .meta({ id: "SandboxPolicy" });
export type SandboxPolicy = z.infer<typeof SandboxPolicy>;

export const ApprovalsReviewer = z.enum(["user", "auto_review", "guardian_subagent"]).meta({ id: "ApprovalsReviewer" });

/** Codex types ReasoningEffort as a free string; these are the values we act on. */
export const ReasoningEffort = z.string().meta({ id: "ReasoningEffort" });
export const ReasoningSummary = z.enum(["auto", "concise", "detailed", "none"]).meta({ id: "ReasoningSummary" });

export const ByteRange = z.object({ start: z.number().int().nonnegative(), end: z.number().int().nonnegative() });
export const TextElement = z.object({ byteRange: ByteRange, placeholder: z.string().nullable() }).meta({ id: "TextElement" });
export const ImageDetail = z.enum(["auto", "low", "high", "original"]);

/**
 * User input. Codex's image/audio variants are `{type} & ({url} | {fileId})`; we model them as one
 * object with both optional and a refinement, which keeps the discriminated union simple.
 */
export const UserInput = z
  .discriminatedUnion("type", [
    z.object({ type: z.literal("text"), text: z.string(), text_elements: z.array(TextElement).default([]) }),
    z
      .object({ type: z.literal("image"), detail: ImageDetail.optional(), url: z.string().optional(), fileId: z.string().optional() })
      .refine((v) => v.url !== undefined || v.fileId !== undefined, { message: "image input needs url or fileId" }),
    z.object({ type: z.literal("localImage"), detail: ImageDetail.optional(), path: z.string() }),
    z.object({ type: z.literal("skill"), name: z.string(), path: z.string() }),
    z.object({ type: z.literal("mention"), name: z.string(), path: z.string() }),
  ])
  .meta({ id: "UserInput" });
export type UserInput = z.infer<typeof UserInput>;

export const ThreadActiveFlag = z.enum(["waitingOnApproval", "waitingOnUserInput"]).meta({ id: "ThreadActiveFlag" });
export type ThreadActiveFlag = z.infer<typeof ThreadActiveFlag>;

export const ThreadStatus = z
  .discriminatedUnion("type", [
    z.object({ type: z.literal("notLoaded") }),
    z.object({ type: z.literal("idle") }),
    z.object({ type: z.literal("systemError") }),
    z.object({ type: z.literal("active"), activeFlags: z.array(ThreadActiveFlag) }),
  ])
  .meta({ id: "ThreadStatus" });
export type ThreadStatus = z.infer<typeof ThreadStatus>;

/** Codex's CodexErrorInfo: a camelCase string or a single-key object with details. */
export const CodexErrorInfo = z
  .union([
    z.string(),
    z.record(z.string(), z.object({ httpStatusCode: z.number().int().nullable() }).passthrough()),
  ])
  .meta({ id: "CodexErrorInfo" });
export type CodexErrorInfo = z.infer<typeof CodexErrorInfo>;

export const TurnError = z
  .object({
    message: z.string(),
    codexErrorInfo: CodexErrorInfo.nullable(),
    additionalDetails: z.string().nullable(),
    misalignment: z.null().default(null),
  })
  .meta({ id: "TurnError" });
export type TurnError = z.infer<typeof TurnError>;

export const SessionSource = z
  .union([z.enum(["cli", "vscode", "exec", "appServer", "unknown"]), z.object({ custom: z.string() })])
  .meta({ id: "SessionSource" });
