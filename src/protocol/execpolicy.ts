/**
 * Our extension (Codex has no protocol method for its rules, which it keeps in
 * <CODEX_HOME>/rules/*.rules files): listing and removing the saved approval rules, the prefixes
 * users approved with `acceptWithExecpolicyAmendment`. Named after Codex's decision and
 * amendment, in our own `execpolicy/` namespace.
 */
import { z } from "zod";
import { ExecPolicyAmendment } from "./tools.js";

export const ExecPolicyRule = z
  .object({
    id: z.string(),
    /** The command prefix (words) the rule approves. */
    pattern: ExecPolicyAmendment,
    decision: z.literal("allow"),
    /** The thread where it was accepted (null when not known); the rule applies in every thread. */
    threadId: z.string().nullable(),
    createdAtMs: z.number().int(),
  })
  .meta({ id: "ExecPolicyRule" });

export const ExecPolicyRuleListParams = z.object({}).optional().meta({ id: "ExecPolicyRuleListParams" });
export const ExecPolicyRuleListResponse = z.object({ data: z.array(ExecPolicyRule) }).meta({ id: "ExecPolicyRuleListResponse" });

export const ExecPolicyRuleRemoveParams = z.object({ id: z.string().min(1).max(256) }).meta({ id: "ExecPolicyRuleRemoveParams" });
export const ExecPolicyRuleRemoveResponse = z.object({}).meta({ id: "ExecPolicyRuleRemoveResponse" });
