/** Requests that take every branch of the three request-body builders (see request-bytes.test.ts). */
import type { Message } from "../../src/agent/messages.js";
import { buildAnthropicRequest, type AnthropicProviderOptions } from "../../src/providers/anthropic.js";
import { buildChatRequest, type OpenAIChatProviderOptions } from "../../src/providers/openai-chat.js";
import { buildResponsesRequest, type OpenAIResponsesProviderOptions } from "../../src/providers/openai-responses.js";
import type { ModelRequest, ToolSpec } from "../../src/providers/types.js";

const PNG = "data:image/png;base64,iVBORw0KGgo=";
const TOOLS: ToolSpec[] = [
  { name: "read_file", description: "Read a file.", inputSchema: { type: "object", properties: { path: { type: "string" } }, required: ["path"] } },
  { name: "shell", description: "Run a command.", inputSchema: { type: "object", properties: { cmd: { type: "string" } }, additionalProperties: false } },
];

/** Every message and block kind the converters handle, in an order each provider accepts. */
const HISTORY: Message[] = [
  { role: "developer", content: [{ type: "text", text: "<environment>cwd=/repo</environment>" }] },
  { role: "user", content: [{ type: "text", text: "Look at this." }, { type: "image", url: PNG }, { type: "image", url: "https://example.com/a.png" }, { type: "text", text: "" }] },
  {
    role: "assistant",
    content: [
      { type: "reasoning", text: "signed thought", summary: ["sum one", "sum two"], signature: "sig==", providerId: "rs_1", encryptedContent: "enc1", chatField: "reasoning_content" },
      { type: "reasoning", text: "", summary: [], redactedData: "redacted==" },
      { type: "reasoning", text: "unsigned thought", summary: [], chatField: "reasoning" },
      { type: "reasoning", text: "", summary: ["no id"], encryptedContent: "enc2" },
      { type: "text", text: "Commentary first.", phase: "commentary" },
      { type: "text", text: "More commentary.", phase: "commentary" },
      { type: "toolCall", id: "call_1", name: "read_file", arguments: '{"path":"a.ts"}' },
      { type: "toolCall", id: "call_2", name: "shell", arguments: "not json" },
    ],
  },
  { role: "toolResult", toolCallId: "call_1", toolName: "read_file", content: [{ type: "text", text: "file body" }], isError: false },
  { role: "toolResult", toolCallId: "call_2", toolName: "shell", content: [{ type: "text", text: "shot:" }, { type: "image", url: PNG }], isError: true },
  { role: "toolResult", toolCallId: "call_3", toolName: "shell", content: [], isError: false },
  { role: "assistant", content: [{ type: "text", text: "" }, { type: "toolCall", id: "call_4", name: "shell", arguments: "{}" }] },
  { role: "toolResult", toolCallId: "call_4", toolName: "shell", content: [{ type: "text", text: "ok" }], isError: false },
  { role: "assistant", content: [{ type: "text", text: "Done.", phase: "final_answer" }] },
  { role: "user", content: [{ type: "text", text: "Thanks." }] },
];

/** Enough blocks for the Anthropic builder to place several message breakpoints. */
const LONG: Message[] = Array.from({ length: 45 }, (_, i): Message =>
  i % 2 === 0 ? { role: "user", content: [{ type: "text", text: `u${i}` }] } : { role: "assistant", content: [{ type: "text", text: `a${i}` }] },
);

const req = (over: Partial<ModelRequest>): ModelRequest => ({ model: "m", system: "", tools: [], messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }], ...over });

export const ANTHROPIC_CASES: Array<[string, ModelRequest, AnthropicProviderOptions]> = [
  ["bare", req({ model: "claude-sonnet-4-5" }), {}],
  ["tools, no system", req({ model: "claude-sonnet-4-5", tools: TOOLS, reasoningEffort: "none" }), {}],
  ["budget thinking", req({ model: "claude-sonnet-4-5", system: "Be brief.", tools: TOOLS, messages: HISTORY, maxOutputTokens: 1000, reasoningEffort: "high" }), {}],
  ["adaptive thinking", req({ model: "claude-sonnet-5", system: "Be brief.", tools: TOOLS, messages: HISTORY, reasoningEffort: "xhigh" }), { defaultMaxOutputTokens: 4096 }],
  ["many breakpoints", req({ model: "claude-opus-4-1", system: "S", messages: LONG, reasoningEffort: "low" }), {}],
];

export const RESPONSES_CASES: Array<[string, ModelRequest, OpenAIResponsesProviderOptions]> = [
  ["bare", req({}), {}],
  ["everything", req({ model: "gpt-5", system: "Be brief.", tools: TOOLS, messages: HISTORY, cacheKey: "thr_1", maxOutputTokens: 2000, reasoningEffort: "medium" }), {}],
  ["default max, effort none", req({ tools: TOOLS, reasoningEffort: "none" }), { defaultMaxOutputTokens: 512 }],
];

export const CHAT_CASES: Array<[string, ModelRequest, OpenAIChatProviderOptions]> = [
  ["bare", req({}), {}],
  [
    "everything",
    req({ model: "deepseek-reasoner", system: "Be brief.", tools: TOOLS, messages: HISTORY, cacheKey: "thr_1", maxOutputTokens: 2000, reasoningEffort: "high" }),
    { chatDeveloperRole: "system", sendPromptCacheKeyToChat: true },
  ],
  ["key asked, none given", req({ messages: HISTORY, reasoningEffort: "none" }), { sendPromptCacheKeyToChat: true, defaultMaxOutputTokens: 64 }],
];

export function actualBytes(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, r, o] of ANTHROPIC_CASES) out[`anthropic: ${name}`] = JSON.stringify(buildAnthropicRequest(r, o));
  for (const [name, r, o] of RESPONSES_CASES) out[`responses: ${name}`] = JSON.stringify(buildResponsesRequest(r, o));
  for (const [name, r, o] of CHAT_CASES) out[`chat: ${name}`] = JSON.stringify(buildChatRequest(r, o));
  return out;
}
