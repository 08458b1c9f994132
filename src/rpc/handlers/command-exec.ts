/**
 * command/exec: run an argv (no shell) outside any thread, buffered, in its own process group,
 * with the server's default sandbox deciding where it may run:
 *   read-only          cwd inside the server cwd, and only commands on the read-only allow list
 *   workspace-write    cwd inside the server cwd or the temp dir (no OS sandbox: see tools/approval.ts)
 *   danger-full-access anything
 * Processes still running when the connection closes are killed.
 */
import { promises as fs } from "node:fs";
import type { AppContext } from "../../app-context.js";
import type { SandboxMode } from "../../protocol/common.js";
import { isReadOnlyCommand } from "../../tools/command-parse.js";
import { runProcess, toolEnvironment } from "../../tools/process.js";
import { checkPath } from "../../tools/workspace.js";
import type { Connection } from "../connection.js";
import { invalidParams, invalidRequest } from "../errors.js";

export const COMMAND_EXEC_DEFAULT_TIMEOUT_MS = 10_000;
export const COMMAND_EXEC_DEFAULT_OUTPUT_CAP = 1024 * 1024;

/** argv as one shell-quoted line (for the read-only check and logs). */
function shellQuote(argv: readonly string[]): string {
  return argv.map((a) => (/^[A-Za-z0-9_@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`)).join(" ");
}

export function registerCommandExecHandler(conn: Connection, app: AppContext, defaults: { cwd: string; sandbox: SandboxMode }): void {
  const running = new Set<AbortController>();
  conn.onClose(() => {
    for (const c of running) c.abort();
  });

  conn.handle("command/exec", async (p) => {
    const scope = { cwd: defaults.cwd, sandbox: defaults.sandbox };
    const check = await checkPath(scope, p.cwd ?? defaults.cwd, defaults.sandbox === "read-only" ? "read" : "write");
    if (!check.ok) {
      if (check.outside) throw invalidRequest(`command/exec refused by the ${defaults.sandbox} sandbox: ${check.reason}`);
      throw invalidParams(`Invalid cwd: ${check.reason}`);
    }
    const st = await fs.stat(check.real).catch(() => null);
    if (st === null || !st.isDirectory()) throw invalidParams(`Invalid cwd: ${check.path} is not an existing directory`);
    if (defaults.sandbox === "read-only" && !isReadOnlyCommand(shellQuote(p.command))) {
      throw invalidRequest("command/exec refused by the read-only sandbox: the command is not on the read-only allow list");
    }

    const env: NodeJS.ProcessEnv = toolEnvironment();
    for (const [k, v] of Object.entries(p.env ?? {})) {
      if (v === null || v === undefined) delete env[k];
      else env[k] = v;
    }
    const timeoutMs = p.timeoutMs ?? COMMAND_EXEC_DEFAULT_TIMEOUT_MS;
    const controller = new AbortController();
    running.add(controller);
    try {
      const [file, ...args] = p.command;
      const run = await runProcess({
        file,
        args,
        cwd: check.real,
        env,
        timeoutMs,
        outputCapBytes: p.outputBytesCap ?? COMMAND_EXEC_DEFAULT_OUTPUT_CAP,
        signal: controller.signal,
      });
      if (run.spawnError) {
        // As a shell would report it: 127 not found, 126 not executable.
        const code = run.spawnError.code === "ENOENT" ? 127 : 126;
        return { exitCode: code, stdout: "", stderr: `${file}: ${run.spawnError.code === "ENOENT" ? "command not found" : run.spawnError.message}\n` };
      }
      let stderr = run.stderr.text;
      if (run.timedOut) stderr += `${stderr && !stderr.endsWith("\n") ? "\n" : ""}command timed out after ${timeoutMs} ms; its process group was killed\n`;
      app.log.debug({ connectionId: conn.id, command: shellQuote(p.command), exitCode: run.exitCode, timedOut: run.timedOut }, "command/exec finished");
      return {
        exitCode: run.timedOut ? 124 : (run.exitCode ?? 1),
        stdout: run.stdout.text,
        stderr,
      };
    } finally {
      running.delete(controller);
    }
  });
}
