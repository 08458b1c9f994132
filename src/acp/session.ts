/**
 * One ACP session = one Codex thread (the session id is the thread id). It turns the thread's
 * Codex notifications into `session/update`s, runs a prompt as a turn and answers with the stop
 * reason of how the turn ended, and puts the server's approval requests in front of the user.
 *
 * A turn someone else started on the thread (the playground, the TUI, another editor) streams into
 * the session too, its user message included; the session's own prompts are not echoed back.
 */
import type { AgentContext, ContentBlock, SessionUpdate, StopReason } from "@agentclientprotocol/sdk/unstable";
import { RequestError } from "@agentclientprotocol/sdk/unstable";
import type { RpcClient } from "../client/rpc-client.js";
import type { ThreadItem } from "../protocol/items.js";
import type { FileChangeRequestApprovalParams } from "../protocol/tools.js";
import type { Turn } from "../protocol/thread.js";
import type { Logger } from "../log.js";
import { ItemProjector } from "./updates.js";
import { turnSettingsOf, type ModeId } from "./modes.js";
import { chosenOption, commandQuestion, fileChangeQuestion, isMcpToolApproval, mcpToolQuestion, REJECT_ALWAYS, type McpApprovalForm, type PermissionQuestion } from "./permissions.js";
import { PromptError, slashCommandOf, toCodexInput } from "./prompt.js";
import { asRequestError, stopReasonOf } from "./outcome.js";

export interface SessionContext {
  codex: RpcClient;
  /** The editor side of the ACP connection. */
  editor: AgentContext;
  log: Logger;
  /** The editor shows display-only terminals (Zed's `_meta.terminal_output`). */
  terminalOutput: boolean;
  /** The editor answers form elicitations (`elicitation/create`). */
  elicitation: boolean;
}

export interface SessionSettings {
  cwd: string;
  mode: ModeId;
  model: string;
  modelProvider: string;
  /** Writable roots beyond cwd (the session's additional directories). */
  writableRoots: string[];
}

interface RunningPrompt {
  /** The turn's id once known (a compaction's turn is learnt from its turn/started). */
  turnId: string | null;
  cancelled: boolean;
  done(turn: Turn): void;
  fail(err: Error): void;
}

type Item<T extends ThreadItem["type"]> = Extract<ThreadItem, { type: T }>;

export class AcpSession {
  private readonly projector: ItemProjector;
  private prompt: RunningPrompt | null = null;
  /** The mode or model changed since the last turn: the next turn/start carries the settings. */
  private settingsPending = false;
  /** Approval questions being asked, by the server's request id. */
  private readonly asking = new Map<string | number, AbortController>();
  /** What the user rejected "always" in this session (permissions.ts). */
  private readonly rejected = new Set<string>();
  /** Items started and not completed yet (a file approval names only the item). */
  private readonly open = new Map<string, ThreadItem>();
  private closed = false;

  constructor(
    readonly id: string,
    readonly settings: SessionSettings,
    private readonly ctx: SessionContext,
  ) {
    this.projector = new ItemProjector({ cwd: settings.cwd, terminalOutput: ctx.terminalOutput });
  }

  send(update: SessionUpdate): void {
    if (this.closed) return;
    this.ctx.editor.notify("session/update", { sessionId: this.id, update }).catch((err: unknown) => this.ctx.log.debug({ err }, "could not send a session update"));
  }

  private sendAll(updates: SessionUpdate[]): void {
    for (const u of updates) this.send(u);
  }

  /** session/load: the thread's history as it ended, before the response. */
  replay(turns: Turn[]): void {
    for (const turn of turns) for (const item of turn.items) this.sendAll(this.projector.replay(item));
  }

  setMode(mode: ModeId): void {
    if (mode === this.settings.mode) return;
    this.settings.mode = mode;
    this.settingsPending = true;
  }

  setModel(model: string, modelProvider: string): void {
    if (model === this.settings.model && modelProvider === this.settings.modelProvider) return;
    this.settings.model = model;
    this.settings.modelProvider = modelProvider;
    this.settingsPending = true;
  }

  // ---- a prompt is a turn ------------------------------------------------------------------

