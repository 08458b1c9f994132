/**
 * The `read_file` tool: numbered lines of a text file, a window at a time. The file is opened
 * without following a symbolic link anywhere on its checked path (pinned-dir.ts), so a directory
 * swapped for a link between the check and the read cannot make it read outside the roots.
 */
import type { FileHandle } from "node:fs/promises";
import { createInterface } from "node:readline";
import { z } from "zod";
import { textOutcome, type LoopTool } from "../agent/tools.js";
import type { ToolContext } from "./context.js";
import { defineTool } from "./define.js";
import { openReadNoFollow, SymlinkInPathError } from "./pinned-dir.js";
import { checkPath } from "./workspace.js";

export interface ReadFileOptions {
  defaultLimit: number;
  maxLineChars: number;
  /** Characters of file text returned per call, whatever the limit. */
  maxOutputChars: number;
}

export const DEFAULT_READ_FILE_OPTIONS: ReadFileOptions = { defaultLimit: 2000, maxLineChars: 2000, maxOutputChars: 256 * 1024 };

export const ReadFileArgs = z.object({
  path: z.string().describe("The file to read, relative to the workspace root."),
  offset: z.number().int().min(1).optional().describe("The 1-based line to start at (default 1)."),
  limit: z.number().int().min(1).optional().describe("How many lines to return (default 2000)."),
});

const SNIFF_BYTES = 8192;

/** A file is treated as binary when its start has a NUL byte or is not UTF-8. */
export async function looksBinary(fh: FileHandle): Promise<boolean> {
  const buf = Buffer.alloc(SNIFF_BYTES);
  const { bytesRead } = await fh.read(buf, 0, SNIFF_BYTES, 0);
  const head = buf.subarray(0, bytesRead);
  if (head.includes(0)) return true;
  // Allow a multi-byte character cut at the end of the sample.
  const sample = bytesRead === SNIFF_BYTES ? head.subarray(0, Math.max(0, bytesRead - 4)) : head;
  try {
    new TextDecoder("utf-8", { fatal: true }).decode(sample);
    return false;
  } catch {
    return true; // not UTF-8: the answer, not a failure
  }
}

/** Opens a checked path for reading; a string says why it cannot be read. */
export async function openChecked(host: string, shown: string): Promise<FileHandle | string> {
  if (host === "/") return `Cannot read ${shown}: it is a directory; use list_dir.`;
  try {
    return await openReadNoFollow(host);
  } catch (err) {
    if (err instanceof SymlinkInPathError) return `Cannot read ${shown}: ${err.path} became a symbolic link after the path was checked; nothing was read.`;
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") return `Cannot read ${shown}: the file does not exist.`;
    if (code === "EACCES") return `Cannot read ${shown}: permission denied.`;
    return `Cannot read ${shown}: ${(err as Error).message}`;
  }
}

export function readFileTool(ctx: ToolContext, options: Partial<ReadFileOptions> = {}): LoopTool {
  const opts = { ...DEFAULT_READ_FILE_OPTIONS, ...options };
  return defineTool({
    name: "read_file",
    description: `Reads a text file and returns its lines numbered from 1 ("<number>\\t<text>"). Use offset and limit to page through long files (default: ${opts.defaultLimit} lines from line 1). Very long lines are cut.`,
    schema: ReadFileArgs,
    readOnly: true,
    async run(args, _call, signal) {
      const check = await checkPath(ctx, args.path, "read");
      if (!check.ok) return textOutcome(`Cannot read ${args.path}: ${check.reason}.`, true);
      const fh = await openChecked(check.host, args.path);
      if (typeof fh === "string") return textOutcome(fh, true);
      const offset = args.offset ?? 1;
      const limit = args.limit ?? opts.defaultLimit;
      const out: string[] = [];
      let chars = 0;
      let lineNo = 0;
      let cutLines = 0;
      let stoppedForSize = false;
      let more = false;
      try {
        const st = await fh.stat();
        if (st.isDirectory()) return textOutcome(`Cannot read ${args.path}: it is a directory; use list_dir.`, true);
        if (!st.isFile()) return textOutcome(`Cannot read ${args.path}: it is not a regular file.`, true);
        if (st.size === 0) return textOutcome(`(${args.path} is empty)`);
        if (await looksBinary(fh)) {
          return textOutcome(`Cannot read ${args.path}: it looks like a binary file (${st.size} bytes); read_file only shows text.`, true);
        }
        const stream = fh.createReadStream({ encoding: "utf8", start: 0, autoClose: false });
        const rl = createInterface({ input: stream, crlfDelay: Infinity });
        try {
          for await (const raw of rl) {
            lineNo++;
            if (lineNo < offset) continue;
            if (out.length >= limit || stoppedForSize || signal.aborted) {
              more = true;
              break;
            }
            let line = raw.replace(/\0/g, "");
            if (line.length > opts.maxLineChars) {
              line = `${line.slice(0, opts.maxLineChars)}… [line cut: ${line.length} characters]`;
              cutLines++;
            }
            const entry = `${String(lineNo).padStart(6)}\t${line}`;
            if (chars + entry.length > opts.maxOutputChars && out.length > 0) {
              stoppedForSize = true;
              more = true;
              break;
            }
            out.push(entry);
            chars += entry.length + 1;
          }
        } finally {
          rl.close();
          stream.destroy();
        }
      } finally {
        await fh.close().catch(() => undefined); // a read-only handle: nothing to lose on close
      }
      if (out.length === 0) return textOutcome(`offset ${offset} is past the end of ${args.path} (${lineNo} lines).`, true);

      const first = offset;
      const last = offset + out.length - 1;
      const notes: string[] = [];
      if (more) {
        notes.push(
          `[Showing lines ${first}-${last}${stoppedForSize ? " (output size limit reached)" : ""}; the file has more lines. Call read_file with offset=${last + 1} to continue.]`,
        );
      }
      if (cutLines > 0) notes.push(`[${cutLines} line${cutLines === 1 ? " was" : "s were"} longer than ${opts.maxLineChars} characters and cut.]`);
      return textOutcome(out.join("\n") + (notes.length ? `\n${notes.join("\n")}` : ""));
    },
  });
}
