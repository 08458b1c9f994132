/** Helpers for the MCP tests: find a server's own process under what was spawned, poll with a reason. */
import { readFileSync } from "node:fs";

/** The children of `pid` (empty when it has none or is gone). */
function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/**
 * The MCP server's own process under `spawned` (bwrap's pid for a sandboxed server: bwrap, its
 * init, then the server): the deepest first descendant; `spawned` itself when it has no children;
 * null when it is gone.
 */
export function serverProcess(spawned: number): number | null {
  try {
    readFileSync(`/proc/${spawned}/stat`);
  } catch {
    return null;
  }
  let pid = spawned;
  for (let depth = 0; depth < 8; depth++) {
    const [first] = childrenOf(pid);
    if (first === undefined) break;
    pid = first;
  }
  return pid;
}

/** Polls `cond` every 50 ms, at most `tries` times (bounded by count, not a time budget); says what it waited for. */
export async function waitFor(cond: () => boolean | Promise<boolean>, what: string, tries = 600): Promise<void> {
  for (let i = 0; i < tries; i++) {
    if (await cond()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`condition not reached: ${what}`);
}
