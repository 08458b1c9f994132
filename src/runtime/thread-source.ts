/**
 * Thread.source: which kind of client started a thread. Codex's pickers filter on it (the TUI's
 * resume picker lists only the kinds it asks for in `thread/list {sourceKinds}`), so a thread is
 * labelled the way Codex labels the same client: `codex exec` → "exec", the TUI → "cli", and
 * every other client of an app-server → "vscode", which is how Codex labels threads started over
 * its app-server by the IDE extension (and what the TUI's pickers ask for alongside "cli").
 */
const BY_CLIENT: Record<string, string> = {
  codex_exec: "exec",
  "codex-tui": "cli",
  codex_tui: "cli",
  codex_cli_rs: "cli",
};

export function threadSourceFor(clientName: string | null): string {
  return (clientName && BY_CLIENT[clientName]) || "vscode";
}
