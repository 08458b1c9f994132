/**
 * `app-server exec "prompt"`: connects (or starts an embedded server), starts or continues a
 * thread, runs one turn, prints it as it streams, answers approvals (asking on the terminal, or
 * always / never), and exits with a code that says how the turn ended:
 *   0 completed · 1 failed (or the connection was lost) · 2 usage error · 130 interrupted
 * Ctrl-C sends turn/interrupt (a second Ctrl-C quits at once).
 */
import { createInterface } from "node:readline";
import path from "node:path";
import { statSync } from "node:fs";
import { parseArgs } from "node:util";
import { TurnRenderer } from "./render.js";
import type { RpcClient } from "./rpc-client.js";
import { openSession, UsageError } from "./session.js";
import { scriptOf } from "../tools/shell-invocation.js";

export const EXIT = { completed: 0, failed: 1, usage: 2, interrupted: 130 } as const;

export type ApproveMode = "ask" | "always" | "never";
type Decision = "accept" | "acceptForSession" | "decline" | "cancel" | { acceptWithExecpolicyAmendment: { execpolicy_amendment: string[] } };

export interface ExecIo {
  stdin: NodeJS.ReadableStream & { isTTY?: boolean };
  stdout: NodeJS.WritableStream & { isTTY?: boolean };
  stderr: NodeJS.WritableStream & { isTTY?: boolean };
  env: NodeJS.ProcessEnv;
  /** Subscribes to Ctrl-C; returns the unsubscribe function. */
  onInterrupt(listener: () => void): () => void;
}

export function processIo(): ExecIo {
  return {
    stdin: process.stdin,
    stdout: process.stdout,
    stderr: process.stderr,
    env: process.env,
    onInterrupt: (listener) => {
      process.on("SIGINT", listener);
      return () => process.off("SIGINT", listener);
    },
  };
}

const APPROVAL_POLICIES = ["untrusted", "on-request", "on-failure", "never"];
const SANDBOXES: Record<string, object> = {
  "read-only": { type: "readOnly" },
  "workspace-write": { type: "workspaceWrite" },
  "danger-full-access": { type: "dangerFullAccess" },
};

export const EXEC_OPTIONS = {
  thread: { type: "string" },
  url: { type: "string" },
  approve: { type: "string" },
  "approval-policy": { type: "string" },
  sandbox: { type: "string" },
  cwd: { type: "string" },
  model: { type: "string" },
  "model-provider": { type: "string" },
  json: { type: "boolean" },
  home: { type: "string" },
  token: { type: "string" },
} as const;

export interface ExecOptions {
  prompt: string;
  threadId?: string;
  url?: string;
  approve: ApproveMode;
  approvalPolicy?: string;
  sandbox?: string;
  cwd?: string;
  model?: string;
  modelProvider?: string;
  json: boolean;
  home?: string;
  token?: string;
}

