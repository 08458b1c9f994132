/**
 * command/exec: run an argv (no shell) outside any thread, buffered, through the command runner:
 * inside the OS sandbox of the request's `sandboxPolicy`, or the server's default policy
 * (workspace-write on the server cwd). The cwd must lie inside the policy's roots:
 *   read-only          the server cwd
 *   workspace-write    the writable roots (server cwd, writableRoots, /tmp, $TMPDIR)
 *   danger-full-access anywhere (unconfined, as the server's user)
 * When the sandbox cannot be set up, a confined command is refused (never run unconfined).
 * Processes still running when the connection closes, or whose request the client cancels
 * (`$/cancelRequest`), are killed.
 */
import { promises as fs } from "node:fs";
import type { AppContext } from "../../app-context.js";
import type { SandboxPolicy } from "../../protocol/common.js";
import { modeOfPolicy, resolveSandbox } from "../../sandbox/policy.js";
import type { CommandRunner } from "../../sandbox/runner.js";
import { checkPath } from "../../tools/workspace.js";
import { commandExecScope, workspaceBase } from "../../identity/workspace.js";
import type { Connection } from "../connection.js";
import { invalidParams, invalidRequest } from "../errors.js";

export const COMMAND_EXEC_DEFAULT_TIMEOUT_MS = 10_000;
export const COMMAND_EXEC_DEFAULT_OUTPUT_CAP = 1024 * 1024;

/** argv as one shell-quoted line (for logs). */
function shellQuote(argv: readonly string[]): string {
  return argv.map((a) => (/^[A-Za-z0-9_@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`)).join(" ");
}

export interface CommandExecDefaults {
  cwd: string;
  policy: SandboxPolicy;
  commands: CommandRunner;
}

export function registerCommandExecHandler(conn: Connection, app: AppContext, defaults: CommandExecDefaults): void {
  const running = new Set<AbortController>();
  conn.onClose(() => {
    for (const c of running) c.abort();
  });

  conn.handle("command/exec", async (p, { signal, connection }) => {
    const policy = p.sandboxPolicy ?? defaults.policy;
    const sandbox = modeOfPolicy(policy);
    // The caller's workspace (its first root) unless it names a cwd; the guard keeps it inside its roots.
    const base = workspaceBase(connection.principal, defaults.cwd);
    // Its own private /tmp (shared by the user's command/exec calls), like a thread's.
    const tmpScope = commandExecScope(connection.principal.id);
    const scope = { cwd: base, sandbox, sandboxPolicy: policy, commands: defaults.commands, threadId: tmpScope };
    const check = await checkPath(scope, p.cwd ?? base, sandbox === "workspace-write" ? "write" : "workdir");
    if (!check.ok) {
      if (check.outside) throw invalidRequest(`command/exec refused by the ${sandbox} sandbox: ${check.reason}`);
      throw invalidParams(`Invalid cwd: ${check.reason}`);
    }
    const st = await fs.stat(check.host).catch(() => null);
    if (st === null || !st.isDirectory()) throw invalidParams(`Invalid cwd: ${check.path} is not an existing directory`);

    const timeoutMs = p.timeoutMs ?? COMMAND_EXEC_DEFAULT_TIMEOUT_MS;
    const controller = new AbortController();
    // A cancelled request kills its process (the client already got -32800).
    const abort = () => controller.abort();
    if (signal.aborted) abort();
    else signal.addEventListener("abort", abort, { once: true });
    running.add(controller);
    try {
      const [file] = p.command;
      const result = await defaults.commands.run({
        argv: p.command,
        sandbox: await resolveSandbox(policy, base, { tmpScope }),
        cwd: check.real,
        env: p.env ?? {},
        timeoutMs,
        outputCapBytes: p.outputBytesCap ?? COMMAND_EXEC_DEFAULT_OUTPUT_CAP,
        signal: controller.signal,
      });
      if (!result.ran) throw invalidRequest(`command/exec refused: ${result.reason}`);
      const run = result.run;
      if (run.spawnError) {
        // As a shell would report it: 127 not found, 126 not executable.
        const code = run.spawnError.code === "ENOENT" ? 127 : 126;
        return { exitCode: code, stdout: "", stderr: `${file}: ${run.spawnError.code === "ENOENT" ? "command not found" : run.spawnError.message}\n` };
      }
      let stderr = run.stderr.text;
      if (run.timedOut) stderr += `${stderr && !stderr.endsWith("\n") ? "\n" : ""}command timed out after ${timeoutMs} ms; its process group was killed\n`;
      app.log.debug({ connectionId: conn.id, command: shellQuote(p.command), exitCode: run.exitCode, timedOut: run.timedOut, sandbox }, "command/exec finished");
      return {
        exitCode: run.timedOut ? 124 : (run.exitCode ?? 1),
        stdout: run.stdout.text,
        stderr,
      };
    } finally {
      signal.removeEventListener("abort", abort);
      running.delete(controller);
    }
  });
}
