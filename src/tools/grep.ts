/**
 * The `grep` tool: a regular expression over the text files under a path, skipping .git,
 * node_modules, binary files and whatever the thread's view hides; symbolic links are not
 * followed. The search runs in a worker thread with a linear-time engine (grep-worker.ts), a
 * deadline and output caps: grep is read-only and never asked about, so no pattern may stall the
 * server. Patterns are RE2 syntax — JavaScript's minus lookaround and backreferences, which get a
 * clear error.
 */
import { z } from "zod";
import { textOutcome, type LoopTool } from "../agent/tools.js";
import type { ToolContext } from "./context.js";
import { defineTool } from "./define.js";
import { grepPool } from "./grep-pool.js";
import { checkPath, viewOf } from "./workspace.js";

export interface GrepOptions {
  maxMatches: number;
  maxFiles: number;
  maxFileBytes: number;
  maxLineChars: number;
  /** How long one search may run before it stops with what it found. */
  timeoutMs: number;
}

export const DEFAULT_GREP_OPTIONS: GrepOptions = { maxMatches: 500, maxFiles: 20_000, maxFileBytes: 5 * 1024 * 1024, maxLineChars: 300, timeoutMs: 20_000 };

export const GrepArgs = z.object({
  pattern: z.string().min(1, "must not be empty").describe("A regular expression in RE2 syntax (JavaScript's without lookaround or backreferences; a leading (?i) makes it case-insensitive)."),
  path: z.string().optional().describe("File or directory to search, relative to the workspace root (default: the root)."),
  glob: z.string().optional().describe('Only search files whose name matches this glob, e.g. "*.ts"; a glob with "/" is matched against the path below the searched directory (e.g. "src/**/*.ts").'),
});

/** Converts a glob (`*`, `**`, `?`, `[…]`, `{a,b}`) to an anchored regular expression. */
export function globToRegExp(glob: string): RegExp {
  let re = "";
  let inBraces = 0;
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i];
    if (c === "*") {
      if (glob[i + 1] === "*") {
        i++;
        if (glob[i + 1] === "/") {
          i++;
          re += "(?:.*/)?";
        } else re += ".*";
      } else re += "[^/]*";
    } else if (c === "?") re += "[^/]";
    else if (c === "[") {
      const end = glob.indexOf("]", i + 1);
      if (end < 0) re += "\\[";
      else {
        let cls = glob.slice(i + 1, end);
        if (cls.startsWith("!")) cls = `^${cls.slice(1)}`;
        re += `[${cls.replace(/\\/g, "\\\\")}]`;
        i = end;
      }
    } else if (c === "{") {
      inBraces++;
      re += "(?:";
    } else if (c === "}" && inBraces > 0) {
      inBraces--;
      re += ")";
    } else if (c === "," && inBraces > 0) re += "|";
    else re += c.replace(/[.+^$()|\\/{}]/g, "\\$&");
  }
  return new RegExp(`^${re}$`);
}

export function grepTool(ctx: ToolContext, options: Partial<GrepOptions> = {}): LoopTool {
  const opts = { ...DEFAULT_GREP_OPTIONS, ...options };
  return defineTool({
    name: "grep",
    description: `Searches file contents with a regular expression (RE2 syntax: like JavaScript's, without lookaround or backreferences) and returns matching lines as "file:line: text". Searches the workspace root or the given path, skipping .git, node_modules and binary files; at most ${opts.maxMatches} matches are returned.`,
    schema: GrepArgs,
    readOnly: true,
    async run(args, _call, signal) {
      let glob: RegExp | null = null;
      if (args.glob !== undefined) {
        try {
          glob = globToRegExp(args.glob);
        } catch {
          return textOutcome(`Invalid glob: ${args.glob}`, true);
        }
      }
      const target = args.path ?? ".";
      const check = await checkPath(ctx, target, "read");
      if (!check.ok) return textOutcome(`Cannot search ${target}: ${check.reason}.`, true);
      const view = await viewOf(ctx);
      const result = await grepPool.run(
        {
          pattern: args.pattern,
          glob: glob === null ? null : { source: glob.source, onPath: args.glob!.includes("/") },
          target: check.real,
          shownTarget: target,
          cwd: ctx.cwd,
          view: view.toData(),
          maxMatches: opts.maxMatches,
          maxFiles: opts.maxFiles,
          maxFileBytes: opts.maxFileBytes,
          maxLineChars: opts.maxLineChars,
          deadline: Date.now() + opts.timeoutMs,
        },
        signal,
      );
      if (!result.ok) return textOutcome(result.error, true);
      const { lines: results, capped, skippedLarge } = result;
      const notes: string[] = [];
      if (capped === "matches") notes.push(`[Results capped at ${opts.maxMatches} matches; narrow the pattern, path or glob to see the rest.]`);
      if (capped === "files") notes.push(`[Stopped after searching ${opts.maxFiles} files; narrow the path or glob.]`);
      if (skippedLarge > 0) notes.push(`[${skippedLarge} file${skippedLarge === 1 ? "" : "s"} larger than ${opts.maxFileBytes} bytes skipped.]`);
      if (result.unreadable > 0) notes.push(`[${result.unreadable} file${result.unreadable === 1 ? "" : "s"} or director${result.unreadable === 1 ? "y" : "ies"} could not be read and ${result.unreadable === 1 ? "was" : "were"} skipped.]`);
      if (result.timedOut) notes.push(`[Stopped after ${opts.timeoutMs / 1000} s (${result.files} files searched); narrow the path or glob to see the rest.]`);
      if (results.length === 0) return textOutcome(["No matches found.", ...notes].join("\n"));
      return textOutcome([...results, ...notes].join("\n"));
    },
  });
}