  async run(blocks: ContentBlock[], signal: AbortSignal): Promise<StopReason> {
    if (this.prompt) throw RequestError.invalidRequest({ sessionId: this.id }, "a prompt is already running in this session; cancel it or wait for it to end");
    let slash;
    let input;
    try {
      slash = slashCommandOf(blocks);
      input = slash ? null : toCodexInput(blocks);
    } catch (err) {
      if (err instanceof PromptError) throw RequestError.invalidParams({ sessionId: this.id }, err.message);
      throw err;
    }
    let done!: (turn: Turn) => void;
    let fail!: (err: Error) => void;
    const ended = new Promise<Turn>((resolve, reject) => ((done = resolve), (fail = reject)));
    // The connection lost before turn/start answered fails this before anything awaits it; then
    // turn/start's own rejection is what run() throws, and this copy of the error is not needed.
    ended.catch(() => {});
    const prompt: RunningPrompt = { turnId: null, cancelled: false, done, fail };
    this.prompt = prompt;
    const onAbort = () => void this.cancel();
    signal.addEventListener("abort", onAbort, { once: true });
    try {
      const threadId = this.id;
      if (slash?.kind === "compact") await this.ctx.codex.request("thread/compact/start", { threadId });
      else if (slash?.kind === "review") prompt.turnId ??= (await this.ctx.codex.request("review/start", { threadId, target: slash.target })).turn.id;
      else {
        const settings = this.settingsPending ? { ...turnSettingsOf(this.settings.mode, this.settings.writableRoots), model: this.settings.model, modelProvider: this.settings.modelProvider } : {};
        const { turn } = await this.ctx.codex.request("turn/start", { threadId, input, ...settings });
        this.settingsPending = false;
        prompt.turnId ??= turn.id;
      }
      // A cancel that came before the turn's id was known interrupts it now.
      if (prompt.cancelled && prompt.turnId) void this.interrupt(prompt.turnId);
      return stopReasonOf(await ended, prompt.cancelled);
    } catch (err) {
      throw asRequestError(err, this.id);
    } finally {
      signal.removeEventListener("abort", onAbort);
      this.prompt = null;
    }
  }

  /** session/cancel: interrupt the turn, and cancel every question still open. */
  async cancel(): Promise<void> {
    const prompt = this.prompt;
    if (!prompt || prompt.cancelled) return;
    prompt.cancelled = true;
    // The interrupt goes first, so the turn is recorded as interrupted (not ended by a "cancel" answer).
    const interrupted = prompt.turnId ? this.interrupt(prompt.turnId) : Promise.resolve();
    for (const ask of this.asking.values()) ask.abort();
    await interrupted;
  }

  private async interrupt(turnId: string): Promise<void> {
    await this.ctx.codex.request("turn/interrupt", { threadId: this.id, turnId }).catch((err: Error) => this.ctx.log.debug({ err: err.message }, "turn/interrupt failed (the turn may have ended)"));
  }

  /** The connection to the server is gone: a running prompt fails with why. */
  lost(reason: string): void {
    this.prompt?.fail(new Error(`lost the connection to the agent server: ${reason}`));
    for (const ask of this.asking.values()) ask.abort();
  }

  /** session/close: no more updates; a running prompt is cancelled. */
  async close(): Promise<void> {
    await this.cancel();
    this.closed = true;
    for (const ask of this.asking.values()) ask.abort();
  }

  private ours(turnId: string): boolean {
    const p = this.prompt;
    return p !== null && (p.turnId === turnId || p.turnId === null);
  }

  // ---- Codex notifications → updates -------------------------------------------------------

