/**
 * A file change item's changes as ACP `diff` content: an added file is all new text, a deleted one
 * all old text, and an update is one `diff` per hunk of its unified diff (the item carries hunks,
 * not whole files), with the hunk's context lines on both sides so an editor can place it.
 */
import path from "node:path";
import type { ToolCallContent, ToolCallLocation, ToolKind } from "@agentclientprotocol/sdk/unstable";
import type { FileUpdateChange } from "../protocol/items.js";

const NO_NEWLINE = "\\ No newline at end of file";
const MOVED = /\n*Moved to: .*$/s;

/** The old and new text of each `@@` hunk of a unified diff (file headers, if any, skipped). */
export function hunksOf(unified: string): Array<{ oldText: string; newText: string }> {
  const hunks: Array<{ oldLines: string[]; newLines: string[] }> = [];
  let current: { oldLines: string[]; newLines: string[] } | null = null;
  for (const line of unified.replace(MOVED, "").replace(/\n$/, "").split("\n")) {
    if (line.startsWith("@@")) {
      current = { oldLines: [], newLines: [] };
      hunks.push(current);
    } else if (current === null || line === NO_NEWLINE) {
      continue;
    } else if (line.startsWith("-")) current.oldLines.push(line.slice(1));
    else if (line.startsWith("+")) current.newLines.push(line.slice(1));
    else if (line.startsWith(" ") || line === "") {
      current.oldLines.push(line.slice(1));
      current.newLines.push(line.slice(1));
    }
  }
  return hunks.map((h) => ({ oldText: h.oldLines.join("\n"), newText: h.newLines.join("\n") }));
}

const absolute = (p: string, cwd: string) => path.resolve(cwd, p);

/** Where the change lands: the new path of a move, else the file itself. */
function targetOf(change: FileUpdateChange, cwd: string): string {
  return absolute(change.kind.type === "update" && change.kind.move_path ? change.kind.move_path : change.path, cwd);
}

export function diffContent(changes: FileUpdateChange[], cwd: string): ToolCallContent[] {
  const out: ToolCallContent[] = [];
  for (const change of changes) {
    const file = absolute(change.path, cwd);
    if (change.kind.type === "add") out.push({ type: "diff", path: file, oldText: null, newText: change.diff });
    else if (change.kind.type === "delete") out.push({ type: "diff", path: file, oldText: change.diff, newText: "" });
    else {
      const hunks = hunksOf(change.diff);
      const target = targetOf(change, cwd);
      if (hunks.length === 0) out.push({ type: "content", content: { type: "text", text: change.kind.move_path ? `Moved ${file} to ${target}` : change.diff } });
      for (const h of hunks) out.push({ type: "diff", path: target, oldText: h.oldText, newText: h.newText });
    }
  }
  return out;
}

export function changeLocations(changes: FileUpdateChange[], cwd: string): ToolCallLocation[] {
  return changes.map((c) => ({ path: targetOf(c, cwd) }));
}

/** delete when every change deletes, move when one moves a file, else edit. */
export function changeKind(changes: FileUpdateChange[]): ToolKind {
  if (changes.length > 0 && changes.every((c) => c.kind.type === "delete")) return "delete";
  if (changes.some((c) => c.kind.type === "update" && c.kind.move_path)) return "move";
  return "edit";
}

export function changeTitle(changes: FileUpdateChange[], cwd: string): string {
  if (changes.length === 0) return "Edit";
  const verb = changeKind(changes) === "delete" ? "Delete" : changeKind(changes) === "move" ? "Move" : "Edit";
  const names = changes.map((c) => path.relative(cwd, targetOf(c, cwd)) || path.basename(c.path));
  return `${verb} ${names.join(", ")}`;
}
