/**
 * What a client can learn about the model credentials before the first turn: `account/read`
 * (does the default provider have a key?) and `modelProvider/list` (each provider, its endpoint
 * and where its key comes from). Shapes follow Codex 0.171's v2 schema (GetAccountResponse,
 * ModelProviderListResponse); this server fills in the subset that describes it.
 */
import { z } from "zod";
import { SignedInUser } from "./teams.js";

// ---- account/read ---------------------------------------------------------------------------

export const GetAccountParams = z.object({ refreshToken: z.boolean().optional() }).meta({ id: "GetAccountParams" });

/**
 * Codex's Account union; the only kind this server has is an API key (models use the SDKs' keys,
 * there is no ChatGPT login).
 */
export const Account = z.object({ type: z.literal("apiKey") }).meta({ id: "Account" });

export const GetAccountResponse = z
  .object({
    /** `{type:"apiKey"}` when the default provider has a key; null when it has none (or needs none: a local server). */
    account: Account.nullable(),
    userId: z.string().nullable(),
    /** Always false: no OpenAI login is ever needed here. */
    requiresOpenaiAuth: z.boolean(),
    workspaceRouting: z.null(),
    /** Our extension: who this connection is signed in as (docs/teams.md). */
    user: SignedInUser.optional(),
  })
  .meta({ id: "GetAccountResponse" });

// ---- modelProvider/list -----------------------------------------------------------------------

export const ModelProviderListParams = z.object({}).passthrough().meta({ id: "ModelProviderListParams" });

/** Where a provider's key comes from: an environment variable, or nothing (a keyless local server). */
export const GatewayAuth = z
  .discriminatedUnion("mode", [z.object({ mode: z.literal("none") }), z.object({ mode: z.literal("environmentVariable"), envKey: z.string() })])
  .meta({ id: "GatewayAuth" });

export const ModelProviderSummary = z
  .object({
    id: z.string(),
    name: z.string(),
    /** Providers come from the server's environment: nothing to edit over the protocol. */
    canEdit: z.boolean(),
    /** The endpoint set for it; null for the SDK's default (or one that would show credentials). */
    baseUrl: z.string().nullable(),
    settings: z.object({ type: z.literal("customGateway"), auth: GatewayAuth }),
  })
  .meta({ id: "ModelProviderSummary" });

export const ModelProviderListResponse = z
  .object({ data: z.array(ModelProviderSummary), defaultProviderId: z.string(), canChangeDefault: z.boolean() })
  .meta({ id: "ModelProviderListResponse" });
