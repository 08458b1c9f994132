/**
 * The `list_dir` tool: one directory's entries, sorted, directories marked with `/`. The directory
 * is opened component by component without following links (pinned-dir.ts): no race with a swap.
 */
import { z } from "zod";
import { textOutcome, type LoopTool } from "../agent/tools.js";
import type { ToolContext } from "./context.js";
import { defineTool } from "./define.js";
import { PinnedDir, SymlinkInPathError } from "./pinned-dir.js";
import { checkPath, displayPath } from "./workspace.js";

export const DEFAULT_LIST_DIR_MAX_ENTRIES = 500;

export const ListDirArgs = z.object({
  path: z.string().describe('The directory to list, relative to the workspace root ("." for the root).'),
});

export function listDirTool(ctx: ToolContext, maxEntries = DEFAULT_LIST_DIR_MAX_ENTRIES): LoopTool {
  return defineTool({
    name: "list_dir",
    description: `Lists the entries of a directory, sorted by name: directories end with "/", symbolic links with "@". At most ${maxEntries} entries are shown.`,
    schema: ListDirArgs,
    readOnly: true,
    async run(args) {
      const check = await checkPath(ctx, args.path, "read");
      if (!check.ok) return textOutcome(`Cannot list ${args.path}: ${check.reason}.`, true);
      let entries;
      try {
        const dir = await PinnedDir.open(check.host);
        try {
          entries = await dir.list();
        } finally {
          await dir.close();
        }
      } catch (err) {
        if (err instanceof SymlinkInPathError) return textOutcome(`Cannot list ${args.path}: ${err.path} became a symbolic link after the path was checked; nothing was listed.`, true);
        const code = (err as NodeJS.ErrnoException).code;
        if (code === "ENOENT") return textOutcome(`Cannot list ${args.path}: it does not exist.`, true);
        if (code === "ENOTDIR") return textOutcome(`Cannot list ${args.path}: it is a file; use read_file.`, true);
        return textOutcome(`Cannot list ${args.path}: ${(err as Error).message}`, true);
      }
      const names = entries
        .map((e) => (e.isDirectory() ? `${e.name}/` : e.isSymbolicLink() ? `${e.name}@` : e.name))
        .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
      const shown = names.slice(0, maxEntries);
      const where = displayPath(check.path, ctx.cwd);
      const lines = [`${where === "." ? "./" : where.endsWith("/") ? where : `${where}/`} (${names.length} entr${names.length === 1 ? "y" : "ies"})`, ...shown];
      if (names.length === 0) lines.push("(empty directory)");
      if (names.length > shown.length) lines.push(`[… ${names.length - shown.length} more entries not shown]`);
      return textOutcome(lines.join("\n"));
    },
  });
}
