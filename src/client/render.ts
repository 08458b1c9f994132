/**
 * Prints a turn's notifications in a readable form for `app-server exec`: the agent's text goes
 * to stdout as it streams (so `exec … > answer.txt` keeps just the answer); reasoning, commands
 * with their output, file changes, the plan, errors and the turn's outcome go to stderr.
 */
import path from "node:path";
import type { ThreadItem } from "../protocol/items.js";
import { scriptOf } from "../tools/shell-invocation.js";

export interface RenderStreams {
  out: NodeJS.WritableStream;
  err: NodeJS.WritableStream;
  /** ANSI colours on stderr. */
  color: boolean;
}

const CODES = { bold: [1, 22], dim: [2, 22], red: [31, 39], green: [32, 39], yellow: [33, 39], cyan: [36, 39] } as const;
type Style = keyof typeof CODES;

function firstLine(text: string, max = 100): string {
  const line = text.trim().split("\n")[0] ?? "";
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

export function describeDuration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return "";
  return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
}

export class TurnRenderer {
  /** Items whose text / output arrived as deltas (not printed again on completion). */
  private readonly streamed = new Set<string>();
  /** The thread's working directory: file paths under it are shown relative to it. */
  cwd: string | null = null;
  private outOpen = false;
  private errOpen = false;
  private agentMessages = 0;
  private totalTokens: number | null = null;
  /** The last retried failure's message, and a final one the turn's end has not said yet. */
  private lastRetried: string | null = null;
  private pendingFailure: string | null = null;

  constructor(private readonly s: RenderStreams) {}

  style(style: Style, text: string): string {
    if (!this.s.color) return text;
    const [on, off] = CODES[style];
    return `\x1b[${on}m${text}\x1b[${off}m`;
  }

  /** Writes whole lines to stderr, starting on a fresh line. */
  info(text: string): void {
    this.breakLines();
    this.s.err.write(text.endsWith("\n") ? text : `${text}\n`);
  }

  /** Ends any partly written line on either stream (before a prompt or a stderr block). */
  breakLines(): void {
    if (this.outOpen) {
      this.s.out.write("\n");
      this.outOpen = false;
    }
    if (this.errOpen) {
      this.s.err.write("\n");
      this.errOpen = false;
    }
  }

  private writeOut(text: string): void {
    if (!text) return;
    this.s.out.write(text);
    this.outOpen = !text.endsWith("\n");
  }

  private writeErr(text: string): void {
    if (!text) return;
    this.s.err.write(text);
    this.errOpen = !text.endsWith("\n");
  }

  notification(method: string, params: any): void {
    switch (method) {
      case "item/started":
        return this.itemStarted(params.item as ThreadItem);
      case "item/completed":
        return this.itemCompleted(params.item as ThreadItem);
      case "item/agentMessage/delta":
        this.streamed.add(params.itemId);
        return this.writeOut(params.delta);
      case "item/commandExecution/outputDelta":
        this.streamed.add(params.itemId);
        return this.writeErr(this.style("dim", params.delta));
      case "turn/plan/updated":
        return this.plan(params.explanation, params.plan);
      case "thread/tokenUsage/updated":
        this.totalTokens = params.tokenUsage?.total?.totalTokens ?? this.totalTokens;
        return;
      case "error":
        return this.error(params.error ?? null, params.willRetry === true);
      case "turn/completed":
        return this.turnCompleted(params.turn);
      default:
        return;
    }
  }

  private itemStarted(item: ThreadItem): void {
    switch (item.type) {
      case "agentMessage":
        // Paragraph break between the agent's messages in one turn.
        if (this.agentMessages > 0) {
          this.breakLines();
          this.s.out.write("\n");
        }
        return;
      case "commandExecution":
        return this.info(`${this.style("cyan", "$")} ${this.style("bold", scriptOf(item.command))}`);
      case "fileChange":
        for (const change of item.changes) {
          const kind = change.kind.type === "update" && change.kind.move_path ? `move → ${this.shortPath(change.kind.move_path)}` : change.kind.type;
          this.info(`${this.style("yellow", "✎")} ${this.style("bold", this.shortPath(change.path))} ${this.style("dim", `(${kind})`)}`);
          // An added or deleted file's `diff` is its content.
          const marker = change.kind.type === "add" ? "+" : change.kind.type === "delete" ? "-" : "";
          this.diff(marker ? change.diff.replace(/\n$/, "").split("\n").map((l) => marker + l).join("\n") : change.diff);
        }
        return;
      case "mcpToolCall":
      case "dynamicToolCall": {
        const name = item.type === "mcpToolCall" ? `${item.server}.${item.tool}` : item.namespace ? `${item.namespace}.${item.tool}` : item.tool;
        return this.info(`${this.style("cyan", "⚙")} ${name} ${this.style("dim", firstLine(JSON.stringify(item.arguments ?? {}), 120))}`);
      }
      default:
        return;
    }
  }

