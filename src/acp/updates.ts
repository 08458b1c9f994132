/**
 * Codex items and notifications → ACP `session/update`s (the second projection of the same
 * events, DESIGN.md §2): agent text and reasoning as message and thought chunks, every acting item
 * as a `tool_call` whose id is the item's id, then `tool_call_update`s as it streams and ends.
 *
 *   commandExecution  execute (read / search when the command only reads or lists files), with its
 *                     output as a display-only terminal (clients that announce `_meta.terminal_output`,
 *                     as Zed does) or as a text block
 *   fileChange        edit / delete / move, the changes as `diff` content
 *   mcpToolCall, dynamicToolCall   other, with the arguments and the result
 *   contextCompaction, review start/end   think, completed at once
 *
 * One instance per session: it remembers how much of each message was streamed, so an item that
 * completes without (all of) its deltas still reaches the editor whole, and never twice.
 */
import type { ContentBlock, SessionUpdate, ToolCall, ToolCallContent, ToolCallStatus, ToolKind } from "@agentclientprotocol/sdk/unstable";
import type { CommandAction, ThreadItem } from "../protocol/items.js";
import path from "node:path";
import { changeKind, changeLocations, changeTitle, diffContent } from "./diff.js";
import { scriptOf } from "../tools/shell-invocation.js";

/** Command output shown in a text block: its last 32 KiB (the full output is in rawOutput). */
const OUTPUT_TAIL = 32 * 1024;

type Item<T extends ThreadItem["type"]> = Extract<ThreadItem, { type: T }>;
type CommandItem = Item<"commandExecution">;

export interface ProjectorOptions {
  /** The thread's working directory: relative paths in items are resolved against it. */
  cwd: string;
  /** The client shows display-only terminals (`clientCapabilities._meta.terminal_output`). */
  terminalOutput: boolean;
}

const text = (t: string): ContentBlock => ({ type: "text", text: t });

function statusOf(status: string): ToolCallStatus {
  if (status === "inProgress") return "in_progress";
  return status === "completed" ? "completed" : "failed";
}

/** read when the command only reads files, search when it lists or searches, else execute. */
function commandKind(actions: CommandAction[]): ToolKind {
  if (actions.length === 0 || actions.some((a) => a.type === "unknown")) return "execute";
  return actions.every((a) => a.type === "read") ? "read" : "search";
}

function commandTitle(item: CommandItem): string {
  if (item.commandActions.length === 0 || item.commandActions.some((a) => a.type === "unknown")) return scriptOf(item.command);
  return item.commandActions
    .map((a) => {
      if (a.type === "read") return `Read ${a.name}`;
      if (a.type === "listFiles") return `List ${a.path ?? "."}`;
      if (a.type === "search") return a.query ? `Search ${a.query}${a.path ? ` in ${a.path}` : ""}` : a.command;
      return a.command;
    })
    .join(", ");
}

function tail(output: string): string {
  return output.length > OUTPUT_TAIL ? `…${output.slice(-OUTPUT_TAIL)}` : output;
}

const fenced = (output: string) => `\`\`\`sh\n${tail(output).replace(/\n$/, "")}\n\`\`\``;

/** MCP result content as ACP content blocks (ACP's blocks are MCP's; unknown kinds become text). */
function mcpBlocks(result: unknown): ContentBlock[] {
  const content = (result as { content?: unknown } | null)?.content;
  if (!Array.isArray(content)) return result === null || result === undefined ? [] : [text(JSON.stringify(result))];
  return content.map((c: Record<string, any>): ContentBlock => {
    if (c?.type === "text" && typeof c.text === "string") return text(c.text);
    if (c?.type === "image" && typeof c.data === "string" && typeof c.mimeType === "string") return { type: "image", data: c.data, mimeType: c.mimeType };
    if (c?.type === "resource_link" && typeof c.uri === "string") return { type: "resource_link", uri: c.uri, name: typeof c.name === "string" ? c.name : c.uri };
    if (c?.type === "resource" && typeof c.resource?.uri === "string" && typeof c.resource?.text === "string")
      return { type: "resource", resource: { uri: c.resource.uri, text: c.resource.text, mimeType: typeof c.resource.mimeType === "string" ? c.resource.mimeType : null } };
    return text(JSON.stringify(c));
  });
}