export function parseExecArgs(args: string[], env: NodeJS.ProcessEnv): ExecOptions {
  let parsed;
  try {
    parsed = parseArgs({ args, options: EXEC_OPTIONS, allowPositionals: true, strict: true });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const { values, positionals } = parsed;
  if (positionals.length === 0) throw new UsageError('exec needs a prompt: app-server exec "what does this repo do?" (or - to read it from stdin)');
  if (positionals.length > 1) throw new UsageError(`exec takes one prompt; quote it (got ${positionals.length} arguments)`);
  const approve = values.approve ?? "ask";
  if (approve !== "ask" && approve !== "always" && approve !== "never") throw new UsageError(`--approve must be ask, always or never (got ${approve})`);
  const policy = values["approval-policy"];
  if (policy !== undefined && !APPROVAL_POLICIES.includes(policy)) throw new UsageError(`--approval-policy must be one of ${APPROVAL_POLICIES.join(", ")} (got ${policy})`);
  if (values.sandbox !== undefined && !(values.sandbox in SANDBOXES)) throw new UsageError(`--sandbox must be one of ${Object.keys(SANDBOXES).join(", ")} (got ${values.sandbox})`);
  if (values.url !== undefined && !/^wss?:\/\//.test(values.url)) throw new UsageError(`--url must be a ws:// or wss:// URL (got ${values.url})`);
  if (values.url !== undefined && values.home !== undefined) throw new UsageError("--home is for the embedded server; it cannot be combined with --url");
  // The thread's directory must exist before a turn runs in it. Checked here when the server is
  // on this machine (embedded, or a loopback --url); a remote server checks its own.
  if (values.cwd !== undefined && (values.url === undefined || isLoopbackUrl(values.url))) {
    const dir = path.resolve(values.cwd);
    let stat;
    try {
      stat = statSync(dir);
    } catch {
      throw new UsageError(`--cwd ${dir}: no such directory`);
    }
    if (!stat.isDirectory()) throw new UsageError(`--cwd ${dir}: not a directory`);
  }
  return {
    prompt: positionals[0]!,
    threadId: values.thread,
    url: values.url,
    approve,
    approvalPolicy: policy,
    sandbox: values.sandbox,
    cwd: values.cwd,
    model: values.model,
    modelProvider: values["model-provider"],
    json: values.json ?? false,
    home: values.home,
    token: values.token ?? (env.APP_SERVER_AUTH_TOKEN || undefined),
  };
}

function isLoopbackUrl(url: string): boolean {
  try {
    const host = new URL(url).hostname.replace(/^\[(.*)\]$/, "$1");
    return host === "localhost" || host === "::1" || /^127\./.test(host);
  } catch {
    return false;
  }
}

async function readAll(stream: NodeJS.ReadableStream): Promise<string> {
  let text = "";
  stream.setEncoding("utf8");
  for await (const chunk of stream) text += chunk as string;
  return text;
}

/** Runs `exec`; resolves with the exit code. */
export async function runExec(args: string[], io: ExecIo = processIo()): Promise<number> {
  let opts: ExecOptions;
  try {
    opts = parseExecArgs(args, io.env);
  } catch (err) {
    io.stderr.write(`app-server exec: ${(err as Error).message}\n`);
    return EXIT.usage;
  }
  let prompt = opts.prompt;
  let stdinUsed = false;
  if (prompt === "-") {
    prompt = await readAll(io.stdin);
    stdinUsed = true;
  }
  if (!prompt.trim()) {
    io.stderr.write("app-server exec: the prompt is empty\n");
    return EXIT.usage;
  }

  const color = Boolean(io.stderr.isTTY) && !io.env.NO_COLOR;
  const renderer = new TurnRenderer({ out: io.stdout, err: io.stderr, color });
  let session;
  try {
    session = await openSession(
      { url: opts.url, home: opts.home, token: opts.token, modelProvider: opts.url ? undefined : opts.modelProvider, model: opts.url ? undefined : opts.model, env: io.env, warn: (m) => renderer.info(`app-server exec: warning: ${m}`) },
      "app-server-exec",
    );
  } catch (err) {
    io.stderr.write(`app-server exec: ${(err as Error).message}\n`);
    return err instanceof UsageError ? EXIT.usage : EXIT.failed;
  }
  try {
    return await runTurn(session.client, opts, prompt, renderer, io, stdinUsed);
  } catch (err) {
    renderer.info(`app-server exec: ${(err as Error).message}`);
    return EXIT.failed;
  } finally {
    // The output is written and the exit code decided; a failed close (of the connection or of the
    // embedded server) changes neither, and the process exits right after, ending whatever it left open.
    await session.close().catch(() => {});
  }
}

async function runTurn(client: RpcClient, opts: ExecOptions, prompt: string, renderer: TurnRenderer, io: ExecIo, stdinUsed: boolean): Promise<number> {
  let threadId = opts.threadId ?? null;
  let turnId: string | null = null;
  const finished = new Map<string, any>();
  let resolveOutcome!: (code: number) => void;
  const outcome = new Promise<number>((resolve) => (resolveOutcome = resolve));
  let over = false;
  const settle = (code: number) => {
    if (over) return;
    over = true;
    resolveOutcome(code);
  };
  const codeOf = (turn: any) => (turn.status === "completed" ? EXIT.completed : turn.status === "interrupted" ? EXIT.interrupted : EXIT.failed);

  client.onNotification((method, params, frame) => {
    const of = params.threadId ?? params.thread?.id;
    if (threadId && of && of !== threadId) return;
    if (opts.json) io.stdout.write(`${JSON.stringify(frame)}\n`);
    else renderer.notification(method, params);
    if (method === "turn/completed") {
      if (params.turn.id === turnId) settle(codeOf(params.turn));
      else finished.set(params.turn.id, params.turn);
    }
  });
  void client.closed.then(({ code }) => {
    if (over) return;
    renderer.info(`app-server exec: the connection to the server closed (${code}) before the turn ended`);
    settle(EXIT.failed);
  });

  const approver = new Approver(opts.approve, renderer, io, stdinUsed, () => interrupt());
  client.handle("item/commandExecution/requestApproval", (p) => approver.decide("command", p));
  client.handle("item/fileChange/requestApproval", (p) => approver.decide("fileChange", p));
  client.handle("item/tool/call", () => ({ contentItems: [{ type: "inputText", text: "app-server exec implements no client-side tools" }], success: false }));

  // Ctrl-C: interrupt the turn; a second one quits without waiting.
  let interrupts = 0;
  const interrupt = () => {
    interrupts++;
    if (interrupts > 1 || !threadId || !turnId) {
      renderer.info("app-server exec: interrupted");
      settle(EXIT.interrupted);
      return;
    }
    renderer.info("interrupting the turn… (Ctrl-C again to quit now)");
    requestInterrupt(threadId, turnId);
  };
  // A failed interrupt leaves the turn running: say so (another Ctrl-C still quits), unless it has ended meanwhile.
  const requestInterrupt = (threadId: string, turnId: string) =>
    client.request("turn/interrupt", { threadId, turnId }).catch((err: Error) => {
      if (!over) renderer.info(`app-server exec: could not interrupt the turn: ${err.message}`);
    });
  const stopListening = io.onInterrupt(interrupt);

  try {
    // Always the caller's directory (or --cwd): never the server's own default.
    const cwd = path.resolve(opts.cwd ?? process.cwd());
    const opened = await openThread(client, opts, cwd);
    const { settings, turnOverrides } = opened;
    threadId = opened.threadId;
    renderer.cwd = cwd;
    const policy = opts.approvalPolicy ?? (typeof settings.approvalPolicy === "string" ? settings.approvalPolicy : "granular");
    renderer.info(
      renderer.style("dim", `thread ${threadId} · ${opts.model ?? settings.model} (${opts.modelProvider ?? settings.modelProvider}) · in ${cwd} · approval ${policy}`),
    );

    const { turn } = await client.request("turn/start", { threadId, input: [{ type: "text", text: prompt, text_elements: [] }], ...turnOverrides });
    turnId = turn.id as string;
    const early = finished.get(turnId);
    if (early) settle(codeOf(early));
    if (interrupts > 0) requestInterrupt(threadId, turnId);
    return await outcome;
  } finally {
    over = true; // closing the session from here on is expected, not a lost connection
    stopListening();
    approver.close();
  }
}

/**
 * The thread the turn runs on: --thread resumed (the flags then apply to the turn, as overrides),
 * or a new one started in `cwd` with them.
 */
async function openThread(client: RpcClient, opts: ExecOptions, cwd: string): Promise<{ threadId: string; settings: any; turnOverrides: Record<string, unknown> }> {
  const turnOverrides: Record<string, unknown> = {};
  if (opts.threadId) {
    const settings = await client.request("thread/resume", { threadId: opts.threadId, excludeTurns: true });
    turnOverrides.cwd = cwd;
    if (opts.approvalPolicy) turnOverrides.approvalPolicy = opts.approvalPolicy;
    if (opts.sandbox) turnOverrides.sandboxPolicy = SANDBOXES[opts.sandbox];
    if (opts.model) turnOverrides.model = opts.model;
    if (opts.modelProvider) turnOverrides.modelProvider = opts.modelProvider;
    return { threadId: opts.threadId, settings, turnOverrides };
  }
  const settings: any = await client.request("thread/start", {
    cwd,
    ...(opts.approvalPolicy ? { approvalPolicy: opts.approvalPolicy } : {}),
    ...(opts.sandbox ? { sandbox: opts.sandbox } : {}),
    // With --url these choose the thread's model; the embedded server already defaults to them.
    ...(opts.url && opts.model ? { model: opts.model } : {}),
    ...(opts.url && opts.modelProvider ? { modelProvider: opts.modelProvider } : {}),
  });
  return { threadId: settings.thread.id as string, settings, turnOverrides };
}

/** Answers approval requests per --approve; `ask` prompts on the terminal, one request at a time. */
class Approver {
  private queue: Promise<unknown> = Promise.resolve();
  private closed = false;

  constructor(
    private readonly mode: ApproveMode,
    private readonly renderer: TurnRenderer,
    private readonly io: ExecIo,
    private readonly stdinUsed: boolean,
    private readonly onInterrupt: () => void,
  ) {}

  decide(kind: "command" | "fileChange", p: any): Promise<{ decision: Decision }> {
    const what = kind === "command" ? `run \`${p.command ? scriptOf(p.command) : "a command"}\`${p.cwd ? ` in ${p.cwd}` : ""}` : `apply the file changes above${p.grantRoot ? ` (write access to ${p.grantRoot})` : ""}`;
    const next = this.queue.then(() => this.decideOne(what, p));
    // `next` (returned) carries a failure to its own request; the queue only orders the questions and must not break.
    this.queue = next.catch(() => {});
    return next.then((decision) => ({ decision }));
  }

  close(): void {
    this.closed = true;
  }

  private async decideOne(what: string, p: any): Promise<Decision> {
    const r = this.renderer;
    if (this.mode === "always") {
      r.info(r.style("green", `approved: ${what} (--approve always)`));
      return "accept";
    }
    if (this.mode === "never") {
      r.info(r.style("yellow", `declined: ${what} (--approve never)`));
      return "decline";
    }
    if (this.closed || !this.io.stdin.isTTY || this.stdinUsed) {
      r.info(r.style("yellow", `declined: ${what} — approval needed but stdin is not a terminal (use --approve always or --approve never)`));
      return "decline";
    }
    const allowed: Decision[] = p.availableDecisions?.length ? p.availableDecisions : ["accept", "acceptForSession", "decline", "cancel"];
    // The rule the server offers to save ("don't ask again for commands that start with …").
    const rule = allowed.find((d) => typeof d === "object");
    const keys: Array<[string, Decision, string]> = [
      ["y", "accept", "[y] yes"],
      ["s", "acceptForSession", "[s] yes for this session"],
      ...(rule ? [["p", rule, `[p] yes, and don't ask again for commands that start with \`${rule.acceptWithExecpolicyAmendment.execpolicy_amendment.join(" ")}\``] as [string, Decision, string]] : []),
      ["n", "decline", "[n] no"],
      ["c", "cancel", "[c] cancel the turn"],
    ];
    const offered = keys.filter(([, d]) => allowed.includes(d));
    r.info(`${r.style("yellow", "?")} ${r.style("bold", `Allow the agent to ${what}?`)}${p.reason ? `\n  ${r.style("dim", p.reason)}` : ""}`);
    const question = `  ${offered.map(([, , label]) => label).join("  ")} > `;
    for (;;) {
      const answer = (await this.ask(question)).trim().toLowerCase();
      if (answer === "\u0003") {
        this.onInterrupt();
        return "cancel";
      }
      if (answer === "\u0004") return "decline"; // end of input
      const hit = offered.find(([key, decision]) => answer === key || (typeof decision === "string" && answer === decision.toLowerCase()) || (key === "y" && answer === "yes") || (key === "n" && answer === "no"));
      if (hit) return hit[1];
    }
  }

  /** One line from the terminal; "\u0004" at end of input, "\u0003" on Ctrl-C. */
  private ask(question: string): Promise<string> {
    return new Promise((resolve) => {
      const rl = createInterface({ input: this.io.stdin, output: this.io.stderr, terminal: true });
      let done = false;
      const finish = (value: string) => {
        if (done) return;
        done = true;
        rl.close();
        resolve(value);
      };
      rl.on("SIGINT", () => finish("\u0003"));
      rl.on("close", () => finish("\u0004"));
      rl.question(question, (line) => finish(line));
    });
  }
}