  private itemCompleted(item: ThreadItem): void {
    switch (item.type) {
      case "agentMessage":
        if (!this.streamed.has(item.id)) this.writeOut(item.text);
        if (this.outOpen) this.writeOut("\n");
        this.agentMessages++;
        return;
      case "reasoning": {
        const text = (item.summary.some((s) => s.trim()) ? item.summary : item.content).join("\n").trim();
        if (text) this.info(this.style("dim", `thinking: ${firstLine(text)}`));
        return;
      }
      case "commandExecution": {
        if (!this.streamed.has(item.id) && item.aggregatedOutput) this.writeErr(this.style("dim", item.aggregatedOutput));
        const took = describeDuration(item.durationMs);
        if (item.status === "declined") this.info(this.style("yellow", "  declined"));
        else if (item.status === "completed" && item.exitCode === 0) this.info(this.style("green", `  ✓ exit 0${took ? ` · ${took}` : ""}`));
        else this.info(this.style("red", `  ✗ ${item.exitCode === null ? item.status : `exit ${item.exitCode}`}${took ? ` · ${took}` : ""}`));
        return;
      }
      case "fileChange": {
        const label = { completed: ["green", "  ✓ applied"], failed: ["red", "  ✗ failed"], declined: ["yellow", "  declined"], inProgress: ["dim", "  …"] } as const;
        const [style, text] = label[item.status];
        return this.info(this.style(style, text));
      }
      case "plan":
        return this.info(`${this.style("bold", "Plan:")} ${item.text}`);
      case "mcpToolCall":
      case "dynamicToolCall":
        return this.info(item.status === "completed" ? this.style("green", "  ✓ done") : this.style("red", `  ✗ ${item.status}`));
      case "contextCompaction":
        return this.info(this.style("dim", "· context compacted"));
      default:
        return;
    }
  }

  private shortPath(file: string): string {
    if (!this.cwd) return file;
    const rel = path.relative(this.cwd, file);
    return rel && !rel.startsWith("..") && !path.isAbsolute(rel) ? rel : file;
  }

  private diff(diff: string): void {
    const lines = diff.replace(/\n$/, "").split("\n");
    const shown = lines.slice(0, 60);
    for (const line of shown) {
      const style: Style = line.startsWith("+++") || line.startsWith("---") ? "dim" : line.startsWith("+") ? "green" : line.startsWith("-") ? "red" : line.startsWith("@@") ? "cyan" : "dim";
      this.info(this.style(style, line));
    }
    if (lines.length > shown.length) this.info(this.style("dim", `… ${lines.length - shown.length} more lines`));
  }

  private plan(explanation: string | null, steps: Array<{ step: string; status: string }>): void {
    const marks: Record<string, string> = { completed: "[x]", inProgress: "[~]", pending: "[ ]" };
    this.info(`${this.style("bold", "Plan:")}${explanation ? ` ${explanation}` : ""}`);
    for (const s of steps) this.info(`  ${marks[s.status] ?? "[ ]"} ${s.step}`);
  }

  /**
   * A model call failed. A retry says what failed the first time and only which retry comes after
   * that (the message is the same each time); the final failure is said once, by the turn's end
   * when that repeats it.
   */
  private error(error: { message: string; additionalDetails?: string | null } | null, willRetry: boolean): void {
    const message = error?.message ?? "error";
    if (!willRetry) {
      this.pendingFailure = message;
      return;
    }
    const when = error?.additionalDetails ? ` — ${error.additionalDetails}` : " (retrying)";
    this.info(this.style("red", message === this.lastRetried ? `! again${when}` : `! ${message}${when}`));
    this.lastRetried = message;
  }

  private turnCompleted(turn: { status: string; error: { message: string } | null; durationMs: number | null; stopReason?: string | null }): void {
    const failure = this.pendingFailure;
    this.pendingFailure = null;
    if (failure !== null && !(turn.status === "failed" && turn.error?.message === failure)) this.info(this.style("red", `! ${failure}`));
    const details = [describeDuration(turn.durationMs), this.totalTokens !== null ? `${this.totalTokens} tokens` : ""].filter(Boolean).join(" · ");
    if (turn.status === "completed") {
      if (turn.error) this.info(this.style("yellow", `! ${turn.error.message}`));
      this.info(this.style("dim", `✓ turn completed${details ? ` · ${details}` : ""}`));
    } else if (turn.status === "interrupted") {
      this.info(this.style("yellow", "⊘ turn interrupted"));
    } else {
      this.info(this.style("red", `✗ turn failed${turn.error ? `: ${turn.error.message}` : ""}`));
    }
  }
}
