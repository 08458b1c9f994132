/**
 * The `grep` tool: a JavaScript regular expression over the text files under a path, skipping
 * .git, node_modules and binary files; symbolic links are not followed.
 */
import { promises as fs } from "node:fs";
import path from "node:path";
import { z } from "zod";
import { textOutcome, type LoopTool } from "../agent/tools.js";
import type { ToolContext } from "./context.js";
import { defineTool } from "./define.js";
import { checkPath, displayPath } from "./workspace.js";

export interface GrepOptions {
  maxMatches: number;
  maxFiles: number;
  maxFileBytes: number;
  maxLineChars: number;
}

export const DEFAULT_GREP_OPTIONS: GrepOptions = { maxMatches: 500, maxFiles: 20_000, maxFileBytes: 5 * 1024 * 1024, maxLineChars: 300 };

const SKIP_DIRS = new Set([".git", "node_modules"]);

export const GrepArgs = z.object({
  pattern: z.string().min(1, "must not be empty").describe("A JavaScript regular expression (a leading (?i) makes it case-insensitive)."),
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

function compilePattern(pattern: string): RegExp | Error {
  let source = pattern;
  let flags = "";
  if (source.startsWith("(?i)")) {
    source = source.slice(4);
    flags = "i";
  }
  try {
    return new RegExp(source, flags);
  } catch (err) {
    return err as Error;
  }
}

async function isBinary(file: string): Promise<boolean> {
  const fh = await fs.open(file, "r");
  try {
    const buf = Buffer.alloc(8192);
    const { bytesRead } = await fh.read(buf, 0, buf.length, 0);
    return buf.subarray(0, bytesRead).includes(0);
  } finally {
    await fh.close();
  }
}

export function grepTool(ctx: ToolContext, options: Partial<GrepOptions> = {}): LoopTool {
  const opts = { ...DEFAULT_GREP_OPTIONS, ...options };
  return defineTool({
    name: "grep",
    description: `Searches file contents with a JavaScript regular expression and returns matching lines as "file:line: text". Searches the workspace root or the given path, skipping .git, node_modules and binary files; at most ${opts.maxMatches} matches are returned.`,
    schema: GrepArgs,
    readOnly: true,
    async run(args, _call, signal) {
      const regex = compilePattern(args.pattern);
      if (regex instanceof Error) return textOutcome(`Invalid pattern: ${regex.message}`, true);
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
      const rootStat = await fs.stat(check.real).catch(() => null);
      if (rootStat === null) return textOutcome(`Cannot search ${target}: it does not exist.`, true);

      const results: string[] = [];
      let files = 0;
      let skippedLarge = 0;
      let capped = null as "matches" | "files" | null;
      const globMatches = (rel: string) => glob === null || glob.test(args.glob!.includes("/") ? rel : path.basename(rel));

      const searchFile = async (real: string, shownAbs: string) => {
        files++;
        const st = await fs.stat(real).catch(() => null);
        if (st === null || !st.isFile()) return;
        if (st.size > opts.maxFileBytes) {
          skippedLarge++;
          return;
        }
        if (st.size === 0 || (await isBinary(real))) return;
        const text = (await fs.readFile(real)).toString("utf8");
        const lines = text.split("\n");
        const shown = displayPath(shownAbs, ctx.cwd);
        for (let i = 0; i < lines.length; i++) {
          let line = lines[i];
          if (line.endsWith("\r")) line = line.slice(0, -1);
          if (!regex.test(line)) continue;
          if (results.length >= opts.maxMatches) {
            capped = "matches";
            return;
          }
          const cut = line.length > opts.maxLineChars ? `${line.slice(0, opts.maxLineChars)}…` : line;
          results.push(`${shown}:${i + 1}: ${cut}`);
        }
      };

      const walk = async (dirReal: string, dirShown: string, rel: string): Promise<void> => {
        let entries;
        try {
          entries = await fs.readdir(dirReal, { withFileTypes: true });
        } catch {
          return;
        }
        entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
        for (const e of entries) {
          if (capped !== null || signal.aborted) return;
          const childRel = rel ? `${rel}/${e.name}` : e.name;
          if (e.isDirectory()) {
            if (SKIP_DIRS.has(e.name)) continue;
            await walk(path.join(dirReal, e.name), path.join(dirShown, e.name), childRel);
          } else if (e.isFile()) {
            if (!globMatches(childRel)) continue;
            if (files >= opts.maxFiles) {
              capped = "files";
              return;
            }
            await searchFile(path.join(dirReal, e.name), path.join(dirShown, e.name));
          }
          // Symbolic links and special files are skipped: following links could leave the workspace.
        }
      };

      if (rootStat.isDirectory()) await walk(check.real, check.path, "");
      else await searchFile(check.real, check.path);

      const notes: string[] = [];
      if (capped === "matches") notes.push(`[Results capped at ${opts.maxMatches} matches; narrow the pattern, path or glob to see the rest.]`);
      if (capped === "files") notes.push(`[Stopped after searching ${opts.maxFiles} files; narrow the path or glob.]`);
      if (skippedLarge > 0) notes.push(`[${skippedLarge} file${skippedLarge === 1 ? "" : "s"} larger than ${opts.maxFileBytes} bytes skipped.]`);
      if (signal.aborted) notes.push("[Search interrupted.]");
      if (results.length === 0) return textOutcome(["No matches found.", ...notes].join("\n"));
      return textOutcome([...results, ...notes].join("\n"));
    },
  });
}
