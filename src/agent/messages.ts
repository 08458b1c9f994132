/**
 * The one internal message model of the agent loop (DESIGN.md §2, "the LLM boundary translates
 * once each way"). Provider adapters convert these to their wire formats and back; nothing
 * outside src/providers/ knows which provider is in use.
 *
 * Everything here is plain JSON so that the model-level history can be stored as-is and a
 * resumed thread sends the model exactly the bytes it would have sent without a restart.
 */

export interface TextBlock {
  type: "text";
  text: string;
  /** Assistant text only: the provider's label for it (OpenAI Responses `phase`), sent back as it came. */
  phase?: MessagePhase;
}

/** Whether assistant text is commentary on the way or the final answer (OpenAI Responses `phase`). */
export type MessagePhase = "commentary" | "final_answer";

/** An image given to the model: a data: URL (base64) or an http(s) URL. */
export interface ImageBlock {
  type: "image";
  url: string;
}

/**
 * Model reasoning. Providers need their own opaque fields back on the next request
 * (Anthropic: `signature`, or `redactedData` for redacted_thinking; OpenAI Responses: the
 * reasoning item id and `encryptedContent`), so they are kept verbatim.
 */
export interface ReasoningBlock {
  type: "reasoning";
  /** Full reasoning text, when the provider exposes it (Anthropic thinking, OpenAI reasoning_text). */
  text: string;
  /** Reasoning summary parts (OpenAI Responses reasoning summaries). */
  summary: string[];
  /** Anthropic thinking signature. */
  signature?: string;
  /** Anthropic redacted_thinking payload. */
  redactedData?: string;
  /** OpenAI Responses reasoning item id (rs_...). */
  providerId?: string;
  /** OpenAI Responses encrypted reasoning content. */
  encryptedContent?: string;
  /**
   * Chat Completions: the delta field the reasoning came in (`reasoning_content` for DeepSeek and
   * Qwen-style servers, `reasoning` for vLLM/OpenRouter/Ollama), so it can be sent back in that
   * field on a message with tool calls, where such servers' tool calling expects it.
   */
  chatField?: "reasoning_content" | "reasoning";
}

export interface ToolCallBlock {
  type: "toolCall";
  /** The call id that pairs this call with its result (Anthropic tool_use id, OpenAI call_id). */
  id: string;
  name: string;
  /** Arguments exactly as the model produced them (JSON text; may be invalid JSON). */
  arguments: string;
  /** OpenAI Responses function_call item id (fc_...), kept for replay. */
  providerItemId?: string;
}

export interface UserMessage {
  role: "user";
  content: Array<TextBlock | ImageBlock>;
}

/**
 * Harness-authored context (environment, settings changes). OpenAI Responses: `developer` role;
 * Chat Completions: `developer` or `system`; Anthropic: a tagged text block on the user side.
 */
export interface DeveloperMessage {
  role: "developer";
  content: TextBlock[];
}

export interface AssistantMessage {
  role: "assistant";
  content: Array<TextBlock | ReasoningBlock | ToolCallBlock>;
  /** Provider message / response id (msg_..., resp_..., chatcmpl-...), informational. */
  providerMessageId?: string;
  /** OpenAI Responses output message item id, kept for replay. */
  providerItemId?: string;
}

export interface ToolResultMessage {
  role: "toolResult";
  toolCallId: string;
  toolName: string;
  content: Array<TextBlock | ImageBlock>;
  isError: boolean;
}

export type Message = UserMessage | DeveloperMessage | AssistantMessage | ToolResultMessage;

/** Token usage normalised across providers. `inputTokens` INCLUDES cached and cache-write tokens. */
export interface Usage {
  inputTokens: number;
  cachedInputTokens: number;
  cacheWriteInputTokens: number;
  outputTokens: number;
  reasoningOutputTokens: number;
  totalTokens: number;
}

export const emptyUsage = (): Usage => ({
  inputTokens: 0,
  cachedInputTokens: 0,
  cacheWriteInputTokens: 0,
  outputTokens: 0,
  reasoningOutputTokens: 0,
  totalTokens: 0,
});

export function addUsage(a: Usage, b: Usage): Usage {
  return {
    inputTokens: a.inputTokens + b.inputTokens,
    cachedInputTokens: a.cachedInputTokens + b.cachedInputTokens,
    cacheWriteInputTokens: a.cacheWriteInputTokens + b.cacheWriteInputTokens,
    outputTokens: a.outputTokens + b.outputTokens,
    reasoningOutputTokens: a.reasoningOutputTokens + b.reasoningOutputTokens,
    totalTokens: a.totalTokens + b.totalTokens,
  };
}