const asContent = (blocks: ContentBlock[]): ToolCallContent[] => blocks.map((content) => ({ type: "content", content }));

export class ItemProjector {
  /** Each message's or reasoning's text already sent as chunks. */
  private readonly streamed = new Map<string, string>();
  /** Output of each running command, for the text-block form. */
  private readonly output = new Map<string, string>();

  constructor(private readonly opts: ProjectorOptions) {}

  /** item/started. */
  started(item: ThreadItem): SessionUpdate[] {
    const call = this.toolCall(item, false);
    return call ? [{ sessionUpdate: "tool_call", ...call }] : [];
  }

  /** item/completed: the rest of a message, or the tool call's final state. */
  completed(item: ThreadItem): SessionUpdate[] {
    switch (item.type) {
      case "agentMessage":
        return this.rest(item.id, item.text, "agent_message_chunk");
      case "reasoning":
        return this.rest(item.id, reasoningText(item), "agent_thought_chunk");
      case "plan":
        return this.rest(item.id, item.text, "agent_message_chunk");
      case "userMessage":
        return [];
      default: {
        const call = this.toolCall(item, true);
        this.output.delete(item.id);
        if (!call) return [];
        const { title: _title, ...update } = call;
        return [{ sessionUpdate: "tool_call_update", ...update }];
      }
    }
  }

  /** The item as it ended, for session/load's replay: a finished message or tool call. */
  replay(item: ThreadItem): SessionUpdate[] {
    if (item.type === "userMessage") return userChunks(item);
    if (item.type === "agentMessage" || item.type === "reasoning" || item.type === "plan") return this.completed(item);
    const call = this.toolCall(item, true, true);
    return call ? [{ sessionUpdate: "tool_call", ...call }] : [];
  }

  agentDelta(itemId: string, delta: string): SessionUpdate[] {
    return this.chunk(itemId, delta, "agent_message_chunk");
  }

  thoughtDelta(itemId: string, delta: string): SessionUpdate[] {
    return this.chunk(itemId, delta, "agent_thought_chunk");
  }

  commandOutput(itemId: string, delta: string): SessionUpdate[] {
    if (this.opts.terminalOutput) return [{ sessionUpdate: "tool_call_update", toolCallId: itemId, _meta: { terminal_output: { terminal_id: itemId, data: delta } } }];
    const output = (this.output.get(itemId) ?? "") + delta;
    this.output.set(itemId, output);
    return [{ sessionUpdate: "tool_call_update", toolCallId: itemId, status: "in_progress", content: asContent([text(fenced(output))]) }];
  }

  private chunk(itemId: string, delta: string, kind: "agent_message_chunk" | "agent_thought_chunk"): SessionUpdate[] {
    if (delta === "") return [];
    this.streamed.set(itemId, (this.streamed.get(itemId) ?? "") + delta);
    return [{ sessionUpdate: kind, content: text(delta), messageId: itemId }];
  }

  /**
   * What of `full` was not streamed yet: all of it when nothing was, the rest when the chunks were
   * its beginning, nothing when they were not (a session loaded while the message was streaming
   * saw only its end; sending more would repeat what it has).
   */
  private rest(itemId: string, full: string, kind: "agent_message_chunk" | "agent_thought_chunk"): SessionUpdate[] {
    const sent = this.streamed.get(itemId) ?? "";
    this.streamed.delete(itemId);
    const remaining = full.startsWith(sent) ? full.slice(sent.length) : "";
    return remaining ? [{ sessionUpdate: kind, content: text(remaining), messageId: itemId }] : [];
  }

