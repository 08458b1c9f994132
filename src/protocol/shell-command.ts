/** thread/shellCommand: the user's own shell command (the TUI's `!ls`), run in the thread. */
import { z } from "zod";
import { ThreadId } from "./thread.js";

/** Codex's default when timeoutMs is omitted or null: one hour. */
export const SHELL_COMMAND_DEFAULT_TIMEOUT_MS = 60 * 60 * 1000;
/** A command line longer than this is refused (-32602); the shell tool's own input is far smaller. */
export const SHELL_COMMAND_MAX_CHARS = 64 * 1024;

export const ThreadShellCommandParams = z
  .object({
    threadId: ThreadId,
    /** Evaluated by `bash -lc`, so pipes, redirects and quoting work. */
    command: z.string().max(SHELL_COMMAND_MAX_CHARS, `a shell command is at most ${SHELL_COMMAND_MAX_CHARS} characters`),
    /** Default one hour; 0 is an immediate timeout, not "none". */
    timeoutMs: z.number().int().nonnegative("timeoutMs must not be negative").max(SHELL_COMMAND_DEFAULT_TIMEOUT_MS * 24).nullable().optional(),
  })
  .meta({ id: "ThreadShellCommandParams" });
export const ThreadShellCommandResponse = z.object({}).meta({ id: "ThreadShellCommandResponse" });
