/** initialize and model/list. */
import { z } from "zod";

export const ClientInfo = z.object({ name: z.string(), title: z.string().nullable().optional(), version: z.string() }).meta({ id: "ClientInfo" });

export const InitializeCapabilities = z
  .object({
    experimentalApi: z.boolean().optional(),
    requestAttestation: z.boolean().optional(),
    /** Exact notification method names this connection does not want to receive. */
    optOutNotificationMethods: z.array(z.string()).nullable().optional(),
  })
  .meta({ id: "InitializeCapabilities" });

export const InitializeParams = z
  .object({ clientInfo: ClientInfo, capabilities: InitializeCapabilities.nullable().optional() })
  .meta({ id: "InitializeParams" });
export type InitializeParams = z.infer<typeof InitializeParams>;

export const InitializeResponse = z
  .object({ userAgent: z.string(), codexHome: z.string(), platformFamily: z.string(), platformOs: z.string() })
  .meta({ id: "InitializeResponse" });

export const ModelListParams = z
  .object({
    modelProvider: z.string().nullable().optional(),
    cursor: z.string().nullable().optional(),
    limit: z.number().int().min(1).nullable().optional(),
    includeHidden: z.boolean().nullable().optional(),
  })
  .meta({ id: "ModelListParams" });

export const ReasoningEffortOption = z.object({ reasoningEffort: z.string(), description: z.string() });

export const Model = z
  .object({
    id: z.string(),
    model: z.string(),
    upgrade: z.string().nullable(),
    upgradeInfo: z.null(),
    availabilityNux: z.null(),
    displayName: z.string(),
    description: z.string(),
    modelSpecialty: z.string().nullable(),
    hidden: z.boolean(),
    supportedReasoningEfforts: z.array(ReasoningEffortOption),
    defaultReasoningEffort: z.string(),
    inputModalities: z.array(z.enum(["text", "image"])),
    supportsPersonality: z.boolean(),
    multiAgentVersion: z.null(),
    additionalSpeedTiers: z.array(z.string()),
    serviceTiers: z.array(z.unknown()),
    defaultServiceTier: z.string().nullable(),
    availableAccessPrograms: z.null(),
    isDefault: z.boolean(),
    /** Our extension: which provider serves this model. */
    modelProvider: z.string(),
  })
  .meta({ id: "Model" });
export type Model = z.infer<typeof Model>;
export const ModelListResponse = z.object({ data: z.array(Model), nextCursor: z.string().nullable() }).meta({ id: "ModelListResponse" });