  onNotification(method: string, p: any): void {
    switch (method) {
      case "turn/started":
        if (this.prompt && this.prompt.turnId === null) {
          this.prompt.turnId = p.turn.id;
          if (this.prompt.cancelled) void this.interrupt(p.turn.id);
        }
        return;
      case "turn/completed":
        if (this.prompt && this.prompt.turnId === p.turn.id) this.prompt.done(p.turn);
        return;
      case "item/started":
        return this.itemStarted(p.item, p.turnId);
      case "item/completed":
        this.open.delete(p.item.id);
        return this.sendAll(p.item.type === "userMessage" ? [] : this.projector.completed(p.item));
      case "item/agentMessage/delta":
        return this.sendAll(this.projector.agentDelta(p.itemId, p.delta));
      case "item/reasoning/summaryTextDelta":
      case "item/reasoning/textDelta":
        return this.sendAll(this.projector.thoughtDelta(p.itemId, p.delta));
      case "item/commandExecution/outputDelta":
        return this.sendAll(this.projector.commandOutput(p.itemId, p.delta));
      case "turn/plan/updated":
        return this.send({
          sessionUpdate: "plan",
          entries: (p.plan as Array<{ step: string; status: string }>).map((s) => ({
            content: s.step,
            priority: "medium",
            status: s.status === "inProgress" ? "in_progress" : s.status === "completed" ? "completed" : "pending",
          })),
        });
      case "thread/tokenUsage/updated": {
        const window = p.tokenUsage?.modelContextWindow;
        if (typeof window === "number" && window > 0) this.send({ sessionUpdate: "usage_update", used: p.tokenUsage.last.inputTokens, size: window });
        return;
      }
      case "thread/name/updated":
        return this.send({ sessionUpdate: "session_info_update", title: p.threadName ?? null });
      case "serverRequest/resolved":
        // Answered elsewhere (another client) or moot (the turn ended): stop asking here.
        this.asking.get(p.requestId)?.abort();
        return;
    }
  }

  private itemStarted(item: ThreadItem, turnId: string): void {
    if (item.type === "userMessage") {
      // The editor shows its own prompt; a message typed in another client is news to it.
      if (!this.ours(turnId)) this.sendAll(this.projector.replay(item));
      return;
    }
    this.open.set(item.id, item);
    this.sendAll(this.projector.started(item));
  }

  // ---- approvals ---------------------------------------------------------------------------

  async approveCommand(params: any, requestId: string | number): Promise<unknown> {
    return this.decide(commandQuestion(params), requestId);
  }

  async approveFileChange(params: FileChangeRequestApprovalParams, requestId: string | number): Promise<unknown> {
    const item = this.open.get(params.itemId) as Item<"fileChange"> | undefined;
    return this.decide(fileChangeQuestion(params, item?.changes ?? []), requestId);
  }

  /** mcpServer/elicitation/request: a tool-call approval, or a form the MCP server itself sends. */
  async elicit(params: McpApprovalForm, requestId: string | number): Promise<unknown> {
    if (isMcpToolApproval(params)) {
      const call = [...this.open.values()].reverse().find((i) => i.type === "mcpToolCall" && i.server === params.serverName);
      return this.decide(mcpToolQuestion(params, call?.id ?? `${params.serverName}-approval`), requestId);
    }
    if (!this.ctx.elicitation) return { action: "decline" };
    const ask = new AbortController();
    this.asking.set(requestId, ask);
    try {
      const reply = await this.ctx.editor.request(
        "elicitation/create",
        { sessionId: this.id, mode: "form", message: params.message, requestedSchema: params.requestedSchema as any },
        { cancellationSignal: ask.signal, stopWaitingOnCancel: true },
      );
      return reply.action === "accept" ? { action: "accept", content: (reply as { content?: unknown }).content ?? null } : { action: reply.action === "decline" ? "decline" : "cancel" };
    } catch {
      return { action: "cancel" };
    } finally {
      this.asking.delete(requestId);
    }
  }

  private async decide<R>(q: PermissionQuestion<R>, requestId: string | number): Promise<R> {
    if (q.rememberRejection && this.rejected.has(q.rememberRejection)) return q.answer("reject-once");
    if (this.prompt?.cancelled || this.closed) return q.answer(null);
    const ask = new AbortController();
    this.asking.set(requestId, ask);
    let optionId: string | null;
    try {
      const reply = await this.ctx.editor.request(
        "session/request_permission",
        { sessionId: this.id, toolCall: q.toolCall, options: q.options },
        { cancellationSignal: ask.signal, stopWaitingOnCancel: true },
      );
      optionId = chosenOption(reply.outcome);
    } catch (err) {
      // Cancelled (session/cancel, or answered elsewhere) ends the turn; an editor that cannot
      // answer declines, so the model hears no and goes on.
      optionId = ask.signal.aborted ? null : "reject-once";
      if (!ask.signal.aborted) this.ctx.log.warn({ err: (err as Error).message }, "the editor could not answer a permission request; declined");
    } finally {
      this.asking.delete(requestId);
    }
    if (optionId === REJECT_ALWAYS && q.rememberRejection) this.rejected.add(q.rememberRejection);
    return q.answer(optionId);
  }
}