  /**
   * The ACP tool call an item is, or null for items that are not tool calls. `final`: with its
   * outcome; `replayed`: shown after the fact, so output goes in a text block, never a terminal.
   */
  private toolCall(item: ThreadItem, final: boolean, replayed = false): ToolCall | null {
    const cwd = this.opts.cwd;
    switch (item.type) {
      case "commandExecution": {
        const terminal = this.opts.terminalOutput && !replayed;
        const output = item.aggregatedOutput ?? this.output.get(item.id) ?? "";
        const call: ToolCall = {
          toolCallId: item.id,
          title: commandTitle(item),
          kind: commandKind(item.commandActions),
          status: final ? statusOf(item.status) : "in_progress",
          // The script the model wrote, not the `/bin/bash -lc '…'` invocation Codex's item carries.
          rawInput: { command: scriptOf(item.command), cwd: item.cwd },
          locations: item.commandActions.filter((a) => a.type === "read").map((a) => ({ path: path.resolve(item.cwd, (a as { path: string }).path) })),
        };
        if (terminal) {
          call.content = [{ type: "terminal", terminalId: item.id }];
          call._meta = final ? { terminal_exit: { terminal_id: item.id, exit_code: item.exitCode, signal: null } } : { terminal_info: { terminal_id: item.id, cwd: item.cwd } };
        } else if (final) call.content = output ? asContent([text(fenced(output))]) : [];
        if (final) call.rawOutput = { exitCode: item.exitCode, output, durationMs: item.durationMs, status: item.status };
        return call;
      }
      case "fileChange":
        return {
          toolCallId: item.id,
          title: changeTitle(item.changes, cwd),
          kind: changeKind(item.changes),
          status: final ? statusOf(item.status) : "in_progress",
          rawInput: { changes: item.changes },
          locations: changeLocations(item.changes, cwd),
          content: diffContent(item.changes, cwd),
          ...(final ? { rawOutput: { status: item.status } } : {}),
        };
      case "mcpToolCall":
        return {
          toolCallId: item.id,
          title: `${item.server}: ${item.tool}`,
          kind: "other",
          status: final ? statusOf(item.status) : "in_progress",
          rawInput: item.arguments,
          ...(final
            ? { content: asContent(item.error ? [text(item.error.message)] : mcpBlocks(item.result)), rawOutput: item.error ?? item.result }
            : {}),
        };
      case "dynamicToolCall":
        return {
          toolCallId: item.id,
          title: item.tool,
          kind: "other",
          status: final ? statusOf(item.status) : "in_progress",
          rawInput: item.arguments,
          ...(final
            ? { content: asContent((item.contentItems ?? []).map((c) => (c.type === "inputText" ? text(c.text) : text(`[image ${c.imageUrl.slice(0, 64)}]`)))), rawOutput: { success: item.success } }
            : {}),
        };
      case "contextCompaction":
        return { toolCallId: item.id, title: "Compact the conversation", kind: "think", status: final ? "completed" : "in_progress" };
      case "enteredReviewMode":
        return { toolCallId: item.id, title: `Review: ${item.review}`, kind: "think", status: "completed" };
      case "exitedReviewMode":
        return { toolCallId: item.id, title: "Review finished", kind: "think", status: "completed", ...(final ? { content: asContent([text(item.review)]) } : {}) };
      default:
        return null;
    }
  }
}

function reasoningText(item: Item<"reasoning">): string {
  return item.summary.length > 0 ? item.summary.join("\n\n") : item.content.join("\n");
}

/** A user message as ACP content: text, images (data URLs), and mentioned files as links. */
export function userChunks(item: Item<"userMessage">): SessionUpdate[] {
  const blocks: ContentBlock[] = [];
  for (const part of item.content) {
    if (part.type === "text") blocks.push(text(part.text));
    else if (part.type === "image" && part.url) {
      const m = /^data:([^;,]+);base64,(.*)$/s.exec(part.url);
      blocks.push(m ? { type: "image", mimeType: m[1]!, data: m[2]! } : { type: "resource_link", uri: part.url, name: part.url });
    } else if (part.type === "localImage" || part.type === "mention" || part.type === "skill") {
      const file = part.path;
      blocks.push({ type: "resource_link", uri: `file://${file}`, name: "name" in part ? part.name : path.basename(file) });
    }
  }
  return blocks.map((content) => ({ sessionUpdate: "user_message_chunk", content, messageId: item.id }));
}
