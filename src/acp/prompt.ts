/**
 * An ACP prompt → Codex turn input, and the slash commands the session offers.
 *
 * Content: text as text; images as data URLs; a linked file (`resource_link` with a file: URI) as
 * a mention of its path; embedded context (`resource`, what an editor attaches for an @-mention,
 * unsaved changes included) as a text block naming its URI. Audio is not offered (the initialize
 * response says so) and is refused.
 */
import { fileURLToPath } from "node:url";
import type { AvailableCommand, ContentBlock } from "@agentclientprotocol/sdk/unstable";
import type { UserInput } from "../protocol/common.js";
import type { ReviewTarget } from "../protocol/review.js";

export class PromptError extends Error {}

const textInput = (text: string): UserInput => ({ type: "text", text, text_elements: [] });

export function toCodexInput(prompt: ContentBlock[]): UserInput[] {
  const input: UserInput[] = [];
  for (const block of prompt) {
    switch (block.type) {
      case "text":
        input.push(textInput(block.text));
        break;
      case "image":
        input.push({ type: "image", url: block.uri && !block.data ? block.uri : `data:${block.mimeType};base64,${block.data}` });
        break;
      case "resource_link":
        if (block.uri.startsWith("file://")) input.push({ type: "mention", name: block.name, path: fileURLToPath(block.uri) });
        else input.push(textInput(`[${block.name}](${block.uri})`));
        break;
      case "resource": {
        const r = block.resource;
        if ("text" in r) input.push(textInput(`<context ref="${r.uri}">\n${r.text}\n</context>`));
        else input.push(textInput(`[binary resource ${r.uri}${r.mimeType ? ` (${r.mimeType})` : ""} attached; its content is not shown to the model]`));
        break;
      }
      case "audio":
        throw new PromptError("audio prompts are not supported by this agent");
    }
  }
  if (input.length === 0) throw new PromptError("the prompt is empty");
  return input;
}

/** What a slash command at the start of a prompt asks for. */
export type SlashCommand = { kind: "compact" } | { kind: "review"; target: ReviewTarget };

export const AVAILABLE_COMMANDS: AvailableCommand[] = [
  { name: "compact", description: "Summarize the conversation so far to free context" },
  { name: "review", description: "Review the uncommitted changes (or follow the instructions given)", input: { hint: "optional instructions" } },
  { name: "review-branch", description: "Review this branch's changes against a base branch", input: { hint: "base branch" } },
  { name: "review-commit", description: "Review one commit", input: { hint: "commit sha" } },
];

/** The slash command a prompt is (its only text starts with /name), or null for a normal prompt. */
export function slashCommandOf(prompt: ContentBlock[]): SlashCommand | null {
  if (prompt.length !== 1 || prompt[0]!.type !== "text") return null;
  const m = /^\/([a-z-]+)(?:\s+([\s\S]*))?$/.exec(prompt[0]!.text.trim());
  if (!m) return null;
  const arg = (m[2] ?? "").trim();
  switch (m[1]) {
    case "compact":
      return { kind: "compact" };
    case "review":
      return { kind: "review", target: arg ? { type: "custom", instructions: arg } : { type: "uncommittedChanges" } };
    case "review-branch":
      if (!arg) throw new PromptError("/review-branch needs the base branch: /review-branch main");
      return { kind: "review", target: { type: "baseBranch", branch: arg } };
    case "review-commit":
      if (!arg) throw new PromptError("/review-commit needs a commit: /review-commit <sha>");
      return { kind: "review", target: { type: "commit", sha: arg } };
    default:
      return null;
  }
}
