/**
 * Requests between server processes over Postgres NOTIFY (no other broker; store/notify-channel.ts):
 * a client on one process interrupts, steers, runs a user shell command in or answers an approval
 * of a turn that runs on another. Each process listens on its own channel; a request carries the
 * sender's id and a number, the reply comes back on the sender's channel. A request the owner does
 * not answer in time fails (the owner may have died; its turns are then the sweeper's).
 */
import type { Listening, NotifyChannel } from "../store/notify-channel.js";
import type { RuntimeLogger } from "./thread-types.js";

export type RemoteCommand =
  | { kind: "interrupt"; threadId: string; turnId: string }
  | { kind: "steer"; threadId: string; turnId: string; input: unknown[]; clientId: string | null }
  | { kind: "shellCommand"; threadId: string; command: string; timeoutMs: number }
  | { kind: "approval"; threadId: string; itemId: string; reply: { result?: unknown; error?: unknown } }
  | { kind: "metadata"; threadId: string; patch: { archived?: boolean; name?: string | null }; event: { method: string; params: Record<string, unknown> } }
  /** The sender wants a thread whose lease the receiver keeps between turns (thread-leases.ts). */
  | { kind: "release"; threadId: string };

interface Envelope {
  from: string;
  id: number;
  command?: RemoteCommand;
  ok?: boolean;
  result?: unknown;
  error?: string;
}

const channelOf = (processId: string) => `aas_p_${processId.replace(/[^0-9a-zA-Z]/g, "").toLowerCase()}`;

export class RemoteCommandError extends Error {}

export class RemoteCommands {
  private nextId = 1;
  private readonly waiting = new Map<number, { resolve(v: unknown): void; reject(e: Error): void }>();
  private listening: Listening | null = null;

  constructor(
    private readonly channel: NotifyChannel,
    readonly processId: string,
    private readonly handle: (command: RemoteCommand) => Promise<unknown>,
    private readonly log: RuntimeLogger,
    private readonly timeoutMs = 10_000,
  ) {}

  async start(): Promise<void> {
    this.listening = await this.channel.listen(channelOf(this.processId), (text) => void this.receive(text));
  }

  async close(): Promise<void> {
    for (const w of this.waiting.values()) w.reject(new RemoteCommandError("server shutting down"));
    this.waiting.clear();
    // Shutting down: the connection closes next, and its LISTEN with it.
    await this.listening?.unlisten().catch((err) => this.log.warn({ err }, "could not stop listening for requests of other processes"));
  }

  /** Sends `command` to process `to` and waits for its answer (its error message is rethrown). */
  async send(to: string, command: RemoteCommand): Promise<unknown> {
    const id = this.nextId++;
    const answer = new Promise<unknown>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting.delete(id);
        reject(new RemoteCommandError(`the process running thread ${command.threadId} did not answer`));
      }, this.timeoutMs);
      this.waiting.set(id, {
        resolve: (v) => (clearTimeout(timer), resolve(v)),
        reject: (e) => (clearTimeout(timer), reject(e)),
      });
    });
    await this.notify(to, { from: this.processId, id, command });
    return answer;
  }

  private async notify(to: string, envelope: Envelope): Promise<void> {
    await this.channel.notify(channelOf(to), JSON.stringify(envelope));
  }

  private async receive(text: string): Promise<void> {
    let msg: Envelope;
    try {
      msg = JSON.parse(text) as Envelope;
    } catch {
      return;
    }
    if (!msg.command) {
      const w = this.waiting.get(msg.id);
      if (!w) return;
      this.waiting.delete(msg.id);
      if (msg.ok) w.resolve(msg.result);
      else w.reject(new RemoteCommandError(msg.error ?? "failed"));
      return;
    }
    let reply: Envelope;
    try {
      reply = { from: this.processId, id: msg.id, ok: true, result: (await this.handle(msg.command)) ?? null };
    } catch (err) {
      reply = { from: this.processId, id: msg.id, ok: false, error: err instanceof Error ? err.message : String(err) };
    }
    await this.notify(msg.from, reply).catch((err) => this.log.warn({ err, to: msg.from }, "could not answer another process"));
  }
}
