/**
 * thread/shellCommand: the user's own command (`!ls` in the TUI) as a turn of its own whose only
 * item is a `commandExecution` with `source: "userShell"`, run like the `shell` tool — in the
 * thread's cwd and OS sandbox, never asking — and then handed to the model's history as a user
 * message with the command and its result, so the next turn knows what the user saw. While
 * a turn runs, the command runs inside that turn instead (its item appears there, and the turn
 * ends only once the command has).
 */
import type { LoopResult } from "../agent/loop.js";
import { emptyUsage, type ToolCallBlock, type UserMessage } from "../agent/messages.js";
import { uuidv7 } from "../ids.js";
import { ActiveTurn } from "./active-turn.js";
import type { LoadedThread } from "./loaded-thread.js";
import type { Subscriber } from "./thread-types.js";
import { userShellTool } from "./tool-host.js";
import { TurnRequestError } from "./turn-errors.js";
import { assertCwdExists, openingEntries, type TurnParts } from "./turn-lifecycle.js";

/** A user shell command run as a turn of its own (thread/shellCommand). */
interface UserShellRun {
  command: string;
  timeoutMs: number;
}

export class UserShellTurns {
  constructor(private readonly parts: TurnParts) {}

  /** thread/shellCommand on the process that runs (or will run) the thread's turns. */
  async shellCommandLocal(threadId: string, command: string, timeoutMs: number, requester: Subscriber): Promise<void> {
    const { deps, lifecycle } = this.parts;
    const { runtime } = deps;
    const thread = await runtime.load(threadId);
    runtime.unrecorded?.assertRecorded(thread.id);
    const running = thread.activeTurn;
    if (!running) {
      await lifecycle.begin(thread, requester, (t, a) => this.run(t, a, { command, timeoutMs }), { check: () => assertCwdExists(thread.record.cwd) });
      return;
    }
    // As Codex does: a command typed while a turn runs becomes an item of that turn.
    if (!(running instanceof ActiveTurn) || !running.steerable) throw new TurnRequestError(`a turn is ending on thread ${thread.id} (turn ${running.id}); retry when it has`);
    await assertCwdExists(thread.record.cwd);
    runtime.subscribe(thread, requester);
    running.userShell.push(
      this.exec(thread, running, { command, timeoutMs }).catch((err: unknown) => {
        deps.log.error({ err, threadId: thread.id, turnId: running.id }, "user shell command in a running turn failed");
        return null;
      }),
    );
  }

  /** The body of a user shell turn: the command's item, then its message in the model's history. */
  private async run(thread: LoadedThread, turn: ActiveTurn, shell: UserShellRun): Promise<LoopResult> {
    const { deps } = this.parts;
    const message = await this.exec(thread, turn, shell);
    await deps.runtime.commit(thread, [], deps.historyLog.stage(thread, turn.id, openingEntries(deps, thread, turn.ordinal, message)));
    return { stopReason: turn.abort.signal.aborted ? "interrupted" : "finalAnswer", error: null, note: null, modelCalls: 0, usage: emptyUsage() };
  }

  /** Runs a user shell command as an item of `turn`; resolves with what the model is told of it. */
  private async exec(thread: LoadedThread, turn: ActiveTurn, shell: UserShellRun): Promise<UserMessage> {
    const tool = userShellTool(this.parts.deps, this.parts.recorder, thread, turn, shell.timeoutMs);
    const call: ToolCallBlock = { type: "toolCall", id: `user_shell_${uuidv7()}`, name: "shell", arguments: JSON.stringify({ command: shell.command }) };
    const outcome = await tool.execute(call, turn.abort.signal);
    const result = outcome.content.map((b) => (b.type === "text" ? b.text : "")).join("\n");
    const text = `<user_shell_command>\n<command>\n${shell.command}\n</command>\n<result>\n${result}\n</result>\n</user_shell_command>`;
    return { role: "user", content: [{ type: "text", text }] };
  }
}
